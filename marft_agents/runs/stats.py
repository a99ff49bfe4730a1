"""The statistics a result table carries: 95 % intervals and paired tests, in pure Python (no scipy).

Over seeds (a mean of a few runs): :func:`t_interval`, the mean ± t(0.975, n - 1) · sd / √n (with n = 3
seeds that is ± 4.303 standard errors, with n = 5 ± 2.776); two methods run on the same seeds and problems:
:func:`paired_t`, the same interval of their per-seed differences and its two-sided p-value. Over problems
(one evaluation of n problems): :func:`wilson`, the Wilson score interval of a proportion; two evaluations
of the same problems: :func:`mcnemar`, the exact (binomial) McNemar test of their discordant problems, and
:func:`pair_outcomes`, which lines up two runs' per-problem outcomes (``outcomes/<evaluation>.jsonl``) by uid.

The Student t distribution is computed for integer degrees of freedom from its closed form (Abramowitz and
Stegun 26.7.3-4), so a quantile is exact to the bisection's tolerance, not read from a table.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054
"""The standard normal's 97.5 % quantile: a two-sided 95 % interval's half-width in standard errors."""


@dataclass(frozen=True)
class Interval:
    """A mean (or a proportion) and its two-sided 95 % interval."""

    estimate: float
    """The mean of the values (a proportion for :func:`wilson`)."""
    low: float
    """The interval's lower end (NaN with fewer than two values over seeds)."""
    high: float
    """The interval's upper end."""
    n: int
    """How many values (seeds, or problems) it is over."""
    se: float = math.nan
    """The standard error: sd / √n over seeds; √(p(1-p)/n) for a proportion."""

    def __str__(self) -> str:
        return f"{self.estimate:.3g} [{self.low:.3g}, {self.high:.3g}] (n={self.n})"


@dataclass(frozen=True)
class PairedTest:
    """Two methods on the same seeds: the interval of their mean difference (a - b) and a paired t-test."""

    difference: Interval
    """The per-seed differences' mean and its 95 % t-interval."""
    t: float
    """The t statistic: mean difference / its standard error (±inf when every difference is the same, not 0)."""
    p: float
    """Two-sided p-value of ``t`` with n - 1 degrees of freedom (NaN with fewer than two seeds)."""


@dataclass(frozen=True)
class McNemar:
    """Two evaluations of the same problems: the problems only one of them got right, and the exact test."""

    only_a: int
    """Problems ``a`` got right and ``b`` wrong."""
    only_b: int
    """Problems ``b`` got right and ``a`` wrong."""
    both: int
    """Problems both got right (they carry no information on the difference)."""
    neither: int
    """Problems both got wrong."""
    p: float
    """Two-sided exact p-value: twice the smaller binomial(only_a + only_b, 1/2) tail, at most 1."""


def t_two_sided_mass(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with ``df`` (an integer >= 1) degrees of freedom, from its closed form."""
    if isinstance(df, bool) or not isinstance(df, int) or df < 1:
        raise ValueError(f"df must be an integer of at least 1, got {df!r}")
    if math.isinf(t):
        return 1.0
    theta = math.atan(abs(t) / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    # the series 1 + a_1 cos^2 + a_2 cos^4 + ...: odd df from (2/3), even df from (1/2)
    term, total, k = 1.0, 1.0, 2 if df % 2 else 1
    for _ in range((df - 3) // 2 if df % 2 else (df - 2) // 2):
        term *= c2 * k / (k + 1)
        total += term
        k += 2
    if df == 1:
        return 2 * theta / math.pi
    if df % 2:
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    return math.sin(theta) * total


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided ``level`` critical value of Student's t with ``df`` degrees of freedom (4.303 for df 2 at 95 %)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    low, high = 0.0, 1.0
    while t_two_sided_mass(high, df) < level:
        high *= 2
    for _ in range(200):  # bisection to float precision
        mid = (low + high) / 2
        if mid in (low, high):
            break
        low, high = (mid, high) if t_two_sided_mass(mid, df) < level else (low, mid)
    return (low + high) / 2


def t_interval(values: Iterable[float]) -> Interval:
    """The mean of ``values`` (one per seed) and its 95 % t-interval, mean ± t(0.975, n - 1) · sd / √n."""
    xs = [float(x) for x in values]
    if not xs:
        raise ValueError("t_interval needs at least one value")
    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return Interval(mean, math.nan, math.nan, 1)
    se = statistics.stdev(xs) / math.sqrt(len(xs))
    half = t_quantile(len(xs) - 1) * se
    return Interval(mean, mean - half, mean + half, len(xs), se)


def paired_t(a: Sequence[float], b: Sequence[float]) -> PairedTest:
    """Methods ``a`` and ``b`` on the same seeds (``a[i]`` and ``b[i]`` share seed i): their difference's
    interval and the paired t-test's two-sided p-value."""
    if len(a) != len(b):
        raise ValueError(f"paired_t needs one value of each method per seed, got {len(a)} and {len(b)}")
    diff = t_interval([x - y for x, y in zip(a, b)])
    if diff.n < 2:
        return PairedTest(diff, math.nan, math.nan)
    if diff.se == 0:
        t = 0.0 if diff.estimate == 0 else math.copysign(math.inf, diff.estimate)
    else:
        t = diff.estimate / diff.se
    return PairedTest(diff, t, 1 - t_two_sided_mass(t, diff.n - 1))


def wilson(successes: int, n: int, z: float = Z95) -> Interval:
    """The share ``successes / n`` (one evaluation of ``n`` problems) and its Wilson score interval."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"wilson needs 0 <= successes <= n and n >= 1, got {successes} of {n}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n, math.sqrt(p * (1 - p) / n))


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """The exact McNemar test of two evaluations of the same problems (``a[i]``, ``b[i]``: problem i right)."""
    if len(a) != len(b):
        raise ValueError(f"mcnemar needs both evaluations on the same problems, got {len(a)} and {len(b)} outcomes")
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    both = sum(1 for x, y in zip(a, b) if x and y)
    discordant = only_a + only_b
    tail = sum(math.comb(discordant, i) for i in range(min(only_a, only_b) + 1)) / 2**discordant
    return McNemar(only_a, only_b, both, len(a) - discordant - both, min(1.0, 2 * tail))


def pair_outcomes(a: Sequence[dict], b: Sequence[dict]) -> tuple[list[bool], list[bool]]:
    """Two evaluations' per-problem outcome lines (``evaluation.problem_outcomes``) as paired right/wrong lists,
    in ``a``'s order, matched by ``uid``; a ValueError when they are not the same problems."""
    by_uid = {row["uid"]: bool(row["correct"]) for row in b}
    uids = [row["uid"] for row in a]
    if None in by_uid or len(set(uids)) != len(uids) or len(by_uid) != len(b) or set(uids) != set(by_uid):
        raise ValueError(
            f"the two evaluations are not of the same problems ({len(uids)} and {len(by_uid)} uids, "
            f"{len(set(uids) & set(by_uid))} shared): evaluate both on the same env, split and number of problems"
        )
    return [bool(row["correct"]) for row in a], [by_uid[u] for u in uids]
