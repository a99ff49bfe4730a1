"""FlexEnv and its views: ordering, dynamic graphs, rewards, errors — on small toy envs."""

import pettingzoo
import pytest
from toy_envs import Coordinated, Echo, Guess

from marft_envs import AECView, FlexEnvError, GymView, ParallelView
from marft_envs.testing import check_env


def test_layered_chain_episode():
    env = Echo()
    infos = env.reset(seed=3)
    assert infos["listener_0"]["parents"] == ["speaker_0"]
    assert env.ready_agents() == ["speaker_0"]
    assert env.step({"speaker_0": env.word}) is None
    assert env.ready_agents() == ["listener_0"]
    assert env.observe("listener_0")["text"] == f"Speaker: {env.word}"
    result = env.step({"listener_0": env.word})
    assert result.rewards == {"speaker_0": 1.0, "listener_0": 1.0}
    assert result.terminations == {"speaker_0": False, "listener_0": False}
    assert env.infos["speaker_0"]["reward_components"] == {"match": 1.0}
    env.step({"speaker_0": "x"})
    result = env.step({"listener_0": "wrong"})
    assert result.rewards["listener_0"] == 0.0 and all(result.terminations.values())
    assert env.agents == [] and env.ready_agents() == []


def test_infos_are_fresh_dicts():
    env = Echo()
    env.reset(seed=0)
    env.infos["speaker_0"]["parents"].append("junk")
    assert env.infos["speaker_0"]["parents"] == []
    assert env.infos["speaker_0"] is not env.infos["speaker_0"]


def test_errors_are_clear():
    env = Echo()
    with pytest.raises(FlexEnvError, match="call reset"):
        env.step({"speaker_0": "hi"})
    env.reset(seed=0)
    with pytest.raises(FlexEnvError, match=r"'listener_0' cannot act yet: it waits for \['speaker_0'\]"):
        env.step({"listener_0": "hi"})
    with pytest.raises(FlexEnvError, match="unknown agent 'nobody'"):
        env.step({"nobody": "hi"})
    with pytest.raises(FlexEnvError, match="must be a string"):
        env.step({"speaker_0": 3})
    env.step({"speaker_0": "a"})
    with pytest.raises(FlexEnvError, match="already acted"):
        env.step({"speaker_0": "again"})
    env.step({"listener_0": "b"})
    env.step({"speaker_0": "a"})
    env.step({"listener_0": "b"})
    with pytest.raises(FlexEnvError, match="episode is over; call reset"):
        env.step({"speaker_0": "late"})


def test_any_string_is_a_valid_action():
    env = Echo(rounds=1)
    env.reset(seed=0)
    env.step({"speaker_0": "\x00\uffff" * 1000})
    result = env.step({"listener_0": ""})
    assert result.rewards["listener_0"] == 0.0


def test_aec_order_and_rewards():
    env = AECView(Echo())
    env.reset(seed=1)
    order = []
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        order.append(agent)
        env.step(None if term or trunc else env.env.word)
    assert order == ["speaker_0", "listener_0"] * 2 + ["speaker_0", "listener_0"]  # last two are dead steps


def test_aec_step_after_end_is_a_clear_error():
    env = AECView(Echo(rounds=1))
    env.reset(seed=0)
    for agent in env.agent_iter():
        env.step(None if env.terminations[agent] else "x")
    with pytest.raises(FlexEnvError, match="call reset"):
        env.step("x")


def test_dynamic_graph_set_by_coordinator():
    env = Coordinated()
    env.reset(seed=0)
    assert env.ready_agents() == ["coordinator_0"]
    env.step({"coordinator_0": "b>a"})
    assert env.ready_agents() == ["worker_1"]
    assert env.infos["worker_0"]["parents"] == ["coordinator_0", "worker_1"]
    env.step({"worker_1": "done"})
    assert "worker_1 said done" in env.observe("worker_0")["text"]
    env.step({"worker_0": "ok"})

    env.reset(seed=0)
    env.step({"coordinator_0": "in parallel"})
    assert env.ready_agents() == ["worker_0", "worker_1"]  # one layer: a trainer batches them


def test_aec_follows_the_dynamic_graph():
    env = AECView(Coordinated())
    env.reset(seed=0)
    env.step("b>a")
    assert env.agent_selection == "worker_1"


def test_an_agent_that_acted_cannot_gain_a_parent():
    env = Coordinated(cheat=True)
    env.reset(seed=0)
    env.step({"coordinator_0": "none"})
    with pytest.raises(ValueError, match="'worker_1' already acted .* cannot gain parents"):
        env.step({"worker_1": "x"})


def test_parallel_view_refuses_dependencies():
    with pytest.raises(ValueError, match=r"speaker_0 -> listener_0.*use the AEC view"):
        ParallelView(Echo())


def test_gym_view_needs_one_agent():
    with pytest.raises(ValueError, match="needs exactly one"):
        GymView(Echo())


def test_parallel_agents_drop_out_individually():
    env = ParallelView(Guess())
    obs, infos = env.reset(seed=0)
    assert set(obs) == set(infos) == {"guesser_0", "guesser_1", "guesser_2"}
    _, _, terms, _, _ = env.step({a: "1" for a in env.agents})
    assert terms == {"guesser_0": False, "guesser_1": True, "guesser_2": False}
    assert env.agents == ["guesser_0", "guesser_2"]
    with pytest.raises(FlexEnvError, match=r"missing \['guesser_2'\]"):
        env.step({"guesser_0": "1"})


def test_seeding_reproduces_and_varies():
    words = set()
    for seed in range(20):
        a, b = Echo(), Echo()
        a.reset(seed=seed)
        b.reset(seed=seed)
        assert a.word == b.word
        words.add(a.word)
    assert len(words) > 1


@pytest.mark.parametrize("make", [Echo, Guess, Coordinated, lambda: Echo(rounds=3), lambda: Guess(n=1)])
def test_toy_envs_pass_every_checker(make):
    report = check_env(make, seeds=range(4), num_cycles=20)
    assert "pettingzoo.api_test" in report.passed and "marft.determinism" in report.passed


def test_check_env_runs_parallel_and_gym_checkers_where_they_apply():
    assert "marft.dec_pomdp_equivalence" in check_env(Guess, seeds=range(3)).passed
    assert "gymnasium.check_env" in check_env(lambda: Guess(n=1), seeds=range(2)).passed
    assert "pettingzoo.parallel_api_test" not in check_env(Echo, seeds=range(2)).passed


def test_check_env_catches_nondeterminism():
    import random

    class Flaky(Echo):
        def reset_task(self, options):
            self.word = random.choice(["red", "green", "blue", "cyan", "pink", "gold"])  # not from np_random

    with pytest.raises(AssertionError):
        check_env(Flaky, seeds=range(6))


def test_check_env_catches_aec_parallel_mismatch():
    class Lopsided(Guess):
        def observe_text(self, agent):
            # Leaks how many agents acted so far: differs between one-at-a-time and all-at-once.
            return f"{len(self.round_actions)} acted"

    with pytest.raises(AssertionError, match="AEC and Parallel observations differ"):
        check_env(Lopsided, seeds=range(2))


def test_registered_in_pettingzoo_after_import():
    import marft_envs  # noqa: F401

    assert "marft/MathChain-v0" in pettingzoo.aec_registry
