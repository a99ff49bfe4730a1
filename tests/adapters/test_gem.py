"""GEM both ways: marft envs behind GEM's MultiAgentEnv (the behaviours GEM's multi-agent API checks), GEM's envs as FlexEnvs."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.adapters
pytest.importorskip("gem")

from gem.multiagent import MultiAgentEnv  # noqa: E402

import marft_envs  # noqa: E402
from marft_envs.adapters.gem import gem_multiagent_env, register_envs  # noqa: E402
from marft_envs.testing import check_env  # noqa: E402


def test_the_entry_point_registers_gem_without_importing_it():
    assert register_envs() == ["marft/GEM-v0"]
    code = (
        "import sys, marft_envs; from marft_envs.plugins import load_entry_points; load_entry_points(); "
        "assert 'marft/GEM-v0' in marft_envs.list_envs(); assert 'gem' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_sequential_mode_follows_the_round_graph_and_pays_the_round_reward():
    env = gem_multiagent_env("marft/MathChain-v0")
    assert isinstance(env, MultiAgentEnv)
    observations, infos = env.reset(seed=3)
    assert set(observations) == set(env.possible_agents) == {"reasoner_0", "actor_0"}
    assert observations["actor_0"] == f"{infos['actor_0']['instructions']}\n\n{infos['actor_0']['text']}"
    assert env.agent_selector.get_active_agents() == ["reasoner_0"]
    with pytest.raises(ValueError, match="Missing action for active agent reasoner_0"):
        env.step({})
    with pytest.raises(ValueError, match="actor_0 provided action but is not active"):
        env.step({"reasoner_0": "hm", "actor_0": "42"})
    obs, rewards, terminations, _, _ = env.step({"reasoner_0": "I think the answer is 7."})
    assert rewards == {"reasoner_0": 0.0} and not any(terminations.values())
    assert "I think the answer is 7." in obs["actor_0"]  # the actor sees its parent's message this round
    assert env.agent_selector.get_active_agents() == ["actor_0"]
    answer = env.flex.problem.answer  # the gold answer: a right final answer pays the team
    _, rewards, terminations, _, _ = env.step({"actor_0": f"\\boxed{{{answer}}}"})
    assert rewards == {"reasoner_0": 1.0, "actor_0": 1.0}
    assert all(terminations.values()) and env.agents == []  # GEM removes finished agents


def test_parallel_mode_takes_a_whole_dec_pomdp_round_and_refuses_a_partial_one():
    env = gem_multiagent_env("marft/MathDebate-v0", mode="parallel", n_agents=3, rounds=2)
    env.reset(seed=0)
    active = env.agent_selector.get_active_agents()
    assert active == env.possible_agents and len(active) == 3
    with pytest.raises(ValueError, match="Missing action"):
        env.step({active[0]: "1"})
    _, rewards, terminations, truncations, _ = env.step(dict.fromkeys(active, "\\boxed{1}"))
    assert set(rewards) == set(active) and not any(terminations.values()) and not any(truncations.values())


def test_spawn_same_state_is_an_independent_twin():
    env = gem_multiagent_env("marft/MathChain-v0")
    env.reset(seed=5)
    env.step({"reasoner_0": "step one"})
    twin = env.spawn(same_state=True)
    assert twin.agents == env.agents and twin.observe("actor_0") == env.observe("actor_0")
    got_twin = twin.step({"actor_0": "\\boxed{0}"})
    assert env.agent_selector.get_active_agents() == ["actor_0"]  # the original has not moved
    assert env.step({"actor_0": "\\boxed{0}"}) == got_twin
    with pytest.raises(ValueError, match="no env overrides"):
        env.spawn(same_state=True, seed=1)


def test_bad_mode_and_bad_env_are_refused_in_one_line():
    with pytest.raises(ValueError, match="mode must be one of"):
        gem_multiagent_env("marft/MathChain-v0", mode="round_robin")
    with pytest.raises(TypeError, match="wraps a FlexEnv"):
        gem_multiagent_env(object())


def test_gem_env_passes_the_checkers():
    report = check_env("marft/GEM-v0", seeds=range(3))  # a failing check raises
    assert {"pettingzoo.api_test", "gymnasium.check_env", "marft.determinism", "marft.branching"} <= set(report.passed), report


def test_gem_env_plays_guess_the_number_on_its_own_random_state():
    env = marft_envs.make("marft/GEM-v0", gem_id="game:GuessTheNumber-v0-easy")
    random.seed(123)
    np.random.seed(123)
    outside = (random.random(), np.random.random())
    random.seed(123)
    np.random.seed(123)
    env.reset(seed=0)
    assert "Guess The Number" in env.observe("player_0")["instructions"]
    target = env.gem_env.game_number
    result = env.step({"player_0": f"\\boxed{{{target}}}"})
    assert result.rewards["player_0"] == 1.0 and result.terminations["player_0"] and env.agents == []
    assert (random.random(), np.random.random()) == outside  # GEM's seeding did not touch the process's generators
    again = marft_envs.make("marft/GEM-v0", gem_id="game:GuessTheNumber-v0-easy")
    again.reset(seed=0)
    assert again.gem_env.game_number == target  # the episode is a function of the seed


def test_unknown_gem_id_is_one_line():
    with pytest.raises(ValueError, match="GEM could not make 'game:NoSuchGame'"):
        marft_envs.make("marft/GEM-v0", gem_id="game:NoSuchGame")
