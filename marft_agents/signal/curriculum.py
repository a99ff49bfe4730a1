"""Difficulty that follows the model: draw each group's level by the team's running success on it.

An env that declares difficulty levels (``FlexEnv.difficulties()``; MATH: its synthetic levels, or
the ``level`` column of a MATH file) plays a level on request (``reset(options={"difficulty": d})``).
With ``signal.curriculum`` the trainer keeps, per level, the outcomes of the last ``window`` training
episodes at that level (solved: the env's ``solved``, or a positive return where it reports none),
and draws every group's level with weights:

- 1 for a level not tried yet, or whose running success lies strictly inside ``(low, high)`` — the
  levels the team sometimes solves, where a group's rewards can differ;
- ``floor`` for a level at or below ``low`` (too hard) or at or above ``high`` (too easy), so it is
  still tried now and then and comes back once the model has moved.

The weights are normalised to probabilities; every episode of a group plays the same level (and, from
its shared seed, the same problem). The sampler's state is saved in checkpoints, and its draws come
from a generator seeded by (run seed, update), so a resumed run draws the same levels.

Levels are checked before a run writes anything (:func:`check_levels`): hashable, distinct and finite,
and plain ``int``, ``float`` or ``str`` -- or a NumPy scalar or an ``Enum`` member, which the env is
given as they are while checkpoints and metrics hold their plain form (:func:`level_key`): a checkpoint
is read with ``torch.load(weights_only=True)``, which refuses any other type.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable, Sequence

import numpy as np

from marft_agents.rollout.episode import Episode

PLAIN_LEVEL_TYPES = (int, float, str, bool)
"""Types a level's plain form (:func:`level_key`) may have: what ``torch.load(weights_only=True)`` reads."""


def level_key(level: Hashable) -> Hashable:
    """A level as plain data for checkpoints and metric names: NumPy scalars as their Python value, Enum members as
    ``Class.NAME``."""
    if isinstance(level, enum.Enum):
        return f"{type(level).__name__}.{level.name}"
    if isinstance(level, np.generic):
        return level.item()
    return level


def check_levels(levels: Sequence, source: str) -> tuple:
    """``levels`` as a tuple when a curriculum can use them, else ValueError (one line naming ``source`` and the level).

    Each level must be hashable, have a plain form (:func:`level_key`: int, float or str), be finite,
    and differ from every other level (as itself and in its plain form).
    """
    seen: dict[Hashable, Hashable] = {}
    for level in levels:
        shown = f"{str(level)[:40]!r} ({type(level).__name__})"
        try:
            hash(level)
        except Exception:
            raise ValueError(
                f"{source} gave the level {shown}, which is not hashable: give plain int, float or str levels"
            ) from None
        key = level_key(level)
        if type(key) not in PLAIN_LEVEL_TYPES:
            raise ValueError(
                f"{source} gave the level {shown}: levels must be plain int, float or str (or NumPy scalars, Enum "
                "members)"
            )
        if isinstance(key, float) and not math.isfinite(key):
            raise ValueError(f"{source} gave the level {shown}, which is not finite: give finite or non-float levels")
        if key in seen or any(level == other for other in seen.values()):
            raise ValueError(f"{source} gave the level {shown} twice: give each level once")
        seen[key] = level
    return tuple(levels)


def running_success(outcomes: Sequence[bool]) -> float | None:
    """The share of ``outcomes`` that succeeded; None when there are none (the level was never tried)."""
    return sum(outcomes) / len(outcomes) if outcomes else None


def level_weights(
    rates: dict[Hashable, float | None], *, low: float, high: float, floor: float
) -> dict[Hashable, float]:
    """Draw probabilities of the levels from their running success rates (see the module docstring)."""
    raw = {level: 1.0 if rate is None or low < rate < high else floor for level, rate in rates.items()}
    total = sum(raw.values())
    if total == 0:  # floor 0 and every level out of the band: fall back to uniform rather than divide by 0
        return {level: 1 / len(raw) for level in raw}
    return {level: w / total for level, w in raw.items()}


def succeeded(episode: Episode) -> bool:
    """Whether an episode counts as solved: the env's ``solved``, or a positive return where it reports none."""
    if episode.solved is not None:
        return episode.solved
    return episode.team_return > 0


class DifficultySampler:
    """Per-level running success over a window, and the levels each group of an update plays."""

    def __init__(self, levels: Sequence[Hashable], *, window: int, low: float, high: float, floor: float):
        if not levels:
            raise ValueError("the curriculum needs at least one difficulty level")
        self.levels = list(levels)
        self.window, self.low, self.high, self.floor = window, low, high, floor
        self.outcomes: dict[Hashable, list[bool]] = {level: [] for level in self.levels}
        """The last ``window`` outcomes (True: solved) of each level, oldest first."""
        self.level_of: dict[int, Hashable] = {}
        """The level each pending episode index was asked to play (forgotten once its outcome is recorded)."""

    def probabilities(self) -> dict[Hashable, float]:
        """The current draw probability of every level."""
        rates = {level: running_success(self.outcomes[level]) for level in self.levels}
        return level_weights(rates, low=self.low, high=self.high, floor=self.floor)

    def assign(self, indices: Sequence[int], group_size: int, rng: np.random.Generator) -> dict[int, Hashable]:
        """Draw one level per group of ``indices`` (``index // group_size``), remember and return them per index."""
        probs = self.probabilities()
        groups = list(dict.fromkeys(i // max(group_size, 1) for i in indices))
        drawn = rng.choice(len(self.levels), size=len(groups), p=[probs[level] for level in self.levels])
        by_group = {g: self.levels[int(k)] for g, k in zip(groups, drawn)}
        out = {i: by_group[i // max(group_size, 1)] for i in indices}
        self.level_of.update(out)
        return out

    def record(self, episodes: Sequence[Episode]) -> None:
        """Add the outcomes of finished episodes to their levels' windows."""
        for e in episodes:
            level = self.level_of.pop(e.index, None)
            if level is None:
                continue
            window = self.outcomes[level]
            window.append(succeeded(e))
            del window[: -self.window]

    def metrics(self) -> dict[str, float]:
        """``signal/level_<d>/success`` (running success; only for tried levels) and ``/p`` (draw probability)."""
        out = {}
        for level, p in self.probabilities().items():
            rate = running_success(self.outcomes[level])
            if rate is not None:
                out[f"signal/level_{level_key(level)}/success"] = rate
            out[f"signal/level_{level_key(level)}/p"] = p
        return out

    def state_dict(self) -> dict:
        """The windows, for checkpoints (levels in their plain form, :func:`level_key`)."""
        return {
            "levels": [level_key(level) for level in self.levels],
            "outcomes": [list(self.outcomes[level]) for level in self.levels],
        }

    def load_state_dict(self, state: dict) -> None:
        ours = [level_key(level) for level in self.levels]
        if list(state["levels"]) != ours:
            raise ValueError(f"the checkpoint's curriculum levels {state['levels']} are not the env's {ours}")
        self.outcomes = {level: list(o) for level, o in zip(self.levels, state["outcomes"])}
        self.level_of = {}


def sampler_rng(seed: int, update: int, draw: int) -> np.random.Generator:
    """The generator that draws the levels of collection ``draw`` of ``update`` (independent of the trainer's)."""
    return np.random.default_rng([seed, update, draw, 0xC0FFEE])
