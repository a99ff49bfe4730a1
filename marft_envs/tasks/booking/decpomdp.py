"""``marft/BookingDecPOMDP-v0``: the booking team with no same-round dependencies (a Dec-POMDP).

Agents: ``calendar_0``, ``location_0``, ``booking_0``, all acting at once every round on their own
observations: the request and the team board of earlier rounds. Nobody sees a teammate's result
until the next round, so the team needs more rounds than with a graph (find, then book, then
respond). The graph is always empty, so this env also has a PettingZoo Parallel view, and the AEC
and Parallel views agree on whole episodes.

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


class BookingDecPOMDP(BookingTask):
    """Calendar, location and booking agents act at once; results reach teammates next round."""

    metadata = {"name": "marft/BookingDecPOMDP-v0", "is_parallelizable": True, "render_modes": ["human", "ansi"]}

    def __init__(self, **kwargs: Any):
        super().__init__(list(WORKERS), **kwargs)
        self._graph_all = DependencyGraph.empty(WORKERS)

    def team_graph(self) -> DependencyGraph:
        return self._graph_all
