"""Table-driven checks for reward functions.

A table is a list of :class:`Case` rows: the arguments a reward function gets and what it must
return. ``check_table`` runs them all and reports every failing row at once; ``cases`` turns a
table into ``pytest.mark.parametrize`` arguments so each row is its own test::

    from marft_envs.testing import Case, check_table

    TABLE = [
        Case(("\\\\boxed{4}", "4"), True, id="plain"),
        Case(("\\\\boxed{4.0}", "4"), True, id="decimal"),
        Case(("no answer", "4"), False, id="missing"),
    ]

    def test_grade():
        check_table(grade, TABLE)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """One row of a reward table: call ``fn(*args, **kwargs)`` and expect ``expected``."""

    args: Sequence[Any]
    """Positional arguments for the reward function."""
    expected: Any
    """The value it must return (floats compare with ``abs_tol``)."""
    id: str = ""
    """A short name shown when the row fails."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the reward function."""


def matches(actual: Any, expected: Any, abs_tol: float = 1e-9) -> bool:
    """Equality, with floats compared to ``abs_tol`` (bools compare exactly, never as numbers)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, float) or isinstance(actual, float):
        numbers = all(isinstance(v, (int, float)) for v in (actual, expected))
        return numbers and math.isclose(actual, expected, abs_tol=abs_tol)
    return actual == expected


def check_table(fn: Callable[..., Any], table: Iterable[Case], *, abs_tol: float = 1e-9) -> None:
    """Run every row; raise one AssertionError listing all rows that failed or raised."""
    failures = []
    rows = list(table)
    if not rows:
        raise ValueError("the reward table is empty: a check with no rows cannot fail")
    for k, case in enumerate(rows):
        name = case.id or f"row {k}"
        try:
            actual = fn(*case.args, **case.kwargs)
        except Exception as err:  # report, don't stop: the user wants every broken row at once
            failures.append(f"{name}: {fn.__name__}{tuple(case.args)!r} raised {type(err).__name__}: {err}")
            continue
        if not matches(actual, case.expected, abs_tol):
            failures.append(f"{name}: {fn.__name__}{tuple(case.args)!r} = {actual!r}, expected {case.expected!r}")
    if failures:
        raise AssertionError(f"{len(failures)} of {len(rows)} rows failed:\n" + "\n".join(failures))


def cases(table: Iterable[Case]):
    """``pytest.mark.parametrize("case", ...)`` over a table, one test per row, named by ``Case.id``."""
    import pytest

    rows = list(table)
    return pytest.mark.parametrize("case", rows, ids=[c.id or str(k) for k, c in enumerate(rows)])
