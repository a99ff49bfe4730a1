r"""Reading a final answer into a structure: a scalar, a tuple, a list, a set, a matrix, an equation, ...

    readings(answer)   the ways to read an answer (usually one; two for `58,500` and `50\%`), cached

The text is normalised first (`rewards._latex_normalise`); scalars are parsed into trees by
`rewards._latex.parse`. What cannot be read is kept as normalised text, so that it still equals
itself.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import NamedTuple

from marft_envs.rewards import _latex
from marft_envs.rewards._latex import ParseError
from marft_envs.rewards._latex_normalise import clean_answer, closing_index, is_word, nesting_depth, normalise, split_top, word_key
from marft_envs.rewards._math_evaluate import is_node

_MAX_ITEMS = 64  # elements of a list, set, tuple or matrix
_MAX_PM = 3  # `\pm` signs in one expression (2**3 readings)


class Answer(NamedTuple):
    """One reading of an answer."""

    kind: str  # scalar | tuple | list | set | union | matrix | eq | rel | word | text
    value: object  # a parse tree (scalar), child Answers (containers), ...: see _structure_of
    key: str  # normalised text without spaces: equal keys are equal answers


_AMBIGUOUS_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_MATRIX = re.compile(r"\\begin\{([pbBvV]?matrix|array)\}(?:\{[lcr|\s]*\})?(.*)\\end\{\1\}", re.S)
# sympy's printer writes a bmatrix as `\left[\begin{matrix}...\end{matrix}\right]` (a pmatrix with parentheses);
# `\left`/`\right` are gone by now, and the brackets are the matrix's own
_ONE_MATRIX = r"(\\begin\{matrix\}(?:(?!\\(?:begin|end)\{matrix\}).)*\\end\{matrix\})"
_BRACKETED_MATRIX = re.compile(rf"\[\s*{_ONE_MATRIX}\s*\]|\(\s*{_ONE_MATRIX}\s*\)", re.S)
# (written, canonical, swap sides): `a > b` is read as `b < a`
_RELATIONS = (("\\le", "\\le", False), ("\\ge", "\\le", True), ("<", "<", False), (">", "<", True), ("\\ne", "\\ne", False))
_SUB = r"(?:_\{?\w+\}?)?"
_NAME = re.compile(rf"(?:[A-Za-z]|\\[A-Za-z]+){_SUB}(?:\([A-Za-z,]+\))?|\((?:[A-Za-z]{_SUB},)+[A-Za-z]{_SUB}\)")


def _text(s: str) -> Answer:
    return Answer("text", None, s.replace(" ", ""))


@lru_cache(maxsize=8192)
def readings(answer: str) -> tuple[Answer, ...]:
    """The ways to read an answer: usually one; two for `58,500` and `50\\%`."""
    s = normalise(answer)
    if is_word(s):
        return (Answer("word", None, word_key(s)),)
    s = clean_answer(s)
    percent = s.endswith("%")
    s = s.replace("%", "").strip()
    if nesting_depth(s) > _latex.MAX_DEPTH:
        return (_text(s),)
    if _AMBIGUOUS_THOUSANDS.fullmatch(s):
        return (_structure(s.replace(",", "")), _structure(s))
    if percent:  # `50\%` is 50 (MATH golds drop the mark) or 0.5 (its value)
        return (_structure(s), _structure(f"({s})/100"))
    return (_structure(s),)


def _structure(s: str) -> Answer:
    try:
        return _structure_of(s)
    except (ParseError, RecursionError, ValueError, ArithmeticError):
        return _text(s)


def _structure_of(s: str) -> Answer:
    key = s.replace(" ", "")
    if not key:
        return _text(s)
    if m := _BRACKETED_MATRIX.fullmatch(s):
        s = m.group(1) or m.group(2)
    if m := _MATRIX.fullmatch(s):
        rows = [r for r in split_top(m.group(2), "\\\\") if r]
        cells = tuple(tuple(_structure(c) for c in split_top(r, "&")) for r in rows)
        if len({len(r) for r in cells}) != 1 or len(cells) * len(cells[0]) > _MAX_ITEMS:
            raise ParseError("ragged or huge matrix")
        return Answer("matrix", cells, key)
    if len(parts := split_top(s, "\\cup")) > 1:
        return Answer("union", tuple(_structure(p) for p in parts), key)
    if len(parts := split_top(s, ",")) > 1:
        return Answer("list", _elements(parts), key)
    if s.startswith("\\{") and s.endswith("\\}") and closing_index(s, 1) == len(s) - 1:
        inner = s[2:-2].strip()
        return Answer("set", _elements(split_top(inner, ",")) if inner else (), key)
    if s[0] in "([" and s[-1] in ")]" and closing_index(s, 0) == len(s) - 1:
        if len(parts := split_top(s[1:-1], ",")) > 1:
            return Answer("tuple", (s[0] + s[-1], _elements(parts, flatten=False)), key)
    if len(parts := split_top(s, "=")) > 1:  # `x = 1/2 = 0.5`: the first and last sides
        left, right = _structure(parts[0]), _structure(parts[-1])
        if _NAME.fullmatch(right.key) and not _NAME.fullmatch(left.key):
            left, right = right, left  # `2x+3 = y`
        return Answer("eq", (left, right, bool(_NAME.fullmatch(left.key))), key)
    for written, canonical, swap in _RELATIONS:
        if len(parts := split_top(s, written)) == 2:
            left, right = (_scalar(p) for p in parts)
            return Answer("rel", (canonical, *((right, left) if swap else (left, right))), key)
    tree, n_pm = _latex.parse(s)
    if n_pm > _MAX_PM:
        raise ParseError("too many \\pm")
    if n_pm:  # `1 \pm \sqrt{19}` is the list of both roots
        return Answer("list", tuple(Answer("scalar", t, repr(t)) for t in _expand_pm(tree)), key)
    return Answer("scalar", tree, key)


def _elements(parts: list[str], flatten: bool = True) -> tuple[Answer, ...]:
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
        if is_node(field):
            options.append(_expand_pm(field))
        elif isinstance(field, tuple):  # the terms of an add, the factors of a mul
            options.append(list(itertools.product(*map(_expand_pm, field))))
        else:
            options.append([field])
    return [(node[0], *combo) for combo in itertools.product(*options)]
