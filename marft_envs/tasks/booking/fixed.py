"""``marft/BookingFixed-v0``: calendar and location agents feed the booking agent, every round.

Agents: ``calendar_0``, ``location_0``, ``booking_0``. The graph is the same every round:
``calendar_0 -> booking_0`` and ``location_0 -> booking_0``. The calendar and location agents act
first and independently (one layer); the booking agent then sees their results of this round, and
the whole board of earlier rounds, before it books, asks the user or responds.

Everything else — the world, the tools, the scripted user, the reward — is the booking base's
(:mod:`marft_envs.tasks.booking.base`). Options: ``max_rounds``, ``credit``, ``kinds``, ``world``,
``storage``, ``profile``.

Version history: the family's, in :mod:`marft_envs.tasks.booking`.
"""

from __future__ import annotations

from typing import Any

from marft_envs.graph import DependencyGraph
from marft_envs.tasks.booking.base import BookingTask
from marft_envs.tasks.booking.tools import WORKERS


class BookingFixed(BookingTask):
    """Calendar and location agents act first; the booking agent sees both."""

    metadata = {"name": "marft/BookingFixed-v0", "is_parallelizable": False, "render_modes": ["human", "ansi"]}

    def __init__(self, **kwargs: Any):
        super().__init__(list(WORKERS), **kwargs)
        self._graph_all = DependencyGraph.from_parents(WORKERS, {"booking_0": ["calendar_0", "location_0"]})

    def team_graph(self) -> DependencyGraph:
        return self._graph_all
