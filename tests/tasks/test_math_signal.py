"""The MATH envs' signal hooks: difficulty levels on request, and the gold-free format reward."""

from __future__ import annotations

import numpy as np
import pytest

import marft_envs
from marft_envs.core import FlexEnv
from marft_envs.tasks.math.problems import FileProblems
from marft_envs.tasks.math.synthetic import SyntheticMath
from marft_envs.testing import check_env


def test_synthetic_levels_are_drawn_on_request():
    source = SyntheticMath((0, 2, 3))
    assert source.levels == (0, 2, 3)
    rng = np.random.default_rng(0)
    assert {source.sample_at(rng, 2).level for _ in range(30)} == {2}
    assert all(p.uid.startswith("l3_") for p in (source.sample_at(rng, 3) for _ in range(10)))
    with pytest.raises(ValueError, match=r"has levels \[0, 2, 3\], not 4"):
        source.sample_at(rng, 4)
    # the default draw is what it always was: the same problems from the same generator state
    assert [SyntheticMath().sample(np.random.default_rng(5)).uid for _ in range(3)] == [
        SyntheticMath().sample(np.random.default_rng(5)).uid
    ] * 3


def test_file_levels_come_from_the_level_column():
    rows = [{"problem": "a", "answer": 1, "level": "Level 2"}, {"problem": "b", "answer": 2, "level": 5}, {"problem": "c", "answer": 3}]
    source = FileProblems.from_rows(rows, name="rows")
    assert source.levels == (2, 5)
    assert source.sample_at(np.random.default_rng(0), 5).question == "b"
    with pytest.raises(ValueError, match="not 3"):
        source.sample_at(np.random.default_rng(0), 3)


def test_the_env_declares_its_difficulties_and_plays_one():
    env = marft_envs.make("marft/MathChain-v0", problems="synthetic:1,4")
    assert env.difficulties() == (1, 4)
    for seed in range(5):
        env.reset(seed=seed, options={"difficulty": 4})
        assert env.problem.level == 4
    env.reset(seed=3, options={"difficulty": 1})
    first = env.problem
    env.reset(seed=3, options={"difficulty": 1})
    assert env.problem == first  # seeded: a group on one seed and one level plays one problem
    assert FlexEnv.difficulties(env) == ()  # the contract's default: no levels declared
    check_env(marft_envs.make("marft/MathChain-v0", format_reward=0.1), seeds=range(2))


def test_format_reward_is_added_to_the_answering_agent_only():
    plain = marft_envs.make("marft/MathChain-v0")
    shaped = marft_envs.make("marft/MathChain-v0", format_reward=0.25)
    for env in (plain, shaped):
        env.reset(seed=0)
        env.step({"reasoner_0": "\\boxed{1}"})  # the reasoner's box earns nothing: it does not answer
    wrong = "\\boxed{-987654}"
    r_plain = plain.step({"actor_0": wrong})
    r_shaped = shaped.step({"actor_0": wrong})
    # wrong but readable: team reward 0, plus 0.25 * 1 for the box
    assert r_plain.rewards == {"reasoner_0": 0.0, "actor_0": 0.0}
    assert r_shaped.rewards == {"reasoner_0": 0.0, "actor_0": 0.25}
    assert r_shaped.infos["actor_0"]["reward_components"]["format"] == 0.25
    assert "format" not in r_plain.infos["actor_0"]["reward_components"]
    assert r_shaped.infos["actor_0"]["solved"] is False  # the bonus never makes a wrong answer right

    shaped.reset(seed=0)
    shaped.step({"reasoner_0": "x"})
    right = f"\\boxed{{{shaped.problem.answer}}}"
    assert shaped.step({"actor_0": right}).rewards["actor_0"] == 1.25
    shaped.reset(seed=0)
    shaped.step({"reasoner_0": "x"})
    assert shaped.step({"actor_0": "no box at all"}).rewards["actor_0"] == 0.0


def test_cory_adds_both_agents_format_bonus_to_its_shared_reward():
    env = marft_envs.make("marft/MathCORY-v0", format_reward=0.5)
    env.reset(seed=0)
    while env.agents:
        result = env.step({a: "\\boxed{-987654}" for a in env.ready_agents()})
    # both wrong, both boxed: each agent gets 0 + 0.5 + 0.5
    assert set(result.rewards.values()) == {1.0}


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.1"])
def test_format_reward_out_of_range_is_one_line(bad):
    with pytest.raises(ValueError, match=r"format_reward must be a number in \[0, 1\]"):
        marft_envs.make("marft/MathSolo-v0", format_reward=bad)
