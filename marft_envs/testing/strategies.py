"""Hypothesis strategies that rewrite a numeric answer into equivalent forms and into near misses.

Property tests for a grader, or for any reward built on one::

    from hypothesis import given, strategies as st
    from marft_envs.testing.strategies import numbers, equivalent_forms, near_misses

    @given(st.data())
    def test_grader(data):
        value = data.draw(numbers())
        assert answers_match(data.draw(equivalent_forms(value)), canonical(value))
        assert not answers_match(data.draw(near_misses(value)), canonical(value))

Values are ``fractions.Fraction``; ``canonical`` gives the MATH-style gold string (``"12"``,
``"-\\frac{7}{3}"``). Needs ``hypothesis`` (``pip install marft[dev]``).
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st


def canonical(value: Fraction) -> str:
    """The MATH-style gold string for a rational value."""
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def numbers(max_abs: int = 10_000, max_denominator: int = 12) -> st.SearchStrategy[Fraction]:
    """Integers and simple fractions, as ``Fraction``."""
    integers = st.integers(-max_abs, max_abs).map(Fraction)
    fractions_ = st.builds(Fraction, st.integers(-max_abs, max_abs), st.integers(2, max_denominator))
    return st.one_of(integers, fractions_)


def _decimal(value: Fraction) -> str | None:
    # A terminating decimal exists when the denominator has only the prime factors 2 and 5.
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return None
    digits = 0
    while (value * 10**digits).denominator != 1:
        digits += 1
    return f"{float(value):.{max(digits, 1)}f}"


def _thousands(n: int, sep: str) -> str:
    s = f"{abs(n):,}".replace(",", sep)
    return ("-" if n < 0 else "") + s


def equivalent_forms(value: Fraction) -> st.SearchStrategy[str]:
    """Strings that a correct grader must accept as equal to ``canonical(value)``."""
    forms = [canonical(value), f" {canonical(value)} ", f"${canonical(value)}$"]
    num, den = value.numerator, value.denominator
    sign = "-" if value < 0 else ""
    if den == 1:
        forms += [f"{num}.0", f"x = {num}", f"{num}\\text{{ units}}", f"\\text{{{num}}}", f"{{{num}}}"]
        if abs(num) >= 1000:
            forms += [_thousands(num, ",\\!"), _thousands(num, "{,}")]
        forms += [f"\\frac{{{2 * num}}}{{2}}"]
    else:
        a, b = abs(num), den
        forms += [f"{sign}{a}/{b}", f"{sign}\\dfrac{{{a}}}{{{b}}}", f"{sign}\\frac{{{3 * a}}}{{{3 * b}}}", f"\\frac{{{num}}}{{{den}}}"]
    decimal = _decimal(value)
    if decimal is not None:
        forms.append(decimal)
    return st.sampled_from(forms)


def near_misses(value: Fraction) -> st.SearchStrategy[str]:
    """Strings that look like ``canonical(value)`` but are different values; a grader must reject them."""
    misses = [canonical(value + 1), canonical(value - 1), canonical(-value) if value != 0 else "1", canonical(value * 10)]
    if value.denominator == 1:
        n = value.numerator
        misses.append(f"{abs(n) if n else 7}_8")  # a base-8 numeral is not the decimal number
    else:
        if value.numerator != 0:
            misses.append(canonical(1 / value) if abs(value) != 1 else "2")
        misses.append(canonical(Fraction(value.numerator, value.denominator + 1)))
    return st.sampled_from([m for m in misses if m != canonical(value)])
