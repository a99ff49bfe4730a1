"""The ``signal.*`` section of a run's config: ways to get a learning signal when most rewards are 0.

Every option is off by default, so a run that does not ask for one trains exactly as before.
``docs/real-models.md`` ("When the reward is zero") says when to reach for which, in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from marft_agents.settings.fields import DRAWS, HOLDS, ranged
from marft_agents.settings.text import shown


@dataclass
class SignalConfig:
    """Dynamic sampling and a difficulty curriculum (``signal.*`` keys; docs/real-models.md, "When the reward is zero")."""

    dynamic_sampling: bool = False
    """Drop groups whose rewards are all equal and play fresh problems until the batch holds episodes_per_update / group_size informative groups (DAPO; needs a group-relative algo such as grpo)."""
    max_draws: int = ranged(4, DRAWS)
    """Dynamic sampling: at most this many collections per update (1-100), the first included; then the batch is filled up with uninformative groups."""
    curriculum: bool = False
    """Draw each group's difficulty level by the team's running success on it (the env must declare difficulties(), e.g. MATH's synthetic levels)."""
    curriculum_window: int = 64
    """Curriculum: a level's running success is the share solved among its last this-many training episodes."""
    curriculum_low: float = 0.0
    """Curriculum: a level whose running success is <= this counts as too hard."""
    curriculum_high: float = 1.0
    """Curriculum: a level whose running success is >= this counts as too easy."""
    curriculum_floor: float = 0.1
    """Curriculum: the draw weight of a too-hard or too-easy level, against 1 for a level inside the band or not yet tried (0: never again)."""

    @property
    def enabled(self) -> bool:
        """Whether any option changes how the batch is collected."""
        return self.dynamic_sampling or self.curriculum


def check(settings: SignalConfig) -> None:
    """Refuse values no run can use, in one line naming the key."""
    if isinstance(settings.max_draws, bool) or not HOLDS[DRAWS](
        settings.max_draws
    ):  # also where the config layer did not check
        raise ValueError(f"signal.max_draws must be {DRAWS}, got {shown(settings.max_draws)}")
    value = settings.curriculum_window
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"signal.curriculum_window must be an integer >= 1, got {value!r}")
    for key in ("curriculum_low", "curriculum_high", "curriculum_floor"):
        value = getattr(settings, key)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not 0 <= value <= 1
        ):
            raise ValueError(f"signal.{key} must be in [0, 1], got {value!r}")
    if settings.curriculum_low >= settings.curriculum_high:
        raise ValueError(
            f"signal.curriculum_low={settings.curriculum_low} must be below "
            f"signal.curriculum_high={settings.curriculum_high}: no level could be inside the band"
        )
