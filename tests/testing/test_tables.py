"""The table-driven kit itself: it must report failures, not hide them."""

import pytest

from marft_envs.testing import Case, check_table
from marft_envs.testing.tables import matches


def double(x):
    if x == "boom":
        raise RuntimeError("bad input")
    return 2 * x


def test_passing_table():
    check_table(double, [Case((1,), 2), Case((0.5,), 1.0), Case(("a",), "aa")])


def test_every_failing_row_is_reported():
    table = [Case((1,), 3, id="off-by-one"), Case((2,), 4, id="fine"), Case(("boom",), 0, id="raises")]
    with pytest.raises(AssertionError) as err:
        check_table(double, table)
    msg = str(err.value)
    assert "2 of 3 rows failed" in msg
    assert "off-by-one: double(1,) = 2, expected 3" in msg
    assert "raises: double('boom',) raised RuntimeError: bad input" in msg
    assert "fine" not in msg


def test_empty_table_cannot_pass():
    with pytest.raises(ValueError, match="empty"):
        check_table(double, [])


@pytest.mark.parametrize(
    "actual, expected, ok",
    [
        (1.0, 1.0 + 1e-12, True),
        (1.0, 1.1, False),
        (True, 1.0, False),
        (1, True, False),
        (True, True, True),
        ("a", "a", True),
        ("1", 1.0, False),
    ],
)
def test_matches(actual, expected, ok):
    assert matches(actual, expected) is ok
