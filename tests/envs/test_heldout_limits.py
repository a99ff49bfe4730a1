"""Held-out queries refuse an impossible ``n`` at once, in one line, naming ``n`` and the limit.

``env.heldout_options(10**9)`` used to draw for minutes (MathChain) or run out of memory (Booking).
The limit is ``MAX_HELDOUT`` (10,000, the CLI's ``--episodes`` bound) for sources that make their
episodes, and the size of a fixed list when it is larger; a fixed list asked for more than it holds
still gives all of it.
"""

import pytest

import marft_envs
from marft_envs.tasks.code.tasks import corpus_tasks
from marft_envs.tasks.math import synthetic
from marft_envs.tasks.math.problems import FileProblems, Problem
from marft_envs.tasks.math.synthetic import SyntheticMath
from marft_envs.validation import MAX_HELDOUT, check_heldout_n

ENVS = ["marft/MathChain-v0", "marft/Booking-v0", "marft/CodeRepair-v0"]
BAD = [MAX_HELDOUT + 1, -1, 2.0, "3", True, None]


@pytest.mark.parametrize("env_id", ENVS)
@pytest.mark.parametrize("n", BAD, ids=repr)
def test_heldout_options_refuses_an_impossible_n_in_one_line(env_id, n):
    env = marft_envs.make(env_id, **(marft_envs.spec(env_id).eval_kwargs or {}))
    with pytest.raises(ValueError) as err:
        env.heldout_options(n, 0)
    message = str(err.value)
    assert "\n" not in message and f"got {n!r}" in message and f"from 0 to {MAX_HELDOUT}" in message
    assert message.startswith(f"{env_id}.heldout_options: n ")


@pytest.mark.parametrize("env_id", ENVS)
def test_heldout_options_still_answers_a_possible_n(env_id):
    env = marft_envs.make(env_id, **(marft_envs.spec(env_id).eval_kwargs or {}))
    assert env.heldout_options(0, 0) == []
    assert len(env.heldout_options(3, 0)) == 3
    assert env.heldout_options(2, 0) == env.heldout_options(3, 0)[:2]


def test_the_default_heldout_options_take_the_limit_itself():
    # Booking plays the seeds alone: n empty dicts, up to the cap (at once, not 10**9 of them).
    env = marft_envs.make("marft/Booking-v0")
    assert env.heldout_options(MAX_HELDOUT, 0) == [{}] * MAX_HELDOUT


def test_sources_refuse_past_their_limit_and_a_fixed_list_still_gives_all_it_holds():
    problems = FileProblems([Problem(f"q{k}", str(k), uid=f"u{k}") for k in range(6)], name="six")
    assert problems.max_heldout == MAX_HELDOUT
    assert len(problems.heldout(100)) == 6
    tasks = corpus_tasks("test")
    assert len(tasks.heldout(MAX_HELDOUT)) == len(tasks)
    for source in (problems, tasks, SyntheticMath(split="test")):
        with pytest.raises(ValueError, match=rf"^{source.name} heldout: n .* from 0 to {MAX_HELDOUT}, got {MAX_HELDOUT + 1}$"):
            source.heldout(MAX_HELDOUT + 1)
    big = FileProblems([Problem(f"q{k}", "1", uid=f"u{k}") for k in range(MAX_HELDOUT + 5)], name="big")
    assert big.max_heldout == MAX_HELDOUT + 5 and len(big.heldout(MAX_HELDOUT + 5)) == MAX_HELDOUT + 5


def test_a_small_synthetic_level_set_runs_out_soon(monkeypatch):
    # Level 0 has 86 distinct test problems (112 split by uid); asking it for 10,000 drew 501,000 problems (3 minutes)
    # before refusing. Now it stops once thousands of draws in a row bring nothing new.
    source = SyntheticMath(levels=(0,))
    draws = []
    real = SyntheticMath._draw

    def counted(self, rng, split, levels=None):
        draws.append(1)
        if len(draws) > 20_000:
            raise AssertionError("heldout kept drawing long after the split ran out")
        return real(self, rng, split, levels)

    monkeypatch.setattr(SyntheticMath, "_draw", counted)
    with pytest.raises(ValueError, match="found only 86 distinct test problems; ask for fewer"):
        source.heldout(MAX_HELDOUT)
    assert len(source.heldout(86)) == 86  # all of them, when asked for no more
    assert synthetic._MAX_STALE < 20_000


def test_check_heldout_n_on_hand_made_values():
    assert check_heldout_n(0, 5, "x") == 0
    assert check_heldout_n(5, 5, "x") == 5
    import numpy as np

    assert check_heldout_n(np.int64(4), 5, "x") == 4 and type(check_heldout_n(np.int64(4), 5, "x")) is int
    with pytest.raises(ValueError, match=r"^x: n \(held-out episodes\) must be an integer from 0 to 5, got 6$"):
        check_heldout_n(6, 5, "x")
    with pytest.raises(ValueError) as err:
        check_heldout_n("9" * 1000, 5, "x")
    assert len(str(err.value)) <= 200
