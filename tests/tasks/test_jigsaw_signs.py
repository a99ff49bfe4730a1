"""marft/MathJigsaw-v1 pays a sharer only for its numbers as given, sign kept (issue 51, case 2).

v0 read a sharer's message as runs of digits, so ``-27`` passed on for the share's 27 was paid, on every
seed; v1 reads the sign. v0 stays registered, unchanged on ordinary input, for old results.
"""

from __future__ import annotations

import pytest

import marft_envs
from marft_envs.outcomes import OWN_CORRECT, REWARD_COMPONENTS
from marft_envs.tasks.math import MathJigsaw, MathJigsawV0, MathJigsawV1
from marft_envs.tasks.math.jigsaw import numbers_in, passes_on
from marft_envs.testing import Case, check_table

NEGATIONS = ["-{q}", "Tom has -{q} apples.", "\u2212{q}", "\u2013{q}", "\uff0d{q}", "minus {q}", "Negative {q}", "(-{q})"]


def sharer_scores(env_id: str, message: str, seeds=range(20), **kwargs) -> list[float]:
    """The sharer's per_agent reward when it passes on its share's quantity as ``message`` formats it."""
    env = marft_envs.make(env_id, levels=1, credit="per_agent", **kwargs)
    scores = []
    for seed in seeds:
        env.reset(seed=seed)
        (q,) = env.problem.quantities[0]
        env.step({"sharer_0": message.format(q=q)})
        result = env.step({"answerer_0": "\\boxed{0}"})
        assert result.infos["sharer_0"][REWARD_COMPONENTS][OWN_CORRECT] == result.rewards["sharer_0"]
        scores.append(result.rewards["sharer_0"])
    return scores


@pytest.mark.parametrize("message", NEGATIONS)
def test_v1_does_not_pay_a_negated_number_on_any_seed(message):
    assert sharer_scores("marft/MathJigsaw-v1", message) == [0.0] * 20


@pytest.mark.parametrize("message", ["{q}", "Tom has {q} apples.", "Tom has {q} apples - as told.", "- {q} apples"])
def test_v1_still_pays_the_number_as_given(message):
    assert sharer_scores("marft/MathJigsaw-v1", message) == [1.0] * 20


def test_v0_is_kept_as_it_was():
    assert sharer_scores("marft/MathJigsaw-v0", "-{q}") == [1.0] * 20  # the old grader, for old results
    assert sharer_scores("marft/MathJigsaw-v0", "{q}") == [1.0] * 20
    assert type(marft_envs.make("marft/MathJigsaw-v0")) is MathJigsawV0
    assert type(marft_envs.make("marft/MathJigsaw-v1")) is MathJigsawV1 and type(marft_envs.make("marft/MathJigsaw-v2")) is MathJigsaw
    assert MathJigsawV0.metadata["name"] == "marft/MathJigsaw-v0" and MathJigsawV1.metadata["name"] == "marft/MathJigsaw-v1"
    assert MathJigsaw.metadata["name"] == "marft/MathJigsaw-v2"


def test_a_chain_sharer_must_keep_every_sign():
    env = marft_envs.make("marft/MathJigsaw-v1", n_agents=3, levels=1, credit="per_agent")
    env.reset(seed=0)
    first, second = env.problem.quantities[0][0], env.problem.quantities[1][0]
    env.step({"sharer_0": f"{first}"})
    env.step({"sharer_1": f"{first} and -{second}"})
    rewards = env.step({"answerer_0": "\\boxed{0}"}).rewards
    assert rewards["sharer_0"] == 1.0 and rewards["sharer_1"] == 0.0


def test_numbers_in_reads_signs():
    check_table(
        numbers_in,
        [
            Case(("Tom has 17 apples.",), [17]),
            Case(("-17 and 3",), [-17, 3]),
            Case(("44-14",), [44, -14]),
            Case(("17 - 3",), [17, 3]),  # a spaced dash is punctuation
            Case(("minus 5, negative 6, nonnegative 7",), [-5, -6, 7]),
            Case(("sharer_0 says 17",), [0, 17]),  # digits in a name count, as in v0
            Case(("1" * 5000,), ["1" * 5000]),  # past int()'s digit limit: a string, never a quantity
            Case(("-" + "1" * 5000,), ["-" + "1" * 5000]),
        ],
    )
    assert numbers_in("-17 minus 3", signed=False) == [17, 3]


def test_passes_on_keeps_v0_cases_and_refuses_negations():
    check_table(
        passes_on,
        [
            Case(("Tom has 17 apples. Tom sells 3.", [17, 3]), True),
            Case(("-17 3", [17, 3]), False),
            Case(("Tom has 17 apples. Tom sells -3.", [17, 3]), False),
            Case(("Tom has 17 apples.", [17, 3]), False),
        ],
    )
    assert passes_on("-17 3", [17, 3], signed=False)


@pytest.mark.parametrize("env_id", ["marft/MathJigsaw-v0", "marft/MathJigsaw-v1"])
def test_a_number_too_long_for_int_scores_zero_instead_of_stopping_the_env(env_id):
    assert sharer_scores(env_id, "1" * 5000, seeds=range(2)) == [0.0, 0.0]
