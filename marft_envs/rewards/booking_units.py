"""The booking domain's measures: the days of the week, the working hours, the distance between two places.

The grader (:mod:`marft_envs.rewards.booking`) checks a booking against them and the booking world
(:mod:`marft_envs.tasks.booking.world`) is drawn on them, so they live here, below both: no reward
module imports the tasks that use it.
"""

from __future__ import annotations

import math
from typing import Protocol

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri")
"""The workdays of next week, the only days a task asks for."""
DAY_NAMES = {"Mon": "Monday", "Tue": "Tuesday", "Wed": "Wednesday", "Thu": "Thursday", "Fri": "Friday"}
"""Each day's full name: a final message may state either form."""
WORK_START, WORK_END = 8 * 60, 18 * 60
"""Working hours: calendars are only searched, and meetings only placed, between 08:00 and 18:00."""


def distance(ax: float, ay: float, bx: float, by: float) -> float:
    """Straight-line distance in km, rounded to 10 m: every tool, task and check uses this same value."""
    return round(math.hypot(ax - bx, ay - by), 2)


class Place(Protocol):
    """Anything with a position in km: a venue, a landmark."""

    x: float
    y: float


def distance_km(venue: Place, landmark: Place) -> float:
    """How far ``venue`` is from ``landmark`` (see :func:`distance`)."""
    return distance(venue.x, venue.y, landmark.x, landmark.y)
