r"""Grading MATH answers: find the final answer in a response and decide whether it equals the gold one.

    grade(text, gold)           extract_answer(text), then answers_match(answer, gold); False if none
    extract_answer(text)        the final answer inside a model response, or None
    answers_match(pred, gold)   whether two final answers are mathematically equivalent
    clear_caches()              empty the LRU caches (for cold-cache benchmarks)

All three are pure: deterministic, thread-safe (no `signal`, no state beyond LRU caches; see
`clear_caches`), they never raise, and they return within milliseconds on any input.

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
   response that merely ends on the right number; GSM8K-style graders do the same.

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

Safety: answers over 1,000 characters or nested over 30 brackets deep are compared as text only;
exact powers stop at 4,096 bits and factorials at 300!, so `9^9^9^9` and `10^{100000}` fall back to
text; float overflow makes an expression non-numeric instead of raising. No `simplify`, no sympy, no
math-verify: the numeric identity test replaces them and keeps every call bounded.
"""

from __future__ import annotations

import cmath
import itertools
import math
import random
import re
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from marft_envs.rewards import _latex
from marft_envs.rewards._latex import ParseError

_MAX_CHARS = 1000  # longer answers are compared as text
_MAX_ITEMS = 64  # elements of a list, set, tuple or matrix
_MAX_VARS = 8
_MAX_PM = 3  # `\pm` signs in one expression (2**3 readings)
_MAX_EXACT_BITS = 4096  # exact powers larger than this are refused
_MAX_FACTORIAL = 300
_N_POINTS = 3  # points at which expressions in variables are compared
_REL_TOL, _ABS_TOL = 1e-9, 1e-12


def extract_answer(text: str) -> str | None:
    """The final answer inside a model response, by the rules in the module docstring; None if none."""
    try:
        if not isinstance(text, str):
            return None
        if _BOX.search(text):  # a model that boxes its answer is judged by its box alone
            return _last_boxed(text)
        for rule in (_last_hashes, _answer_phrase, _bare_answer, _last_number):
            answer = rule(text)
            if answer is not None:
                return answer
        return None
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
    _readings.cache_clear()


# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_UNBRACED_BOX = re.compile(r"[ \t]*([^\s${}]+)")
_BRACE = re.compile(r"[{}]")
_HASHES = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_IS = re.compile(r"answer(?:\s+is|\s*:)[\s:]*([^\n]*)", re.I)
_MATH_SPAN = re.compile(r"\$+([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]")
# A full stop, or the next word. A run of spaces is tried only from its first space (the lookbehind),
# so the search stays linear: `\s+` retried from every space of a long run is quadratic.
_SENTENCE_END = re.compile(r"\.(?:\s|$)|(?<!\s)\s+(?=[A-Za-z]{2})")
_COMMAND = re.compile(r"\\[A-Za-z]+")
# A number is the first of these that matches, scanning left to right (as one alternation would):
_NUMBER_START = re.compile(r"\\[dt]?frac\{|-?\.?\d")  # where any of them can begin
_FRAC_NUMBER = re.compile(r"\\[dt]?frac\{-?\d+\}\{-?\d+\}")
_GROUPED_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])")  # 1,234.5
_DIGIT_GROUPS = re.compile(r"-?\d{1,3}(?:,\d{3})+")
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def _last_boxed(text: str) -> str | None:
    starts = [m.end() for m in _BOX.finditer(text)]
    if not starts:
        return None
    closers = _brace_pairs(text, starts[0])
    for start in reversed(starts):  # the last box that is complete
        i = start
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "{":
            if i in closers:
                return text[i + 1:closers[i]].strip()
        elif m := _UNBRACED_BOX.match(text, start):
            return m.group(1)
    return None


def _brace_pairs(text: str, start: int) -> dict[int, int]:
    """{index of `{`: index of its `}`} from `start` on, in one pass (linear on hostile input)."""
    pairs, stack = {}, []
    for m in _BRACE.finditer(text, start):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def _last_hashes(text: str) -> str | None:
    if "####" not in text:
        return None
    found = [m.group(1).strip() for m in _HASHES.finditer(text)]
    return next((f for f in reversed(found) if f), None)


def _answer_phrase(text: str) -> str | None:
    for m in reversed(list(_ANSWER_IS.finditer(text))):
        tail = m.group(1).strip().strip("*").strip()
        if span := _MATH_SPAN.match(tail):
            tail = next(g for g in span.groups() if g is not None)
        else:
            tail = _until_sentence_end(tail)
        if tail.strip():
            return tail.strip()
    return None


def _until_sentence_end(tail: str) -> str:
    # Cut at the first full stop or following word that lies outside every brace group, so that
    # `5\text{ units}` stays whole while `5 apples.` gives `5`.
    depth, counted = 0, 0
    for m in _SENTENCE_END.finditer(tail):
        depth += tail.count("{", counted, m.start()) - tail.count("}", counted, m.start())  # one pass in all
        counted = m.start()
        if depth <= 0:
            return tail[: m.start()]
    return tail


def _bare_answer(text: str) -> str | None:
    s = text.strip()
    if not s or len(s) > 100 or "\n" in s or re.search(r"[A-Za-z]{2,}", _COMMAND.sub("", s)):
        return None
    return s


def _last_number(text: str) -> str | None:
    # One alternation regex retried the grouped form at every group of `1,234,567,...,12` (which
    # fails only at its end): quadratic. When the grouped form fails, it fails from every later group
    # of the same run too (same end, same next character), so it is not tried again inside the run.
    last, pos, dead_until = None, 0, -1
    while start := _NUMBER_START.search(text, pos):
        p = start.start()
        found = _FRAC_NUMBER.match(text, p)
        if found is None and p >= dead_until:
            found = _GROUPED_NUMBER.match(text, p)
            if found is None and (groups := _DIGIT_GROUPS.match(text, p)):
                dead_until = groups.end()
        found = found or _PLAIN_NUMBER.match(text, p)
        if found is None:
            pos = p + 1
            continue
        last, pos = found, found.end()
    return last.group() if last else None


# ---------------------------------------------------------------------------------------------
# Reading an answer into a structure
# ---------------------------------------------------------------------------------------------


class _Answer(NamedTuple):
    """One reading of an answer."""

    kind: str  # scalar | tuple | list | set | union | matrix | eq | rel | word | text
    value: object  # a parse tree (scalar), child _Answers (containers), ...: see _structure_of
    key: str  # normalised text without spaces: equal keys are equal answers


_AMBIGUOUS_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_MATRIX = re.compile(r"\\begin\{([pbBvV]?matrix|array)\}(?:\{[lcr|\s]*\})?(.*)\\end\{\1\}", re.S)
# sympy's printer writes a bmatrix as `\left[\begin{matrix}...\end{matrix}\right]` (a pmatrix with parentheses);
# `\left`/`\right` are gone by now, and the brackets are the matrix's own
_ONE_MATRIX = r"(\\begin\{matrix\}(?:(?!\\(?:begin|end)\{matrix\}).)*\\end\{matrix\})"
_BRACKETED_MATRIX = re.compile(rf"\[\s*{_ONE_MATRIX}\s*\]|\(\s*{_ONE_MATRIX}\s*\)", re.S)
# (written, canonical, swap sides): `a > b` is read as `b < a`
_RELATIONS = (("\\le", "\\le", False), ("\\ge", "\\le", True), ("<", "<", False),
              (">", "<", True), ("\\ne", "\\ne", False))
_SUB = r"(?:_\{?\w+\}?)?"
_NAME = re.compile(rf"(?:[A-Za-z]|\\[A-Za-z]+){_SUB}(?:\([A-Za-z,]+\))?|\((?:[A-Za-z]{_SUB},)+[A-Za-z]{_SUB}\)")


def _text_key(s: str) -> str:
    return re.sub(r"\s+|\$", "", s)


def _text(s: str) -> _Answer:
    return _Answer("text", None, s.replace(" ", ""))


@lru_cache(maxsize=8192)
def _match_cached(pred: str, gold: str) -> bool:
    preds, golds = _readings(pred), _readings(gold)
    if not preds[0].key or not golds[0].key:
        return False
    return any(_match(p, g) for p in preds for g in golds)


@lru_cache(maxsize=8192)
def _readings(answer: str) -> tuple[_Answer, ...]:
    """The ways to read an answer: usually one; two for `58,500` and `50\\%`."""
    s = _latex.normalise(answer)
    if _latex.is_word(s):
        return (_Answer("word", None, _latex.word_key(s)),)
    s = _latex.clean_answer(s)
    percent = s.endswith("%")
    s = s.replace("%", "").strip()
    if _latex.nesting_depth(s) > _latex.MAX_DEPTH:
        return (_text(s),)
    if _AMBIGUOUS_THOUSANDS.fullmatch(s):
        return (_structure(s.replace(",", "")), _structure(s))
    if percent:  # `50\%` is 50 (MATH golds drop the mark) or 0.5 (its value)
        return (_structure(s), _structure(f"({s})/100"))
    return (_structure(s),)


def _structure(s: str) -> _Answer:
    try:
        return _structure_of(s)
    except (ParseError, RecursionError, ValueError, ArithmeticError):
        return _text(s)


def _structure_of(s: str) -> _Answer:
    key = s.replace(" ", "")
    if not key:
        return _text(s)
    if m := _BRACKETED_MATRIX.fullmatch(s):
        s = m.group(1) or m.group(2)
    if m := _MATRIX.fullmatch(s):
        rows = [r for r in _latex.split_top(m.group(2), "\\\\") if r]
        cells = tuple(tuple(_structure(c) for c in _latex.split_top(r, "&")) for r in rows)
        if len({len(r) for r in cells}) != 1 or len(cells) * len(cells[0]) > _MAX_ITEMS:
            raise ParseError("ragged or huge matrix")
        return _Answer("matrix", cells, key)
    if len(parts := _latex.split_top(s, "\\cup")) > 1:
        return _Answer("union", tuple(_structure(p) for p in parts), key)
    if len(parts := _latex.split_top(s, ",")) > 1:
        return _Answer("list", _elements(parts), key)
    if s.startswith("\\{") and s.endswith("\\}") and _latex.closing_index(s, 1) == len(s) - 1:
        inner = s[2:-2].strip()
        return _Answer("set", _elements(_latex.split_top(inner, ",")) if inner else (), key)
    if s[0] in "([" and s[-1] in ")]" and _latex.closing_index(s, 0) == len(s) - 1:
        if len(parts := _latex.split_top(s[1:-1], ",")) > 1:
            return _Answer("tuple", (s[0] + s[-1], _elements(parts, flatten=False)), key)
    if len(parts := _latex.split_top(s, "=")) > 1:  # `x = 1/2 = 0.5`: the first and last sides
        left, right = _structure(parts[0]), _structure(parts[-1])
        if _NAME.fullmatch(right.key) and not _NAME.fullmatch(left.key):
            left, right = right, left  # `2x+3 = y`
        return _Answer("eq", (left, right, bool(_NAME.fullmatch(left.key))), key)
    for written, canonical, swap in _RELATIONS:
        if len(parts := _latex.split_top(s, written)) == 2:
            left, right = (_scalar(p) for p in parts)
            return _Answer("rel", (canonical, *((right, left) if swap else (left, right))), key)
    tree, n_pm = _latex.parse(s)
    if n_pm > _MAX_PM:
        raise ParseError("too many \\pm")
    if n_pm:  # `1 \pm \sqrt{19}` is the list of both roots
        return _Answer("list", tuple(_Answer("scalar", t, repr(t)) for t in _expand_pm(tree)), key)
    return _Answer("scalar", tree, key)


def _elements(parts: list[str], flatten: bool = True) -> tuple[_Answer, ...]:
    if len(parts) > _MAX_ITEMS:
        raise ParseError("too many elements")
    items = []
    for part in parts:
        item = _structure(part)
        # inside a list or set, `1 \pm \sqrt 5` contributes both of its values
        items.extend(item.value if flatten and item.kind == "list" else (item,))
    return tuple(items)


def _scalar(s: str) -> tuple:
    tree, n_pm = _latex.parse(s)
    if n_pm:
        raise ParseError("\\pm in a relation")
    return tree


def _expand_pm(node: tuple) -> list[tuple]:
    """Every reading of a tree with each `\\pm` taken as + and as -."""
    if node[0] == "pm":
        return [v for x in _expand_pm(node[1]) for v in (x, ("neg", x))]
    options = []
    for field in node[1:]:
        if _is_node(field):
            options.append(_expand_pm(field))
        elif isinstance(field, tuple):  # the terms of an add, the factors of a mul
            options.append(list(itertools.product(*map(_expand_pm, field))))
        else:
            options.append([field])
    return [(node[0], *combo) for combo in itertools.product(*options)]


# ---------------------------------------------------------------------------------------------
# Comparing structures
# ---------------------------------------------------------------------------------------------


def _match(a: _Answer, b: _Answer) -> bool:
    if a.key == b.key:
        return True
    kinds = {a.kind, b.kind}
    if "word" in kinds:
        return _latex.word_key(a.key) == _latex.word_key(b.key)
    if "eq" in kinds:
        return _match_equation(a, b)
    if "text" in kinds:
        return False
    if a.kind == b.kind == "scalar":
        return _scalars_equal(a.value, b.value)
    if a.kind == b.kind == "tuple":
        return a.value[0] == b.value[0] and _in_order(a.value[1], b.value[1])
    if a.kind == b.kind == "matrix":
        return len(a.value) == len(b.value) and all(map(_in_order, a.value, b.value))
    if a.kind == b.kind and a.kind in ("list", "union"):
        return _same_multiset(a.value, b.value)
    if "set" in kinds and kinds <= {"set", "list", "scalar"}:
        return _same_set(_items(a), _items(b))
    if a.kind == b.kind == "rel":
        (op_a, *sides_a), (op_b, *sides_b) = a.value, b.value
        return op_a == op_b and all(map(_scalars_equal, sides_a, sides_b))
    return False


def _items(a: _Answer) -> tuple[_Answer, ...]:
    return a.value if a.kind in ("set", "list") else (a,)


def _in_order(xs, ys) -> bool:
    return len(xs) == len(ys) and all(map(_match, xs, ys))


def _same_multiset(xs, ys) -> bool:
    if len(xs) != len(ys):
        return False
    unused = list(ys)
    for x in xs:  # greedy pairing is exact because equivalence is transitive
        j = next((j for j, y in enumerate(unused) if _match(x, y)), None)
        if j is None:
            return False
        del unused[j]
    return True


def _same_set(xs, ys) -> bool:
    return all(any(_match(x, y) for y in ys) for x in xs) and all(any(_match(x, y) for x in xs) for y in ys)


def _match_equation(a: _Answer, b: _Answer) -> bool:
    if a.kind == b.kind == "eq":
        (left_a, right_a, named_a), (left_b, right_b, named_b) = a.value, b.value
        if _equations_proportional(a.value, b.value):
            return True
        return named_a and named_b and left_a.key == left_b.key and _match(right_a, right_b)
    eq, other = (a, b) if a.kind == "eq" else (b, a)
    left, right, named = eq.value
    if named:  # `x = 5` answers `5`
        return _match(right, other)
    # `\frac{10}{2} = 5` answers `5` too, provided it is a true statement about numbers
    constant = left.kind == "scalar" and not _symbols(left.value)
    return constant and _match(left, right) and _match(right, other)


def _equations_proportional(eq_a, eq_b) -> bool:
    """Whether lhs - rhs of one equation is a nonzero constant multiple of the other's."""
    sides = (eq_a[0], eq_a[1], eq_b[0], eq_b[1])
    if any(side.kind != "scalar" for side in sides):
        return False
    f_a = ("add", (sides[0].value, ("neg", sides[1].value)))
    f_b = ("add", (sides[2].value, ("neg", sides[3].value)))
    names = _symbols(f_a) | _symbols(f_b)
    if not names or len(names) > _MAX_VARS:
        return False
    ratio = None
    for env in _environments(names):
        v_a, v_b = _numeric(f_a, env), _numeric(f_b, env)
        if v_a is None or v_b is None:
            return False
        if _close(v_b, 0) or _close(v_a, 0):
            if _close(v_a, 0) and _close(v_b, 0):
                continue
            return False
        if ratio is None:
            ratio = v_a / v_b
        elif not _close(v_a / v_b, ratio):
            return False
    return ratio is not None


def _scalars_equal(a: tuple, b: tuple) -> bool:
    if a == b:
        return True
    exact_a, exact_b = _exact(a), _exact(b)
    if exact_a is not None and exact_b is not None:
        return exact_a == exact_b
    if (exact_a is not None and _has_decimal(a)) or (exact_b is not None and _has_decimal(b)):
        return False  # a finite decimal only approximates an irrational value
    inf_a, inf_b = _infinity(a), _infinity(b)
    if inf_a or inf_b:
        return inf_a == inf_b
    names = _symbols(a) | _symbols(b)
    if len(names) > _MAX_VARS:
        return False
    for env in _environments(names):
        v_a, v_b = _numeric(a, env), _numeric(b, env)
        if v_a is None or v_b is None or not _close(v_a, v_b):
            return False
    return True


def _close(x: complex, y: complex) -> bool:
    return abs(x - y) <= _REL_TOL * max(abs(x), abs(y)) + _ABS_TOL


# ---------------------------------------------------------------------------------------------
# Evaluating parse trees (trees are made by _latex.parse)
# ---------------------------------------------------------------------------------------------


def _is_node(field) -> bool:
    return isinstance(field, tuple) and bool(field) and isinstance(field[0], str)


def _walk(node: tuple):
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        for field in node[1:]:
            if _is_node(field):
                stack.append(field)
            elif isinstance(field, tuple):
                stack.extend(field)


def _symbols(node: tuple) -> frozenset[str]:
    return frozenset(n[1] for n in _walk(node) if n[0] == "sym")


def _has_decimal(node: tuple) -> bool:
    return any(n[0] == "num" and n[2] for n in _walk(node))


def _infinity(node: tuple) -> int:
    """+1 for `\\infty`, -1 for `-\\infty`, 0 for anything else."""
    if node == ("const", "inf"):
        return 1
    return -1 if node == ("neg", ("const", "inf")) else 0


def _sample_points() -> tuple[tuple[float, ...], ...]:
    rng = random.Random(1729)  # fixed: the grader must be deterministic
    return tuple(tuple(rng.uniform(0.5, 3.5) for _ in range(_MAX_VARS)) for _ in range(_N_POINTS))


_POINTS = _sample_points()


def _environments(names: frozenset[str]) -> list[dict[str, complex]]:
    if not names:
        return [{}]
    return [dict(zip(sorted(names), map(complex, point))) for point in _POINTS]


_EXACT_UNARY = {
    "neg": lambda v: -v,
    "inv": lambda v: 1 / v if v else None,
    "abs": abs,
    "floor": lambda v: Fraction(math.floor(v)),
    "ceil": lambda v: Fraction(math.ceil(v)),
    "fact": lambda v: Fraction(math.factorial(int(v))) if v.denominator == 1 and 0 <= v <= _MAX_FACTORIAL else None,
}


def _exact(node: tuple) -> Fraction | None:
    """The exact rational value of a tree, or None (irrational, symbolic, or too big to compute)."""
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind in ("add", "mul"):
        total = Fraction(0 if kind == "add" else 1)
        for child in node[1]:
            v = _exact(child)
            if v is None:
                return None
            total = total + v if kind == "add" else total * v
        return total
    if kind in _EXACT_UNARY:
        v = _exact(node[1])
        return None if v is None else _EXACT_UNARY[kind](v)
    if kind == "pow":
        return _exact_pow(_exact(node[1]), _exact(node[2]))
    if kind == "root":
        index, v = _exact(node[2]), _exact(node[1])
        if index is None or v is None or index.denominator != 1 or not 1 <= index <= 64:
            return None
        return _exact_root(v, int(index))
    if kind == "binom":
        n, k = _exact(node[1]), _exact(node[2])
        if n is None or k is None or n.denominator != 1 or k.denominator != 1 or not 0 <= n <= 1000:
            return None
        return Fraction(math.comb(int(n), int(k))) if k >= 0 else Fraction(0)
    return None


def _exact_pow(base: Fraction | None, exp: Fraction | None) -> Fraction | None:
    if base is None or exp is None:
        return None
    if exp.denominator != 1:  # 8^{2/3}: exact only when the root is
        if exp.denominator > 64 or (base := _exact_root(base, exp.denominator)) is None:
            return None
        exp = Fraction(exp.numerator)
    n = exp.numerator
    if base == 0:
        return None if n < 0 else Fraction(int(n == 0))
    if abs(base) == 1:
        return base ** (n % 2)
    bits = max(base.numerator.bit_length(), base.denominator.bit_length())
    return base ** n if bits * abs(n) <= _MAX_EXACT_BITS else None  # 9^9^9 stops here


def _exact_root(v: Fraction, n: int) -> Fraction | None:
    if v < 0:
        root = _exact_root(-v, n) if n % 2 else None
        return -root if root is not None else None
    num, den = _integer_root(v.numerator, n), _integer_root(v.denominator, n)
    return Fraction(num, den) if num ** n == v.numerator and den ** n == v.denominator else None


def _integer_root(m: int, n: int) -> int:
    """floor(m ** (1/n)) by Newton's method on integers."""
    if m < 2:
        return m
    x = 1 << -(-m.bit_length() // n)  # an upper bound
    while True:
        y = ((n - 1) * x + m // x ** (n - 1)) // n
        if y >= x:
            return x
        x = y


_FUNCTIONS = {
    "sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan, "cot": lambda z: 1 / cmath.tan(z),
    "sec": lambda z: 1 / cmath.cos(z), "csc": lambda z: 1 / cmath.sin(z), "arcsin": cmath.asin,
    "arccos": cmath.acos, "arctan": cmath.atan, "sinh": cmath.sinh, "cosh": cmath.cosh,
    "tanh": cmath.tanh, "ln": cmath.log, "exp": cmath.exp,
}
_CONSTANT_VALUES = {"pi": complex(math.pi), "e": complex(math.e), "i": 1j}


def _numeric(node: tuple, env: dict[str, complex]) -> complex | None:
    """The complex value of a tree with its variables set from env; None if undefined or overflowing."""
    try:
        value = _evaluate(node, env)
    except (ArithmeticError, ValueError, TypeError, KeyError):  # overflow, 1/0, log 0, inf, 52_8
        return None
    return value if cmath.isfinite(value) else None


def _unsigned_zero(z: complex) -> complex:
    """z with an imaginary -0.0 made +0.0: branch cuts must not depend on how a 0 was computed."""
    return complex(z.real, z.imag + 0.0)


def _evaluate(node: tuple, env: dict[str, complex]) -> complex:
    kind = node[0]
    if kind == "num":
        return complex(node[1])
    if kind == "sym":
        return env[node[1]]
    if kind == "const":
        return _CONSTANT_VALUES[node[1]]  # KeyError for `inf`
    if kind == "add":
        return sum(_evaluate(t, env) for t in node[1])
    if kind == "mul":
        return math.prod(_evaluate(f, env) for f in node[1])
    if kind == "neg":
        return -_evaluate(node[1], env)
    if kind == "inv":
        return 1 / _evaluate(node[1], env)
    if kind == "abs":
        return complex(abs(_evaluate(node[1], env)))
    if kind == "func":
        return _FUNCTIONS[node[1]](_unsigned_zero(_evaluate(node[2], env)))
    if kind == "pow":
        base, exp = _evaluate(node[1], env), _evaluate(node[2], env)
        if exp.imag == 0 and exp.real.is_integer() and abs(exp.real) <= 64:
            return base ** int(exp.real)  # repeated products: exact for negative bases
        return _unsigned_zero(base) ** exp
    if kind == "root":
        v, n = _unsigned_zero(_evaluate(node[1], env)), _exact(node[2])
        if n is None or n.denominator != 1 or not 1 <= n <= 64:
            raise ValueError("root index")
        if v.imag == 0 and v.real < 0 and n % 2:  # the real cube root of -8 is -2
            return -complex((-v.real) ** (1 / int(n)))
        return cmath.sqrt(v) if n == 2 else v ** (1 / int(n))
    exact = _exact(node)  # floor, ceil, factorial, binomial: integer-valued
    if exact is None:
        raise ValueError(f"cannot evaluate {kind}")
    return complex(exact)
