"""Whether two readings of answers (`rewards._math_read.Answer`) are equivalent, by the rules of `rewards.math`.

    compare(as, bs)    whether any reading of one answer is equivalent to any of the other's
    equivalent(a, b)   equal keys; else by kind: scalars by value, tuples in order, lists and unions
                       as multisets, sets as sets, equations and relations side by side

Scalars are equal when their exact rational values are (`rewards._math_evaluate.exact`), else when
their numeric values agree to a relative `_REL_TOL` at the same fixed points.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from marft_envs.rewards._latex_normalise import word_key
from marft_envs.rewards._math_evaluate import MAX_VARS, environments, exact, has_decimal, infinity, numeric, symbols
from marft_envs.rewards._math_read import Answer

_REL_TOL, _ABS_TOL = 1e-9, 1e-12


def equivalent(a: Answer, b: Answer) -> bool:
    """Whether two readings are the same answer, by the equivalence rules in `rewards.math`'s docstring."""
    if a.key == b.key:
        return True
    kinds = {a.kind, b.kind}
    if "word" in kinds:
        return word_key(a.key) == word_key(b.key)
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


def _items(a: Answer) -> tuple[Answer, ...]:
    return a.value if a.kind in ("set", "list") else (a,)


def _in_order(xs, ys) -> bool:
    return len(xs) == len(ys) and all(map(equivalent, xs, ys))


def _same_multiset(xs, ys) -> bool:
    if len(xs) != len(ys):
        return False
    unused = list(ys)
    for x in xs:  # greedy pairing is exact because equivalence is transitive
        j = next((j for j, y in enumerate(unused) if equivalent(x, y)), None)
        if j is None:
            return False
        del unused[j]
    return True


def _same_set(xs, ys) -> bool:
    return all(any(equivalent(x, y) for y in ys) for x in xs) and all(any(equivalent(x, y) for x in xs) for y in ys)


def _match_equation(a: Answer, b: Answer) -> bool:
    if a.kind == b.kind == "eq":
        (left_a, right_a, named_a), (left_b, right_b, named_b) = a.value, b.value
        if _equations_proportional(a.value, b.value):
            return True
        return named_a and named_b and left_a.key == left_b.key and equivalent(right_a, right_b)
    eq, other = (a, b) if a.kind == "eq" else (b, a)
    left, right, named = eq.value
    if named:  # `x = 5` answers `5`
        return equivalent(right, other)
    # `\frac{10}{2} = 5` answers `5` too, provided it is a true statement about numbers
    constant = left.kind == "scalar" and not symbols(left.value)
    return constant and equivalent(left, right) and equivalent(right, other)


def _equations_proportional(eq_a, eq_b) -> bool:
    """Whether lhs - rhs of one equation is a nonzero constant multiple of the other's."""
    sides = (eq_a[0], eq_a[1], eq_b[0], eq_b[1])
    if any(side.kind != "scalar" for side in sides):
        return False
    f_a = ("add", (sides[0].value, ("neg", sides[1].value)))
    f_b = ("add", (sides[2].value, ("neg", sides[3].value)))
    names = symbols(f_a) | symbols(f_b)
    if not names or len(names) > MAX_VARS:
        return False
    ratio = None
    for env in environments(names):
        v_a, v_b = numeric(f_a, env), numeric(f_b, env)
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


class _Facts(NamedTuple):
    """What a comparison needs to know about one scalar tree, computed once per `compare` call."""

    exact: object  # Fraction | None
    decimal: bool
    infinity: int
    symbols: frozenset[str]


_memo = threading.local()  # per `compare` call: tree id -> _Facts, (tree id, names) -> values


def compare(preds: tuple[Answer, ...], golds: tuple[Answer, ...]) -> bool:
    """Whether any reading of one answer is equivalent to any reading of the other.

    Each scalar's facts and numeric values are computed once per call (a set of 64 elements compares
    each with up to 64 others). They are keyed by the tree's id, which is stable while the readings
    are alive, so the memo lives for this call only.
    """
    _memo.facts, _memo.values = {}, {}
    try:
        return any(equivalent(p, g) for p in preds for g in golds)
    finally:
        _memo.facts = _memo.values = None


def _facts(tree: tuple) -> _Facts:
    memo = getattr(_memo, "facts", None)
    if memo is not None and id(tree) in memo:
        return memo[id(tree)]
    facts = _Facts(exact(tree), has_decimal(tree), infinity(tree), symbols(tree))
    if memo is not None:
        memo[id(tree)] = facts
    return facts


def _values(tree: tuple, names: frozenset[str]) -> tuple[complex | None, ...]:
    memo = getattr(_memo, "values", None)
    key = (id(tree), names)
    if memo is not None and key in memo:
        return memo[key]
    values = tuple(numeric(tree, env) for env in environments(names))
    if memo is not None:
        memo[key] = values
    return values


def _scalars_equal(a: tuple, b: tuple) -> bool:
    if a == b:
        return True
    fa, fb = _facts(a), _facts(b)
    if fa.exact is not None and fb.exact is not None:
        return fa.exact == fb.exact
    if (fa.exact is not None and fa.decimal) or (fb.exact is not None and fb.decimal):
        return False  # a finite decimal only approximates an irrational value
    if fa.infinity or fb.infinity:
        return fa.infinity == fb.infinity
    names = fa.symbols | fb.symbols
    if len(names) > MAX_VARS:
        return False
    for v_a, v_b in zip(_values(a, names), _values(b, names)):
        if v_a is None or v_b is None or not _close(v_a, v_b):
            return False
    return True


def _close(x: complex, y: complex) -> bool:
    return abs(x - y) <= _REL_TOL * max(abs(x), abs(y)) + _ABS_TOL
