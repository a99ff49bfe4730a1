"""The synthetic word problems' templates: wording, number draws and worked solution of each, by level.

``synthetic.py`` draws from :data:`TEMPLATES`; each template's ``solve`` writes the compact
``expression=value`` steps described there. Counts in the wording start at 2 so that no "1 apples"
appears; fractions are 1/12 to 23/12.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

# Word slots: "{name2}" draws from VOCAB["name"]; slots sharing a vocabulary get distinct words.
VOCAB: dict[str, tuple[str, ...]] = {
    "name": (
        "Ana",
        "Ben",
        "Carla",
        "Dev",
        "Emma",
        "Farid",
        "Grace",
        "Hugo",
        "Ines",
        "Jamal",
        "Kira",
        "Leo",
        "Maya",
        "Noah",
        "Olga",
        "Priya",
        "Quinn",
        "Rosa",
        "Sam",
        "Tariq",
        "Uma",
        "Victor",
        "Wen",
        "Yusuf",
        "Zoe",
    ),
    "thing": ("marbles", "stickers", "pencils", "shells", "stamps", "cards", "beads", "buttons", "crayons", "erasers"),
    "fruit": ("apples", "pears", "plums", "lemons", "oranges", "peaches", "apricots"),
    "dist": ("kilometers", "miles", "laps"),
    "item": ("notebooks", "pens", "mugs", "lamps", "kites", "puzzles", "candles", "scarves"),
    "gift": ("book", "scarf", "puzzle", "kite", "plant", "lamp"),
    "shop": ("store", "shop", "kiosk", "market stall", "bakery"),
    "pack": ("boxes", "bags", "jars", "packs", "crates"),
    "city": ("Oslo", "Lima", "Cairo", "Quito", "Perth", "Riga", "Hanoi", "Denver"),
    "food": ("pizzas", "pies", "cakes", "melons", "loaves of bread", "chocolate bars"),
    "drink": ("water", "juice", "milk", "tea", "lemonade"),
    "ingredient": ("flour", "sugar", "oats", "rice", "cocoa"),
    "material": ("ribbon", "rope", "string", "wire"),
}

_DENOMINATORS = tuple(range(2, 13))
_BILLS = (10, 20, 50, 100, 200, 500)
_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}

Numbers = dict[str, int | Fraction]


@dataclass(frozen=True)
class Template:
    """A word-problem shape: its wording, how to draw its numbers, and how to solve it."""

    tid: str
    level: int
    text: str  # str.format slots: the numbers from `draw`, and words from VOCAB
    draw: Callable[[np.random.Generator], Numbers]  # numbers in canonical (uid) order
    solve: Callable[[Numbers], tuple[list[str], Fraction]]  # (step lines, answer)


# ---- pure helpers --------------------------------------------------------------------------------


def step(x: Fraction | int, op: str, y: Fraction | int) -> tuple[str, Fraction]:
    """One solution line ``x<op>y=value`` and its value."""
    x, y = Fraction(x), Fraction(y)
    # The line is read with usual precedence: "5--3" or "1/2/3/4" would not mean what we computed.
    if y < 0 or (op == "/" and y.denominator != 1):
        raise ValueError(f"step {x}{op}{y} would not parse back to its value")
    value = _OPS[op](x, y)
    return f"{x}{op}{y}={value}", value


def chain(x: Fraction | int, *ops: tuple[str, Fraction | int]) -> tuple[list[str], Fraction]:
    """Steps applying ``ops`` left to right from ``x``: ``chain(23, ("+", 15))`` -> ``["23+15=38"]``."""
    lines, value = [], Fraction(x)
    for op, y in ops:
        line, value = step(value, op, y)
        lines.append(line)
    return lines, value


def _int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """Uniform integer in [lo, hi], inclusive."""
    return int(rng.integers(lo, hi + 1))


def _frac(rng: np.random.Generator, improper: bool = False) -> Fraction:
    """A reduced non-integer fraction: proper, or between 1 and 2 when ``improper``."""
    d = _DENOMINATORS[rng.integers(len(_DENOMINATORS))]
    return Fraction(_int(rng, d + 1, 2 * d - 1) if improper else _int(rng, 1, d - 1), d)


# ---- draws and solutions that need more than ranges and chains -------------------------------------


def _draw_minus(rng):  # a - b with 2 <= b < a
    a = _int(rng, 3, 99)
    return {"a": a, "b": _int(rng, 2, a - 1)}


def _draw_small_minus(rng):  # a - b with 2 <= b < a <= 20
    a = _int(rng, 3, 20)
    return {"a": a, "b": _int(rng, 2, a - 1)}


def _draw_store(rng):  # a - b + c, never below zero
    a = _int(rng, 20, 99)
    return {"a": a, "b": _int(rng, 1, a), "c": _int(rng, 1, 99)}


def _draw_wallet(rng):  # a - b - c, never below zero
    a = _int(rng, 20, 99)
    b = _int(rng, 2, a - 2)
    return {"a": a, "b": b, "c": _int(rng, 2, a - b)}


def _draw_boxes(rng):  # a*b - c, never below zero
    a, b = _int(rng, 2, 12), _int(rng, 2, 12)
    return {"a": a, "b": b, "c": _int(rng, 2, a * b - 1)}


def _draw_share(rng):  # total/b + c with b dividing total
    b, each = _int(rng, 2, 9), _int(rng, 2, 12)
    return {"total": b * each, "b": b, "c": _int(rng, 2, 20)}


def _draw_change(rng):  # paid - a*b, paid the smallest bill that covers the bill
    a, b = _int(rng, 2, 25), _int(rng, 2, 9)
    return {"a": a, "b": b, "paid": min(x for x in _BILLS if x >= a * b)}


def _draw_uneven(rng):  # a/b, not a whole number
    b = _int(rng, 2, 12)
    a = _int(rng, 2, 99)
    while a % b == 0:
        a = _int(rng, 2, 99)
    return {"a": a, "b": b}


def _draw_cut(rng):  # f1 - f2 > 0
    while True:  # redraw both: no proper fraction here is below 1/12
        f1, f2 = _frac(rng, improper=bool(rng.integers(2))), _frac(rng)
        if f1 > f2:
            return {"f1": f1, "f2": f2}


def _draw_leftover(rng):  # (a - b)/c, not a whole number
    c = _int(rng, 2, 9)
    a = _int(rng, 5, 60)
    b = _int(rng, 1, a - 2)
    while (a - b) % c == 0:
        b = _int(rng, 1, a - 2)
    return {"a": a, "b": b, "c": c}


def _draw_average(rng):  # (a + b + c)/3, not a whole number
    while True:
        a, b, c = _int(rng, 2, 30), _int(rng, 2, 30), _int(rng, 2, 30)
        if (a + b + c) % 3:
            return {"a": a, "b": b, "c": c}


def _solve_change(n):  # the running value is subtracted, so it is not a left-to-right chain
    (cost_line,), cost = chain(n["b"], ("*", n["a"]))
    change_line, change = step(n["paid"], "-", cost)
    return [cost_line, change_line], change


def _pair(rng, lo, hi):  # two independent counts
    return {"a": _int(rng, lo, hi), "b": _int(rng, lo, hi)}


# ---- the templates ------------------------------------------------------------------------------

TEMPLATES: tuple[Template, ...] = (
    # level 1: one addition or subtraction
    Template(
        "l1_gift",
        1,
        "{name} has {a} {thing}. {name2} gives {name} {b} more {thing}. How many {thing} does {name} have now?",
        lambda r: _pair(r, 2, 99),
        lambda n: chain(n["a"], ("+", n["b"])),
    ),
    Template(
        "l1_giveaway",
        1,
        "{name} had {a} {thing} and gave {b} of them to {name2}. How many {thing} does {name} have left?",
        _draw_minus,
        lambda n: chain(n["a"], ("-", n["b"])),
    ),
    Template(
        "l1_harvest",
        1,
        "{name} picked {a} {fruit} in the morning and {b} {fruit} in the afternoon. How many {fruit} did {name} pick in total?",
        lambda r: _pair(r, 2, 99),
        lambda n: chain(n["a"], ("+", n["b"])),
    ),
    Template(
        "l1_compare",
        1,
        "This week {name} ran {a} {dist} and {name2} ran {b} {dist}. How many more {dist} did {name} run than {name2}?",
        _draw_minus,
        lambda n: chain(n["a"], ("-", n["b"])),
    ),
    # level 2: two additions/subtractions
    Template(
        "l2_store",
        2,
        "A {shop} had {a} {item}. It sold {b} of them in the morning and received {c} more "
        "in the afternoon. How many {item} does the {shop} have now?",
        _draw_store,
        lambda n: chain(n["a"], ("-", n["b"]), ("+", n["c"])),
    ),
    Template(
        "l2_wallet",
        2,
        "{name} had {a} dollars, spent {b} dollars on a {gift} and then {c} dollars on lunch. How many dollars does {name} have left?",
        _draw_wallet,
        lambda n: chain(n["a"], ("-", n["b"]), ("-", n["c"])),
    ),
    Template(
        "l2_collect",
        2,
        "{name} has {a} {thing}, {name2} has {b} {thing} and {name3} has {c} {thing}. How many {thing} do they have altogether?",
        lambda r: {"a": _int(r, 2, 99), "b": _int(r, 2, 99), "c": _int(r, 2, 99)},
        lambda n: chain(n["a"], ("+", n["b"]), ("+", n["c"])),
    ),
    Template(
        "l2_weather",
        2,
        "At noon the temperature in {city} was {a} degrees. By evening it had dropped {b} "
        "degrees, and overnight it rose {c} degrees. What is the temperature now, in degrees?",
        lambda r: {"a": _int(r, 2, 30), "b": _int(r, 2, 40), "c": _int(r, 2, 20)},
        lambda n: chain(n["a"], ("-", n["b"]), ("+", n["c"])),
    ),
    # level 3: multiplication or exact division, then addition/subtraction
    Template(
        "l3_boxes",
        3,
        "{name} buys {a} {pack} of {thing} with {b} {thing} in each. Then {name} gives away "
        "{c} {thing}. How many {thing} does {name} have left?",
        _draw_boxes,
        lambda n: chain(n["a"], ("*", n["b"]), ("-", n["c"])),
    ),
    Template(
        "l3_share",
        3,
        "{name} shares {total} {thing} equally among {b} friends. Each friend then finds {c} "
        "more {thing}. How many {thing} does each friend have now?",
        _draw_share,
        lambda n: chain(n["total"], ("/", n["b"]), ("+", n["c"])),
    ),
    Template(
        "l3_change",
        3,
        "{name} buys {b} {item} at {a} dollars each and pays with a {paid}-dollar bill. How much change, in dollars, does {name} get?",
        _draw_change,
        _solve_change,
    ),
    Template(
        "l3_reading",
        3,
        "{name} reads {a} pages a day for {b} days and then {c} more pages on the weekend. How many pages does {name} read in total?",
        lambda r: {"a": _int(r, 2, 30), "b": _int(r, 2, 9), "c": _int(r, 2, 50)},
        lambda n: chain(n["a"], ("*", n["b"]), ("+", n["c"])),
    ),
    # level 4: fraction answers
    Template(
        "l4_uneven",
        4,
        "{b} friends share {a} {food} equally. How many {food} does each friend get?",
        _draw_uneven,
        lambda n: chain(n["a"], ("/", n["b"])),
    ),
    Template(
        "l4_drinks",
        4,
        "{name} drinks {f1} of a liter of {drink} in the morning and {f2} of a liter in the "
        "afternoon. How many liters of {drink} does {name} drink in total?",
        lambda r: {"f1": _frac(r), "f2": _frac(r)},
        lambda n: chain(n["f1"], ("+", n["f2"])),
    ),
    Template(
        "l4_cut",
        4,
        "{name} has a piece of {material} {f1} meters long and cuts off {f2} of a meter. How many meters of {material} are left?",
        _draw_cut,
        lambda n: chain(n["f1"], ("-", n["f2"])),
    ),
    Template(
        "l4_recipe",
        4,
        "A recipe needs {f} cups of {ingredient} per batch. {name} makes {k} batches. How many cups of {ingredient} does {name} need?",
        lambda r: {"f": _frac(r), "k": _int(r, 2, 12)},
        lambda n: chain(n["f"], ("*", n["k"])),
    ),
    Template(
        "l4_leftover",
        4,
        "{name} bakes {a} {food}, eats {b} of them and shares the rest equally among {c} friends. How many {food} does each friend get?",
        _draw_leftover,
        lambda n: chain(n["a"], ("-", n["b"]), ("/", n["c"])),
    ),
    Template(
        "l4_average",
        4,
        "{name} cycles {a} {dist} on Monday, {b} on Tuesday and {c} on Wednesday. On average, how many {dist} does {name} cycle per day?",
        _draw_average,
        lambda n: chain(n["a"], ("+", n["b"]), ("+", n["c"]), ("/", 3)),
    ),
)


def _small(template: Template) -> Template:
    """Level 0: a level-1 template's wording with numbers from 2 to 20 (``l1_gift`` -> ``l0_gift``)."""
    draw = _draw_small_minus if template.draw is _draw_minus else (lambda r: _pair(r, 2, 20))
    return replace(template, tid="l0" + template.tid[2:], level=0, draw=draw)


TEMPLATES += tuple(_small(t) for t in TEMPLATES if t.level == 1)  # opt-in: not in the default LEVELS
