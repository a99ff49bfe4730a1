r"""Grading MATH answers: find the final answer in a response and decide whether it equals the gold one.

    grade(text, gold)           extract_answer(text), then answers_match(answer, gold); False if none
    extract_answer(text)        the final answer inside a model response, or None
    answers_match(pred, gold)   whether two final answers are mathematically equivalent
    clear_caches()              empty the LRU caches (for cold-cache benchmarks)

All three are pure: deterministic, thread-safe (no `signal`, no state beyond LRU caches; see
`clear_caches`), they never raise, and each call returns within 0.1 s on any input, on one core:
well under a millisecond on ordinary responses, tens of milliseconds on the worst inputs we know (a
hostile 2^20-character response, two sets of 64 expressions). See Safety below for the bounds.

Extraction: the first rule that finds something wins.

1. The content of the LAST `\boxed{...}` or `\fbox{...}` whose braces balance, or `\boxed 5`. A later
   box is a revision, so `\boxed{5}\boxed{6}` gives `6` (math-verify reads two adjacent boxes as the
   set {5, 6}; with text between them it also takes the last). When the text has a box but none
   is complete (a truncated `\boxed{\frac{1}{2}`), the answer is None: no later rule is tried.
2. GSM8K's `#### 42`: the last one, to the end of its line.
3. The last "answer is X" / "Answer: X" (any case): a leading `$...$` span, else X up to the end of
   its sentence, with trailing words dropped (`5 apples.` gives `5`).
4. The whole text, when it is one short line with no words in it (`\frac{1}{2}`, `x = 5`).
5. The last number in the text (`-3`, `1,234`, `0.5`, `3/4`, `\frac{3}{4}`). Yes, this rewards a
   response that merely ends on the right number; GSM8K-style graders do the same. No number holds
   whitespace, so the text is read backwards in pieces of about 8,192 characters cut at whitespace;
   a stretch of more than that without whitespace is cut too (so `0.0.0.…` stays fast).

Only the last `MAX_READ` (65,536) characters of a response are read: a box, or anything else, before
them is not seen. The MATH envs' actions hold at most 2^20 characters.

Equivalence rules for `answers_match`:

- Ignored: `$` and `\$`, a whole `\boxed{}`, `\left`/`\right`, `\!`, `\,`, `~`, `\displaystyle`, a
  trailing `.`, a leading `+`, a leading `x \in`, `\dfrac` (read as `\frac`), units (`5\text{ cm}`,
  `864 \mbox{ inches}^2`, `7 mph`), degree marks (`30^\circ` == `30`; degrees are never converted to
  radians).
- Numbers are exact rationals: `\frac12` == `1/2` == `0.5`, `0.\overline{3}` == `1/3`,
  `0.1\overline{6}` == `1/6`, `6.72\times10^{-5}` == `.0000672`; an integer followed by a numeric
  fraction is a mixed number (`1\frac{4}{5}` == `9/5`); `2^10` is read as `2^{10}`.
- Percent: `50\%` reads as 50 (MATH's golds drop the mark) or as 0.5 (its value), and matches when
  either reading does: `50\%` == `50` and `50\%` == `0.5`, but `50\%` != `5`.
- Thousands: `10,\!080`, `10{,}080` and `10\,080` are 10080. A bare `58,500` (groups of three digits) is either
  58500 or the list 58, 500, and matches when either reading does; `1,2` is only a list, never 12.
- Other numbers (`2\sqrt2` == `\sqrt8`, `2\pi` == `\pi\cdot 2`, `1+2i` == `2i+1`) are compared
  numerically to a relative 1e-9. `i` is the imaginary unit, `e` Euler's number, `\log` the natural
  log (`\log_b` has base b). A finite decimal equals only a value we can compute exactly as a
  rational: `0.577` is not `\frac{\sqrt3}{3}`, however many digits it has.
- Expressions in variables (`x^2+2x+1` == `(x+1)^2`) must agree at three fixed pseudo-random points
  (positive reals, the usual domain of textbook identities such as `\sqrt{x^2}` == `x`).
- Base numerals: `52_8` == `52_{8}`, but `52_8` != `52` and `101_2` != `5`: MATH's gold answers keep
  the base, so only the same digits in the same base match.
- Tuples and intervals are ordered and their brackets must match: `(1,2]` != `(1,2)`, `(1,2)` != `[1,2]`;
  `(1,2)` is read literally, the same as a point or an open interval.
- Bare lists (`1, 2`), sets (`\{1,2\}`) and unions of intervals are unordered; a one-element set
  equals its element (`\{5\}` == `5`); a bare list never equals a tuple. `a \pm b` is the list
  `a+b, a-b`. Matrices (`pmatrix`, `bmatrix`, ...) match entry-wise, never a tuple.
- Equations: `x = 5` == `5` and `y = 2x+1` == `2x+1` when the left side is a name (`x`, `f(x)`,
  `(x,y)`); two equations match when one is a nonzero multiple of the other (`y = 2x+3` ==
  `2x - y + 3 = 0`). Inequalities match the same relation, `a > b` being `b < a`.
- Text answers (`\text{Evelyn}`, `\text{(C)}`, `(C)`) compare as case-folded words: `\text{(A)}` == `A`.
- Anything else, or anything too big to evaluate safely, is compared as normalised text.

Known gaps (answered False): an inequality against an interval (`x > 2` vs `(2,\infty)`), a column
vector against a tuple, `x = 1, y = 2` against `(1,2)`, a decimal against a trigonometric value
(`0.5` vs `\cos\frac{\pi}{3}`), degrees inside functions (`\sin 45^\circ`), double factorials.

Safety: responses are read from their last 65,536 characters; answers over 1,000 characters or
nested over 30 brackets deep are compared as text only; no exact value (a sum, product, power, root,
factorial, binomial: every intermediate) may pass 4,096 bits, which is checked from the operands'
sizes before it is computed, and factorials stop at 300!, so `9^9^9^9`, `10^{100000}` and a product
of 240 copies of `300!` fall back to numbers (which overflow) and then to text; float overflow makes
an expression non-numeric instead of raising. A comparison computes each element's values once, so
two sets of 64 elements cost 64 × 64 cheap comparisons. No `simplify`, no sympy, no
math-verify: the numeric identity test replaces them and keeps every call bounded.

The pieces, each a module of its own: `_math_extract` (finding the answer in a response),
`_latex_normalise` (LaTeX clean-up), `_latex` (parsing a scalar into a tree), `_math_read` (an
answer as a structure: list, set, tuple, equation, ...), `_math_compare` (equivalence of two
structures) and `_math_evaluate` (exact and numeric values of trees).
"""

from __future__ import annotations

import re
from functools import lru_cache

from marft_envs.rewards._math_compare import compare
from marft_envs.rewards._math_extract import final_answer
from marft_envs.rewards._math_read import readings

_MAX_CHARS = 1000  # longer answers are compared as text
MAX_READ = 1 << 16
"""Characters of a response that are read, counted from its end: the final answer is there, and
every rule's work is then bounded whatever the response's length."""


def extract_answer(text: str) -> str | None:
    """The final answer inside a model response, by the rules in the module docstring; None if none."""
    try:
        if not isinstance(text, str):
            return None
        return final_answer(text[-MAX_READ:])
    except Exception:  # a reward function must never crash a training run
        return None


def answers_match(pred: str, gold: str) -> bool:
    """Whether two final answers are mathematically equivalent, by the rules in the module docstring."""
    try:
        if not isinstance(pred, str) or not isinstance(gold, str):
            return False
        if len(pred) > _MAX_CHARS or len(gold) > _MAX_CHARS:
            return _text_key(pred) == _text_key(gold) != ""
        return _match_cached(pred, gold)
    except Exception:  # a reward function must never crash a training run
        return False


def grade(text: str, gold: str) -> bool:
    """True when the final answer extracted from `text` matches `gold`; False if none is found."""
    answer = extract_answer(text)
    return answer is not None and answers_match(answer, gold)


def clear_caches() -> None:
    """Empty the grader's LRU caches (benchmarks use it to measure cold performance)."""
    _match_cached.cache_clear()
    readings.cache_clear()


def _text_key(s: str) -> str:
    return re.sub(r"\s+|\$", "", s)


@lru_cache(maxsize=8192)
def _match_cached(pred: str, gold: str) -> bool:
    preds, golds = readings(pred), readings(gold)
    if not preds[0].key or not golds[0].key:
        return False
    return compare(preds, golds)
