"""Seeded jigsaw word problems for the ``marft/MathJigsaw`` envs: one story whose quantities are split between agents.

A problem is a short story about one person's count of things: a starting count, then changes
(``Tom buys 25 more apples.``, ``Tom gives 3 apples to Ana.``), then the question ``How many apples
does Tom have now?``. Its facts are cut into ``n_shares`` consecutive shares, one per agent, in
story order; the last share ends with the question. Every fact holds one quantity (the start is at
least 10, a change at least 2), and a story in which one share's changes cancel out, or one share
alone adds up to the answer, is redrawn (:func:`needs_every_share`): so the sum of any one share's
facts is wrong, and so is the sum that leaves out any one share. The answer needs every agent's share.

Levels (:data:`LEVELS`: facts per share, the start's range, the changes' range):

1. one fact per share, start 10-50, changes 2-20 (about 140 distinct test problems with two agents);
2. one fact per share, start 10-99, changes 2-50;
3. two facts per share, start 10-99, changes 2-50.

Each change is a gain or a loss with equal odds, except that a loss that would take the count below
zero is a gain instead, so every count in the story is a count. The worked solution is one
``expression=value`` step per change (``17+25=42`` / ``42-3=39``), as the synthetic problems' is. The
uid is the arithmetic alone (``jigsaw:17,+25,-3``; names, objects and wordings are decoration).

Splits: ``"train"``, ``"validation"`` and ``"test"``, by the synthetic problems' arithmetic key
(:func:`~marft_envs.tasks.math.synthetic.arithmetic_key`: the story's quantities as written, sorted,
and its answer: ``3,17,25=39``), one key in ten each for test and validation. So the stories
``17, +25, -3`` and ``25, -3, +17`` (the same numbers, the same answer) fall in one split, and no
held-out story's numbers and answer occur in train, nor in the synthetic problems' train split.
``split_by="uid"`` is the split of ``marft/MathJigsaw-v0`` and ``-v1`` (train and test by a hash of the
uid: the quantities in story order, so reordered stories could fall on both sides).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from marft_envs.tasks.math.problem import Problem, ProblemSource
from marft_envs.tasks.math.synthetic import HELDOUT_SPLITS, arithmetic_key, arithmetic_split, check_split, split_of
from marft_envs.tasks.math.templates import VOCAB, chain


@dataclass(frozen=True)
class Level:
    """How large one level's stories and numbers are."""

    facts_per_share: int
    """Facts (quantities) in each agent's share."""
    start: tuple[int, int]
    """The starting count's range, inclusive."""
    change: tuple[int, int]
    """Each change's size range, inclusive (a gain or a loss of that many)."""


LEVELS: dict[int, Level] = {1: Level(1, (10, 50), (2, 20)), 2: Level(1, (10, 99), (2, 50)), 3: Level(2, (10, 99), (2, 50))}
_MAX_TRIES = 10_000  # rejection-sampling guard; a test problem needs ~10 tries on average

START = "{name} has {v} {thing}."
GAINS = ("{name} buys {v} more {thing}.", "{friend} gives {name} {v} {thing}.", "{name} finds {v} more {thing}.")
LOSSES = ("{name} gives {v} {thing} to {friend}.", "{name} loses {v} {thing}.", "{name} sells {v} {thing}.")
QUESTION = "How many {thing} does {name} have now?"
THINGS = VOCAB["thing"] + VOCAB["fruit"]


@dataclass(frozen=True)
class JigsawProblem(Problem):
    """A problem whose facts are split into shares, one per agent; the last share ends with the question."""

    shares: tuple[str, ...] = ()
    """Each agent's part of the story, in acting order; the last one ends with the question."""
    quantities: tuple[tuple[int, ...], ...] = ()
    """The numbers written in each share, in order: what that share's agent knows and must pass on."""


def check_levels(levels: int | Iterable[int]) -> tuple[int, ...]:
    """``levels`` as a sorted tuple of known levels; else a one-line ValueError."""
    try:
        picked = (int(levels),) if isinstance(levels, (int, np.integer)) else tuple(sorted({int(x) for x in levels}))
    except (TypeError, ValueError):
        picked = ()
    if isinstance(levels, bool) or not picked or not set(picked) <= set(LEVELS):
        raise ValueError(f"jigsaw levels must be one or more of {list(LEVELS)}, e.g. levels=1 or levels=[1, 2], got {levels!r}"[:200])
    return picked


def draw_story(rng: np.random.Generator, n_facts: int, level: Level) -> list[int]:
    """The start and ``n_facts - 1`` signed changes; no count in the story goes below zero."""
    start = int(rng.integers(level.start[0], level.start[1] + 1))
    values, total = [start], start
    for _ in range(n_facts - 1):
        size = int(rng.integers(level.change[0], level.change[1] + 1))
        loss = rng.random() < 0.5  # drawn every time, so the draws that follow do not depend on the count
        change = -size if loss and size <= total else size
        values.append(change)
        total += change
    return values


def needs_every_share(values: list[int], n_shares: int) -> bool:
    """Whether every share moves the answer (its signed sum is not 0) and none alone adds up to it."""
    per, total = len(values) // n_shares, sum(values)
    return all(0 != sum(values[k * per : (k + 1) * per]) != total for k in range(n_shares))


def uid_of(values: list[int]) -> str:
    """The arithmetic as an id: ``jigsaw:17,+25,-3``."""
    return "jigsaw:" + ",".join([str(values[0])] + [f"{v:+d}" for v in values[1:]])


def word_story(values: list[int], n_shares: int, level: int, rng: np.random.Generator) -> JigsawProblem:
    """Word the story (names, things and wordings from ``rng``) and cut it into ``n_shares`` shares."""
    name, thing = VOCAB["name"][int(rng.integers(len(VOCAB["name"])))], THINGS[int(rng.integers(len(THINGS)))]
    friends = [n for n in VOCAB["name"] if n != name]
    facts = [START.format(name=name, v=values[0], thing=thing)]
    for change in values[1:]:
        wordings = GAINS if change > 0 else LOSSES
        friend = friends[int(rng.integers(len(friends)))]
        facts.append(wordings[int(rng.integers(len(wordings)))].format(name=name, friend=friend, v=abs(change), thing=thing))
    question = QUESTION.format(thing=thing, name=name)
    per = len(values) // n_shares
    shares = [" ".join(facts[k * per : (k + 1) * per]) for k in range(n_shares)]
    shares[-1] += " " + question
    lines, answer = chain(values[0], *[("+" if v > 0 else "-", abs(v)) for v in values[1:]])
    return JigsawProblem(
        question=" ".join(facts) + " " + question,
        answer=str(answer),
        solution="\n".join(lines),
        level=level,
        source="jigsaw",
        uid=uid_of(values),
        shares=tuple(shares),
        quantities=tuple(tuple(abs(v) for v in values[k * per : (k + 1) * per]) for k in range(n_shares)),
    )


def _pattern(wording: str) -> re.Pattern:
    """A wording as a regex whose one group is the quantity: ``{name}`` and ``{friend}`` match a name, ``{thing}`` words."""
    slots = {r"\{name\}": r"[A-Z][a-z]+", r"\{friend\}": r"[A-Z][a-z]+", r"\{thing\}": r"[a-z][a-z ]*", r"\{v\}": r"(\d+)"}
    text = re.escape(wording)
    for slot, regex in slots.items():
        text = text.replace(slot, regex)
    return re.compile(text)


_PATTERNS = [(_pattern(w), 1) for w in (START, *GAINS)] + [(_pattern(w), -1) for w in LOSSES]


def read_facts(text: str) -> list[int]:
    """The signed quantities of the story's sentences in ``text``, others ignored.

    ``"Tom has 17 apples. Tom loses 3 apples. How many?"`` -> ``[17, -3]``.
    """
    out = []
    for sentence in re.split(r"(?<=[.?!])\s+", text.strip()):
        for pattern, sign in _PATTERNS:
            if m := pattern.fullmatch(sentence):
                out.append(sign * int(m.group(1)))
                break
    return out


class JigsawMath(ProblemSource):
    """Unlimited seeded jigsaw stories for ``n_shares`` agents at levels 1-3, split by their arithmetic (or uid)."""

    def __init__(self, n_shares: int, levels: int | Iterable[int] = tuple(LEVELS), split: str = "train", split_by: str = "arithmetic"):
        check_split(split, split_by, "jigsaw")
        self.n_shares, self.levels, self.split, self.split_by = int(n_shares), check_levels(levels), split, split_by
        self.name = "jigsaw:" + ",".join(map(str, self.levels))

    def __repr__(self) -> str:
        return f"JigsawMath(n_shares={self.n_shares}, levels={self.levels}, split={self.split!r}, split_by={self.split_by!r})"

    def sample(self, rng: np.random.Generator) -> JigsawProblem:
        return self._draw(rng, self.split, self.levels)

    def sample_at(self, rng: np.random.Generator, level: int) -> JigsawProblem:
        """One problem of ``level`` (one of ``self.levels``) from this source's split."""
        if level not in self.levels:
            raise ValueError(f"{self.name} has levels {list(self.levels)}, not {level!r}")
        return self._draw(rng, self.split, (level,))

    def heldout(self, n: int, seed: int = 0) -> list[JigsawProblem]:
        """``n`` distinct stories of this source's split if it is validation or test, else of test."""
        split = self.split if self.split in HELDOUT_SPLITS else "test"
        rng = np.random.default_rng(seed)
        out: dict[str, JigsawProblem] = {}
        for _ in range(n * 50 + 1_000):  # duplicates are rare but for level 1; this bound only stops runaway loops
            if len(out) >= n:
                return list(out.values())
            problem = self._draw(rng, split, self.levels)
            out.setdefault(problem.uid, problem)
        raise ValueError(f"{self.name}: found only {len(out)} distinct {split} problems for {self.n_shares} agents; ask for fewer")

    def split_of(self, values: list[int]) -> str:
        """The split of the story ``values`` (start, signed changes) under this source's ``split_by``."""
        if self.split_by == "uid":
            return split_of(uid_of(values))
        return arithmetic_split(arithmetic_key([abs(v) for v in values], sum(values)))

    def _draw(self, rng: np.random.Generator, split: str, levels: tuple[int, ...]) -> JigsawProblem:
        # Level and numbers are redrawn on rejection, so each stays uniform; wording comes after.
        for _ in range(_MAX_TRIES):
            level = levels[int(rng.integers(len(levels)))]
            values = draw_story(rng, self.n_shares * LEVELS[level].facts_per_share, LEVELS[level])
            if self.split_of(values) == split and needs_every_share(values, self.n_shares):
                return word_story(values, self.n_shares, level, rng)
        raise RuntimeError(f"{self.name}: no {split} problem in {_MAX_TRIES} draws")
