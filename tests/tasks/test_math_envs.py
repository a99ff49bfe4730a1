"""MATH envs: observations, feedback rounds, credit modes, the debate vote, bad input."""

import numpy as np
import pytest

import marft_envs
from marft_envs.tasks.math import MathChain, MathDebate, MathSolo
from marft_envs.tasks.math.debate import majority_vote
from marft_envs.tasks.math.problems import Problem
from marft_envs.tasks.math.scripted import chain_policy, copy_actor

P = Problem(question="Ana has 3 apples and buys 4 more. How many apples does she have?", answer="7", solution="3+4=7", source="test")


def play(env, answers_by_round):
    """Step the env through rounds; each round maps agent -> action. Returns the RoundResults."""
    results = []
    for actions in answers_by_round:
        result = None
        while result is None:
            result = env.step({a: actions[a] for a in env.ready_agents()})
        results.append(result)
    return results


def test_chain_observations_and_team_credit():
    env = MathChain()
    env.reset(seed=0, options={"problem": P})
    assert env.possible_agents == ["reasoner_0", "actor_0"]
    assert env.observe("reasoner_0")["text"] == f"Problem: {P.question}"
    assert "reasoner" in env.observe("reasoner_0")["instructions"]
    env.step({"reasoner_0": "3+4=7"})
    assert env.observe("actor_0")["text"].endswith("reasoner_0: 3+4=7")
    result = env.step({"actor_0": "\\boxed{7}"})
    assert result.rewards == {"reasoner_0": 1.0, "actor_0": 1.0}
    assert all(result.terminations.values())
    assert env.attempts[-1]["correct"]


@pytest.mark.parametrize(
    "credit, expected",
    [
        ("team", {"reasoner_0": 1.0, "actor_0": 1.0}),
        ("last", {"reasoner_0": 0.0, "actor_0": 1.0}),
        # per-agent: the reasoner's own last value is 8 (wrong), the actor's boxed 7 is right
        ("per_agent", {"reasoner_0": 0.0, "actor_0": 1.0}),
    ],
)
def test_credit_modes(credit, expected):
    env = MathChain(credit=credit)
    env.reset(seed=0, options={"problem": P})
    (result,) = play(env, [{"reasoner_0": "3+4=8", "actor_0": "\\boxed{7}"}])
    assert result.rewards == expected


def test_feedback_rounds_until_right():
    env = MathChain(rounds=3)
    env.reset(seed=0, options={"problem": P})
    r1, r2 = play(env, [{"reasoner_0": "3+4=8", "actor_0": "\\boxed{8}"}, {"reasoner_0": "3+4=7", "actor_0": "\\boxed{7}"}])
    assert not any(r1.terminations.values()) and r1.rewards["actor_0"] == 0.0
    assert all(r2.terminations.values()) and r2.rewards["actor_0"] == 1.0


def test_feedback_is_shown_and_attempts_run_out():
    env = MathChain(rounds=2)
    env.reset(seed=0, options={"problem": P})
    play(env, [{"reasoner_0": "x", "actor_0": "\\boxed{8}"}])
    assert "Attempt 1: the team answered 8, which is wrong. Try again." in env.observe("reasoner_0")["text"]
    (r2,) = play(env, [{"reasoner_0": "x", "actor_0": "\\boxed{9}"}])
    assert all(r2.terminations.values()) and env.agents == []


def test_malformed_answer_gets_zero_and_a_parse_note():
    env = MathSolo()
    env.reset(seed=0, options={"problem": P})
    result = env.step({"solver_0": "\x00 }{ \\boxed{"})
    assert result.rewards == {"solver_0": 0.0}
    assert "no final answer" in result.infos["solver_0"]["parse"]
    assert "parse" in env.info("solver_0")


def test_n_agent_chain_sees_every_earlier_agent():
    env = MathChain(n_agents=3)
    assert env.possible_agents == ["reasoner_0", "reasoner_1", "actor_0"]
    env.reset(seed=0, options={"problem": P})
    env.step({"reasoner_0": "3+4=7"})
    env.step({"reasoner_1": "check: 7"})
    text = env.observe("actor_0")["text"]
    assert "reasoner_0: 3+4=7" in text and "reasoner_1: check: 7" in text
    assert env.infos["actor_0"]["parents"] == ["reasoner_0", "reasoner_1"]


def test_debate_sees_previous_answers_and_votes():
    env = MathDebate(n_agents=3, rounds=2)
    env.reset(seed=0, options={"problem": P})
    assert env.ready_agents() == ["solver_0", "solver_1", "solver_2"]  # one layer
    r1, r2 = play(
        env,
        [
            {"solver_0": "\\boxed{7}", "solver_1": "\\boxed{8}", "solver_2": "\\boxed{6}"},
            {"solver_0": "\\boxed{7}", "solver_1": "\\boxed{7.0}", "solver_2": "\\boxed{6}"},
        ],
    )
    assert r1.rewards["solver_0"] == pytest.approx(1 / 3) and not any(r1.terminations.values())
    assert r2.rewards["solver_2"] == pytest.approx(2 / 3) and all(r2.terminations.values())
    assert env.attempts[-1]["answer"] == "7" and env.attempts[-1]["correct"]


def test_debate_observation_after_first_round():
    env = MathDebate(n_agents=2, rounds=2)
    env.reset(seed=0, options={"problem": P})
    play(env, [{"solver_0": "I say \\boxed{7}", "solver_1": "\\boxed{5}"}])
    text = env.observe("solver_0")["text"]
    assert "solver_1: \\boxed{5}" in text and "Your previous answer: I say \\boxed{7}" in text


@pytest.mark.parametrize(
    "answers, expected", [(["7", "7.0", "8"], "7"), (["8", "7", "7"], "7"), (["8", "7"], "8"), ([None, None], None), ([None, "3"], "3")]
)
def test_majority_vote(answers, expected):
    assert majority_vote(answers) == expected


def test_scripted_actor_reads_its_observation():
    rng = np.random.default_rng(0)
    assert copy_actor("actor_0", {"text": "Problem: ...\nreasoner_0: 2+3=5\n5*2=10"}, rng) == "\\boxed{10}"
    assert copy_actor("actor_0", {"text": "nothing here"}, rng) == "I do not know."


def test_scripted_chain_accuracy_follows_the_slip_rate():
    env = MathChain()
    policy = chain_policy(env, slip=0.0)
    rng = np.random.default_rng(0)
    for seed in range(30):
        env.reset(seed=seed)
        result = play_policy(env, policy, rng)
        assert result.rewards["actor_0"] == 1.0, env.problem


def play_policy(env, policy, rng):
    result = None
    while env.agents:
        result = env.step({a: policy(a, env.observe(a), rng) for a in env.ready_agents()}) or result
    return result


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"credit": "everyone"}, "unknown credit mode 'everyone'"),
        ({"rounds": 0}, "rounds must be at least 1"),
        ({"n_agents": 0}, "n_agents must be at least 1"),
        ({"profile": "/no/such/profile.json"}, "no such profile"),
        ({"profile": "general"}, "pass a shipped one ('default', 'general-v0', "),
        ({"profile": {"roles": {"reasoner": "r"}}}, "no prompt for roles ['actor']"),
        ({"n_agents": 2, "roles": ["actor"]}, "pass one of them"),
    ],
)
def test_bad_options_give_one_clear_line(kwargs, message):
    with pytest.raises((ValueError, FileNotFoundError)) as err:
        MathChain(**kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("n", [0, 65, 10**6, True, "3"])
def test_a_debate_takes_from_1_to_64_solvers(n):
    with pytest.raises(ValueError, match=r"^n_agents must be at least 1 and at most 64, got "):
        MathDebate(n_agents=n)
    assert len(MathDebate(n_agents=64).possible_agents) == 64


@pytest.mark.parametrize("env_id", ["marft/MathChain-v0", "marft/MathSolo-v0", "marft/MathDebate-v0"])
def test_the_general_profile_is_selected_by_name(env_id):
    env = marft_envs.make(env_id, profile="general-v0")
    env.reset(seed=0)
    default = marft_envs.make(env_id)
    default.reset(seed=0)
    for agent in env.possible_agents:
        prompt = env.observe(agent)["instructions"]
        assert "Example. Problem:" in prompt  # the worked example, absent from the default profile
        assert prompt != default.observe(agent)["instructions"]
    assert "\\boxed{answer}" in env.observe(env.possible_agents[-1])["instructions"]


def test_problems_from_a_file(fixtures):
    env = marft_envs.make("marft/MathSolo-v0", problems=str(fixtures / "gsm8k_small.jsonl"))
    env.reset(seed=0)
    assert env.problem.source and env.observe("solver_0")["text"].startswith("Problem: ")
    result = env.step({"solver_0": f"\\boxed{{{env.problem.answer}}}"})
    assert result.rewards["solver_0"] == 1.0


def test_general_v1_lays_out_the_actors_example_as_the_observation_is():
    """D7: the example labels the teammate as the observation does (``reasoner_0: ...`` on its own line)."""
    env = marft_envs.make("marft/MathChain-v0", profile="general-v1")
    env.reset(seed=0)
    env.step({"reasoner_0": "12+7=19."})
    seen = env.observe("actor_0")
    assert seen["text"].splitlines()[-1] == "reasoner_0: 12+7=19."
    example = seen["instructions"].split("Example.\n", 1)[1].splitlines()
    assert example[0].startswith("Problem: ") and example[1].startswith("reasoner_0: ") and example[2] == "Your reply: \\boxed{19}"
    assert "Do not continue or repeat the working" in seen["instructions"]
    assert "Teammate:" not in seen["instructions"]  # general-v0's label, which the observation never used
