"""Seeded arithmetic word problems: the embedded, offline default problem source of the MATH envs.

Four difficulty levels, several templates each (``TEMPLATES``, in ``templates.py``):

0. (only when asked for, ``"synthetic:0"``; not in the default ``LEVELS``) level 1's wordings with
   numbers from 2 to 20: a setting a small general instruct model can partly solve untuned;
1. one addition or subtraction of 1-2 digit numbers, non-negative result;
2. two additions/subtractions (one template can go below zero: temperatures);
3. a multiplication or exact division mixed with an addition/subtraction, integer result;
4. fraction results (uneven sharing, sums/differences of fractions, scaled recipes, averages), reduced.

Each problem carries a compact worked solution, one ``expression=value`` step per line in ASCII
(``23+15=38`` / ``38-7=31``, fractions as ``7/3``), whose last value is the answer; it is meant to
supervise a tiny "reasoner" model, so its format stays regular. The gold answer is LaTeX-style:
``38``, ``-4``, ``\\frac{7}{3}``, ``-\\frac{5}{12}``.

The ``uid`` is the template id plus the numbers (``l1_gift:23,15``); names and objects are decoration.

Splits: ``"train"``, ``"validation"`` and ``"test"`` (the held-out split), by a stable hash of the
problem's arithmetic (:func:`arithmetic_key`: its numbers, sorted, and its answer: ``15,23=38``), one
key in ten each for test and validation. The key ignores the template and the order of the numbers,
so ``l1_gift:23,15`` ("Ana has 23 ... 15 more"), ``l1_harvest:15,23`` and every other wording of
15 and 23 making 38 fall in one split: no test or validation problem's numbers and answer occur in
train, under any wording (``tests/envs/test_split_leak.py`` checks it). ``MathJigsaw``'s stories
share the key (:mod:`marft_envs.tasks.math.jigsaw_problems`), so that holds across the two sets too.

The first release split by uid (``split_by="uid"``, the spec ``"synthetic-v0"``; train and test
only): one uid in ten was test, but templates that share one arithmetic (``l1_gift`` and
``l1_harvest`` are both ``a+b``) put most test problems' arithmetic in train under another wording
(108 of level 0's 112 test problems, issue 53). The ``-v0`` env ids of the MATH family keep it, so
their results can be rerun; see the family's version history.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Iterable
from fractions import Fraction

import numpy as np

from marft_envs.tasks.math.problem import Problem, ProblemSource
from marft_envs.tasks.math.templates import TEMPLATES, VOCAB, Numbers, Template
from marft_envs.validation import check_heldout_n

LEVELS = (1, 2, 3, 4)  # the default mix ("synthetic")
ALL_LEVELS = (0, *LEVELS)  # level 0 is opt-in: adding it to the default would change every run's problems
SPLITS = ("train", "validation", "test")
HELDOUT_SPLITS = ("validation", "test")
"""The splits :meth:`SyntheticMath.heldout` draws from (from ``"test"`` when the source's split is train)."""
SPLIT_BY = ("arithmetic", "uid")
"""What a split hashes: the arithmetic (:func:`arithmetic_key`, the default) or the uid (the first release's)."""
TEST_BUCKETS = 10  # one hash bucket in TEST_BUCKETS is the test split (and, split by arithmetic, one more validation)
_MAX_TRIES = 10_000  # rejection-sampling guard; a test problem needs ~TEST_BUCKETS tries on average
_MAX_STALE = 1_000
"""``heldout`` gives up after this many (plus 20 per problem found) draws in a row bring no new test
problem: level 0 alone has 112, and asking it for 10,000 drew for 3 minutes before refusing."""


def latex_answer(x: Fraction | int) -> str:
    """Gold-answer form: ``38``, ``-4``, ``\\frac{7}{3}``, ``-\\frac{7}{3}`` (always reduced)."""
    x = Fraction(x)
    if x.denominator == 1:
        return str(x.numerator)
    sign = "-" if x < 0 else ""
    return f"{sign}\\frac{{{abs(x.numerator)}}}{{{x.denominator}}}"


def _bucket(text: str) -> int:
    """A stable hash of ``text`` in ``range(TEST_BUCKETS)``."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") % TEST_BUCKETS


def split_of(uid: str) -> str:
    """The first release's split (``split_by="uid"``): ``"test"`` for one uid in TEST_BUCKETS, else ``"train"``."""
    return "test" if _bucket(uid) == 0 else "train"


def arithmetic_key(numbers: Iterable[Fraction | int], answer: Fraction | int) -> str:
    """A problem's arithmetic, whatever its wording: its numbers sorted, then its answer (``15,23=38``, ``1/3,6=2``)."""
    return ",".join(str(v) for v in sorted(Fraction(x) for x in numbers)) + f"={Fraction(answer)}"


def arithmetic_split(key: str) -> str:
    """The split of an :func:`arithmetic_key`: ``"test"`` and ``"validation"`` one key in TEST_BUCKETS each, else train."""
    bucket = _bucket(key)
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def check_split(split: str, split_by: str, name: str) -> None:
    """Refuse, in one line, a split or a ``split_by`` that ``name`` does not have."""
    if split_by not in SPLIT_BY:
        raise ValueError(f"{name} split_by must be 'arithmetic' or 'uid', got {split_by!r}")
    if split_by == "uid" and split == "validation":
        raise ValueError(f"{name} split by uid (the first release's, kept by the -v0 ids) has no validation split: split by arithmetic")
    if split not in SPLITS:
        raise ValueError(f"{name} split must be 'train', 'validation' or 'test', got {split!r}")


def uid_of(template: Template, numbers: Numbers) -> str:
    """Canonical id: template id and numbers, e.g. ``l4_drinks:1/3,3/4``."""
    return f"{template.tid}:" + ",".join(str(v) for v in numbers.values())


def make_problem(template: Template, numbers: Numbers, rng: np.random.Generator) -> Problem:
    """Word the problem (names and objects from ``rng``) and attach its solution and answer."""
    slots = [f for _, f, _, _ in string.Formatter().parse(template.text) if f and f not in numbers]
    words: dict[str, str] = {}
    for base in dict.fromkeys(s.rstrip(string.digits) for s in slots):
        keys = list(dict.fromkeys(s for s in slots if s.rstrip(string.digits) == base))
        picks = rng.choice(len(VOCAB[base]), size=len(keys), replace=False)
        words.update({k: VOCAB[base][i] for k, i in zip(keys, picks)})
    question = template.text.format(**{k: str(v) for k, v in numbers.items()}, **words)
    lines, answer = template.solve(numbers)
    return Problem(
        question=question,
        answer=latex_answer(answer),
        solution="\n".join(lines),
        level=template.level,
        source="synthetic",
        uid=uid_of(template, numbers),
    )


class SyntheticMath(ProblemSource):
    """Unlimited seeded arithmetic word problems at levels 0-4 (default 1-4), split by their arithmetic.

    ``split``: ``"train"``, ``"validation"`` or ``"test"``; ``split_by``: ``"arithmetic"`` (the default) or
    ``"uid"``, the first release's leaky train/test split, kept so that old results can be rerun.
    """

    def __init__(self, levels=LEVELS, split: str = "train", split_by: str = "arithmetic"):
        levels = tuple(sorted({int(x) for x in levels}))
        if not levels or not set(levels) <= set(ALL_LEVELS):
            raise ValueError(f"synthetic levels must be a non-empty subset of {ALL_LEVELS}, got {levels}")
        check_split(split, split_by, "synthetic")
        self.levels, self.split, self.split_by = levels, split, split_by
        base = "synthetic" if split_by == "arithmetic" else "synthetic-v0"
        self.name = base if levels == LEVELS else f"{base}:" + ",".join(map(str, levels))
        self._by_level = {lvl: [t for t in TEMPLATES if t.level == lvl] for lvl in levels}

    def __repr__(self) -> str:
        return f"SyntheticMath(levels={self.levels}, split={self.split!r}, split_by={self.split_by!r})"

    def sample(self, rng: np.random.Generator) -> Problem:
        return self._draw(rng, self.split)

    def sample_at(self, rng: np.random.Generator, level: int) -> Problem:
        """One problem of ``level`` (one of ``self.levels``) from this source's split."""
        if level not in self.levels:
            raise ValueError(f"{self.name} has levels {list(self.levels)}, not {level!r}")
        return self._draw(rng, self.split, levels=(level,))

    def heldout(self, n: int, seed: int = 0) -> list[Problem]:
        """``n`` distinct problems of this source's split if it is validation or test, else of test."""
        n = check_heldout_n(n, self.max_heldout, f"{self.name} heldout")
        split = self.split if self.split in HELDOUT_SPLITS else "test"
        rng = np.random.default_rng(seed)
        out: dict[str, Problem] = {}
        stale = 0  # draws in a row that found nothing new: a small level set runs out of test problems
        for _ in range(n * 50 + 1_000):  # duplicates are rare; this bound only stops runaway loops
            if len(out) >= n:
                return list(out.values())
            problem = self._draw(rng, split)
            stale = 0 if out.setdefault(problem.uid, problem) is problem else stale + 1
            if stale > _MAX_STALE + 20 * len(out):
                break
        raise ValueError(f"{self.name}: found only {len(out)} distinct {split} problems; ask for fewer")

    def split_of(self, template: Template, numbers: Numbers) -> str:
        """The split of ``template`` with ``numbers`` under this source's ``split_by``."""
        if self.split_by == "uid":
            return split_of(uid_of(template, numbers))
        return arithmetic_split(arithmetic_key(numbers.values(), template.solve(numbers)[1]))

    def _draw(self, rng: np.random.Generator, split: str, levels: tuple[int, ...] | None = None) -> Problem:
        # Level, template and numbers are all redrawn on rejection, so each stays uniform.
        levels = self.levels if levels is None else levels
        for _ in range(_MAX_TRIES):
            templates = self._by_level[levels[rng.integers(len(levels))]]
            template = templates[rng.integers(len(templates))]
            numbers = template.draw(rng)
            if self.split_of(template, numbers) == split:
                return make_problem(template, numbers, rng)
        raise RuntimeError(f"{self.name}: no {split} problem in {_MAX_TRIES} draws")
