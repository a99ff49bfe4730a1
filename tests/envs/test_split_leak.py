"""Held-out problems are held out: no test or validation problem's numbers and answer occur in train (issue 53).

The key is a problem's numbers (sorted: a wording may give them in any order) and its answer, computed here
from what the problem shows (the uid's numbers or the shares' quantities, the gold answer), not with the
library's ``arithmetic_key``. Small problem sets are checked whole (every problem of synthetic level 0 and 1
and of MathJigsaw level 1 for two agents); the others from many train draws and the held-out sets evaluation
uses. The first release's split by uid is checked the same way and leaks, so these checks can fail.
"""

import re
from fractions import Fraction

import numpy as np
import pytest

from marft_envs.tasks.math.jigsaw_problems import LEVELS, JigsawMath, needs_every_share
from marft_envs.tasks.math.problem import Problem
from marft_envs.tasks.math.synthetic import TEMPLATES, SyntheticMath

HELDOUT = 112  # what the real-model experiments evaluated on
TRAIN_DRAWS = 8_000
OLD_TRAIN_DRAWS = 4_000  # enough for the uid split to show its leak


def gold(answer: str) -> Fraction:
    """A gold answer's value: ``38``, ``-4``, ``\\frac{7}{3}``."""
    match = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", answer)
    return Fraction(int(match[2]) * (-1 if match[1] else 1), int(match[3])) if match else Fraction(int(answer))


def key(numbers, answer) -> tuple:
    return tuple(sorted(Fraction(x) for x in numbers)), Fraction(answer)


def key_of(problem: Problem) -> tuple:
    if problem.source == "jigsaw":
        return key([q for share in problem.quantities for q in share], gold(problem.answer))
    return key([Fraction(x) for x in problem.uid.split(":")[1].split(",")], gold(problem.answer))


def leaks(keys_by_split: dict[str, set]) -> dict[str, int]:
    """How many held-out keys occur in train, by held-out split, and in both validation and test."""
    train = keys_by_split["train"]
    out = {split: len(keys & train) for split, keys in keys_by_split.items() if split != "train"}
    out["validation & test"] = len(keys_by_split.get("validation", set()) & keys_by_split["test"])
    return out


# -- whole problem sets ---------------------------------------------------------------------------


def synthetic_space(level: int) -> list:
    """Every (template, numbers) of a synthetic level 0 or 1: two numbers up to 20 or 99, a minus never below 2."""
    hi, out = (20 if level == 0 else 99), []
    for template in (t for t in TEMPLATES if t.level == level):
        minus = template.tid.endswith(("giveaway", "compare"))
        firsts = range(3 if minus else 2, hi + 1)
        pairs = [(a, b) for a in firsts for b in range(2, a if minus else hi + 1)]
        draws = {tuple(template.draw(np.random.default_rng(k)).values()) for k in range(300)}
        assert draws <= set(pairs), f"{template.tid}: the enumeration misses draws"  # it covers what the template draws
        out += [(template, {"a": a, "b": b}) for a, b in pairs]
    return out


def jigsaw_space() -> list[list[int]]:
    """Every two-agent level-1 story (a start and one signed change) the source can tell."""
    level = LEVELS[1]
    starts, sizes = range(level.start[0], level.start[1] + 1), range(level.change[0], level.change[1] + 1)
    stories = [[s, c] for s in starts for z in sizes for c in ((z, -z) if z <= s else (z,))]
    return [v for v in stories if needs_every_share(v, 2)]


def whole_set_keys(name: str, split_by: str) -> dict[str, set]:
    by_split: dict[str, set] = {"train": set(), "validation": set(), "test": set()}
    if name == "jigsaw:1, 2 agents":
        source = JigsawMath(2, 1, split_by=split_by)
        for values in jigsaw_space():
            by_split[source.split_of(values)].add(key([abs(v) for v in values], sum(values)))
        return by_split
    source = SyntheticMath((int(name[-1]),), split_by=split_by)
    for template, numbers in synthetic_space(int(name[-1])):
        by_split[source.split_of(template, numbers)].add(key(numbers.values(), template.solve(numbers)[1]))
    return by_split


@pytest.mark.parametrize("name", ["synthetic:0", "synthetic:1", "jigsaw:1, 2 agents"])
def test_no_problem_of_a_whole_set_is_held_out_with_its_arithmetic_in_train(name):
    new = whole_set_keys(name, "arithmetic")
    assert min(len(new["test"]), len(new["validation"])) > 0.05 * len(new["train"])
    assert leaks(new) == {"validation": 0, "test": 0, "validation & test": 0}
    old = whole_set_keys(name, "uid")  # the first release's split: the check above can fail
    assert leaks(old)["test"] > 0


# -- larger sets, drawn ---------------------------------------------------------------------------

DRAWN = {
    "synthetic:1,2": lambda split, split_by: SyntheticMath((1, 2), split, split_by),
    "jigsaw:1-3, 2 agents": lambda split, split_by: JigsawMath(2, (1, 2, 3), split, split_by),
}


def drawn_keys(make, split_by: str, n_train: int) -> dict[str, set]:
    rng = np.random.default_rng(0)
    train = make("train", split_by)
    out = {"train": {key_of(train.sample(rng)) for _ in range(n_train)}}
    for split in ("test", "validation") if split_by == "arithmetic" else ("test",):
        out[split] = {key_of(p) for p in make(split, split_by).heldout(HELDOUT)}
    return out


@pytest.mark.parametrize("name", DRAWN)
def test_no_heldout_problem_of_a_larger_set_has_its_arithmetic_in_train(name):
    assert leaks(drawn_keys(DRAWN[name], "arithmetic", TRAIN_DRAWS)) == {"validation": 0, "test": 0, "validation & test": 0}
    assert leaks(drawn_keys(DRAWN[name], "uid", OLD_TRAIN_DRAWS))["test"] > 0  # the first release's split leaks


def test_the_synthetic_and_jigsaw_sets_share_one_split():
    # a two-number story and a level-1 word problem with the same numbers and answer fall in the same split
    synthetic, jigsaw = whole_set_keys("synthetic:1", "arithmetic"), whole_set_keys("jigsaw:1, 2 agents", "arithmetic")
    assert jigsaw["test"] & synthetic["test"] and jigsaw["validation"] & synthetic["validation"]  # they share keys
    assert not (jigsaw["test"] | jigsaw["validation"]) & synthetic["train"]
    assert not (synthetic["test"] | synthetic["validation"]) & jigsaw["train"]
