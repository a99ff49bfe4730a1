"""Config fields that carry their own check: ``lr: float = ranged(3e-4, LR)``,
``order: str = choice("random", ORDERS)``.

A field made with :func:`ranged` (a number's range), :func:`choice` (its allowed values) or
:func:`spelled` (a string's allowed spellings, e.g. ``cuda:N``) holds its
rule in the dataclass field's metadata, so every config dataclass — the shipped algorithms', a plugin
algorithm's, the engine's — is checked the same way, by :func:`check_ranges`, with no table that must
know each field's name. The config layer (``marft_agents/training/config.py``) calls it on every key of
a run; a dataclass can also call it from its own ``__post_init__`` (``Ranged``) so that
``MyConfig(lr=5.0)`` fails where it is written. A subclass that redefines a field without a rule of
its own (``clip_eps: float = 0.3``) keeps its base's (:func:`rule_of`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

from marft_agents.settings.text import shown

POSITIVE, NON_NEGATIVE, AT_LEAST_ONE, UNIT = "> 0", ">= 0", ">= 1", "in [0, 1]"
MIN_TEMPERATURE = 1e-3
"""Below it sampling is greedy in all but name, and the log-probs' gradients (which scale with 1/T)
blow up; a ``temperature`` of 1e-300 made ``logits / T`` infinite ("probability tensor contains
inf/nan"). Greedy decoding (T = 0) is the evaluation's, not a training temperature."""
MAX_LR = 1.0
"""An Adam step moves each weight by about ``lr``: at 1 or more a step is as large as the weights
themselves (LoRA's usual rates are 1e-5 to 1e-3; ``marft.lr=1e308`` ended in inf/nan)."""
MAX_EVAL_EPISODES = 10_000
"""The synthetic held-out split draws 10,000 distinct problems in about 5 s here and slows sharply
past it (50,000 took 106 s); MATH's test split has 5,000 problems.
``eval_episodes=10**9`` hung in that draw."""
MAX_SEED = 2**32 - 1
"""Seeds are unsigned 32-bit integers: every generator here (Python, NumPy, torch, vLLM) takes them."""
MAX_DRAWS = 100
"""Dynamic sampling's collections per update (``signal.max_draws``): each plays a whole update's
episodes again, so 100 draws make one update cost a hundred updates' generation. A task that needs
more to find informative groups is too hard or too easy for the model: a curriculum or an easier
split serves it better. ``max_draws=10**9`` on uninformative groups made an update that never ended."""
DRAWS = f"an integer in [1, {MAX_DRAWS}]"
TEMPERATURE, LR = f">= {MIN_TEMPERATURE:g}", f"in (0, {MAX_LR:g})"
EVAL_TEMPERATURE = f"0 (greedy) or >= {MIN_TEMPERATURE:g}"
TOP_P = "in (0, 1]"
EVAL_EPISODES, SEED = f"in [1, {MAX_EVAL_EPISODES}]", f"an integer in [0, {MAX_SEED}]"
WHY_LR = "an Adam step moves each weight by about lr; LoRA's usual rates are 1e-5 to 1e-3"

HOLDS = {
    POSITIVE: lambda v: v > 0,
    NON_NEGATIVE: lambda v: v >= 0,
    AT_LEAST_ONE: lambda v: v >= 1,
    UNIT: lambda v: 0 <= v <= 1,
    TEMPERATURE: lambda v: v >= MIN_TEMPERATURE,
    EVAL_TEMPERATURE: lambda v: v == 0 or v >= MIN_TEMPERATURE,
    TOP_P: lambda v: 0 < v <= 1,
    LR: lambda v: 0 < v < MAX_LR,
    EVAL_EPISODES: lambda v: 1 <= v <= MAX_EVAL_EPISODES,
    SEED: lambda v: isinstance(v, int) and 0 <= v <= MAX_SEED,
    DRAWS: lambda v: isinstance(v, int) and 1 <= v <= MAX_DRAWS,
}
"""Each rule's test, on a number that is not a bool."""

_RANGE, _CHOICES, _SPELLING, _WHY = "marft.range", "marft.choices", "marft.spelling", "marft.why"


@dataclasses.dataclass(frozen=True)
class Spelling:
    """A string field's allowed spellings: a regular expression the whole value must match, and how an error names
    them."""

    pattern: re.Pattern
    text: str


Rule = str | tuple[Any, ...] | Spelling | None
"""A field's check: a range (a key of :data:`HOLDS`), its allowed values (a tuple), its spellings, or None (none)."""


def ranged(default: Any, rule: str, why: str | None = None) -> Any:
    """A dataclass field whose number must satisfy ``rule`` (a key of :data:`HOLDS`); ``why`` joins the error.

    ``None`` is always allowed (a field whose default is None means "off").
    """
    if rule not in HOLDS:
        raise ValueError(f"unknown range rule {rule!r}: use one of {list(HOLDS)}")
    return dataclasses.field(default=default, metadata={_RANGE: rule, _WHY: why})


def choice(default: Any, options: Sequence[Any], why: str | None = None) -> Any:
    """A dataclass field whose value must be one of ``options`` (``None`` allowed, as for :func:`ranged`); ``why`` joins
    the error."""
    options = tuple(options)
    if not options or (default is not None and default not in options):
        raise ValueError(f"choice default {default!r} must be one of the options {list(options)}")
    return dataclasses.field(default=default, metadata={_CHOICES: options, _WHY: why})


def spelled(default: str, pattern: re.Pattern, text: str, why: str | None = None) -> Any:
    """A dataclass field whose string must match ``pattern`` whole (``text`` names the spellings in the error)."""
    rule = Spelling(pattern, text)
    if not rule.pattern.fullmatch(default):
        raise ValueError(f"spelled default {default!r} must be {text}")
    return dataclasses.field(default=default, metadata={_SPELLING: rule, _WHY: why})


def rule_of(cls: type, name: str) -> tuple[Rule, str | None]:
    """The ``(rule, why)`` of field ``name`` of dataclass ``cls``; ``(None, None)`` for a field without one.

    A field redefined in a subclass without a rule (``clip_eps: float = 0.3``) keeps the nearest base's:
    the classes of ``cls.__mro__`` are asked in turn, and the first whose own field declares one wins.
    """
    for klass in cls.__mro__:
        f = vars(klass).get("__dataclass_fields__", {}).get(name)
        if f is None:
            continue
        if _CHOICES in f.metadata:
            return f.metadata[_CHOICES], f.metadata.get(_WHY)
        if _SPELLING in f.metadata:
            return f.metadata[_SPELLING], f.metadata.get(_WHY)
        if _RANGE in f.metadata:
            return f.metadata[_RANGE], f.metadata.get(_WHY)
    return None, None


def check_value(key: str, value: Any, rule: Rule, why: str | None = None) -> None:
    """Raise ValueError (one line naming ``key``) unless ``value`` is None or satisfies ``rule``.

    A tuple ``rule`` holds the allowed values (:func:`choice`), a :class:`Spelling` the allowed strings
    (:func:`spelled`); otherwise ``value`` must be a bool or a finite number, within the range ``rule``
    if one is given.
    """
    because = f" ({why})" if why else ""
    if isinstance(rule, tuple):
        if value is not None and (isinstance(value, bool) or value not in rule):
            raise ValueError(f"{key} must be one of {list(rule)}{because}, got {shown(value)}")
        return
    if isinstance(rule, Spelling):
        if value is not None and not (isinstance(value, str) and rule.pattern.fullmatch(value)):
            raise ValueError(f"{key} must be {rule.text}{because}, got {shown(value)}")
        return
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{key} must be a finite number, got {value}")
    if rule is None:
        return
    if not isinstance(value, (int, float)):  # set from None, a value skipped the type check
        raise ValueError(f"{key} must be a number, got {shown(value)}")
    if not HOLDS[rule](value):
        raise ValueError(f"{key} must be {rule}{because}, got {shown(value)}")


def check_stop(key: str, value: Any) -> None:
    """Raise ValueError (one line naming ``key``) unless ``value`` is None or a list of non-empty strings (stop
    strings: an empty one is found everywhere)."""
    if value is None:
        return
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) and s for s in value):
        raise ValueError(f'{key} must be a list of non-empty strings (e.g. {key}=["\\n\\n"]), got {shown(value)}')


def check_ranges(obj: Any, prefix: str = "") -> None:
    """Check every field of dataclass ``obj`` (nested dataclasses too, keys ``prefix`` + dotted names)."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check_ranges(value, f"{prefix}{f.name}.")
        else:
            check_value(f"{prefix}{f.name}", value, *rule_of(type(obj), f.name))


class Ranged:
    """Mixin for a config dataclass: its :func:`ranged` and :func:`choice` fields are checked when it is constructed."""

    def __post_init__(self):
        check_ranges(self, f"{type(self).__name__}.")
