"""The MATH envs' reward for one attempt (marft_envs/rewards/math_attempt.py), against hand-computed numbers."""

import pytest

import marft_envs
from marft_envs.rewards.math_attempt import grade_attempt
from marft_envs.tasks.math.debate import majority_vote
from marft_envs.tasks.math.problems import Problem
from marft_envs.testing import Case, cases, check_table

CHAIN = ["actor_0"]
SOLVERS = ["solver_0", "solver_1", "solver_2"]


def last(answers):
    """The chain's pick: the last answering agent's answer (None when none acted)."""
    return list(answers.values())[-1] if answers else None


def vote(answers):
    """The debate's pick: the majority of the solvers' answers."""
    return majority_vote(list(answers.values()))


def scores(actions, answering, pick, format_reward=0.0):
    """What the env credits: (team, own correct by agent, team answer, solved, format bonus by agent)."""
    g = grade_attempt(actions, "7", answering, pick, format_reward)
    return g.team, g.correct, g.team_answer, g.solved, g.format


TABLE = [
    Case(
        ({"reasoner_0": "3+4=8", "actor_0": "so \\boxed{7}"}, CHAIN, last),
        (1.0, {"reasoner_0": False, "actor_0": True}, "7", True, {}),
        id="chain right",
    ),
    Case(
        ({"reasoner_0": "3+4=7", "actor_0": "\\boxed{8}"}, CHAIN, last),
        (0.0, {"reasoner_0": True, "actor_0": False}, "8", False, {}),
        id="only the actor counts",
    ),
    Case(
        ({"reasoner_0": "hm", "actor_0": "no idea"}, CHAIN, last),
        (0.0, {"reasoner_0": False, "actor_0": False}, None, False, {}),
        id="no answer",
    ),
    Case(({"reasoner_0": "3+4=7"}, CHAIN, last), (0.0, {"reasoner_0": True}, None, False, {}), id="no answering agent acted"),
    Case(
        ({"reasoner_0": "x", "actor_0": "\\boxed{8}"}, CHAIN, last, 0.1),
        (0.0, {"reasoner_0": False, "actor_0": False}, "8", False, {"actor_0": 0.1}),
        id="format bonus, wrong",
    ),
    Case(
        ({"reasoner_0": "x", "actor_0": "7"}, CHAIN, last, 0.1),
        (1.0, {"reasoner_0": False, "actor_0": True}, "7", True, {"actor_0": 0.0}),
        id="right but not boxed",
    ),
    Case(
        ({"solver_0": "\\boxed{7}", "solver_1": "\\boxed{8}", "solver_2": "\\boxed{7.0}"}, SOLVERS, vote),
        (2 / 3, {"solver_0": True, "solver_1": False, "solver_2": True}, "7", True, {}),
        id="debate: two of three right, the vote is right",
    ),
    Case(
        ({"solver_0": "\\boxed{7}", "solver_1": "\\boxed{8}", "solver_2": "\\boxed{8}"}, SOLVERS, vote, 0.5),
        (1 / 3, {"solver_0": True, "solver_1": False, "solver_2": False}, "8", False, {"solver_0": 0.5, "solver_1": 0.5, "solver_2": 0.5}),
        id="debate: one right, the vote is wrong",
    ),
]


@cases(TABLE)
def test_grade_attempt(case):
    check_table(scores, [case])


@pytest.mark.parametrize("credit", ["team", "last", "per_agent"])
def test_mathchain_rewards_and_infos_are_the_formulas(credit):
    # The env adds nothing to the formula: its rewards are the credit split of team/own plus the format bonus.
    env = marft_envs.make("marft/MathChain-v0", credit=credit, format_reward=0.25)
    env.reset(seed=0, options={"problem": Problem(question="What is 3 + 4?", answer="7")})
    env.step({"reasoner_0": "3+4=7"})
    result = env.step({"actor_0": "\\boxed{7}"})
    expected = {
        "team": {"reasoner_0": 1.0, "actor_0": 1.25},
        "last": {"reasoner_0": 0.0, "actor_0": 1.25},
        "per_agent": {"reasoner_0": 1.0, "actor_0": 1.25},
    }
    assert result.rewards == expected[credit]
    assert result.infos["actor_0"]["reward_components"] == {"team": 1.0, "own_correct": 1.0, "format": 0.25}
    assert result.infos["reasoner_0"]["reward_components"] == {"team": 1.0, "own_correct": 1.0}
    assert (result.infos["actor_0"]["answer"], result.infos["actor_0"]["team_answer"], result.infos["actor_0"]["solved"]) == (
        "7",
        "7",
        True,
    )
