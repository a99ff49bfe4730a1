"""``marft/Booking-v0``: a coordinator decides each round who acts and who depends on whom.

Agents: ``coordinator_0``, ``calendar_0``, ``location_0``, ``booking_0``. Every round the coordinator
acts first (every worker depends on it) and calls ``plan``::

    {"name": "plan", "arguments": {"act": ["calendar_0", "location_0", "booking_0"],
                                   "depends_on": {"booking_0": ["calendar_0", "location_0"]}}}

Its plan sets the rest of the round's dependency graph: ``booking_0`` then sees the calendar's and
the location agent's results of this round before it acts. Workers left out of ``act`` are not
scheduled: they are still asked for an action (every active agent acts every round) but it is
ignored, and their observation says so (``needs_action`` is False for them, so the rollout engine
sends ``""`` without generating). A plan that is not valid (an agent outside ``act`` in
``depends_on``, a cycle, not the plan tool) is an error: nobody is scheduled and the round is lost.
The coordinator's own credit is the share of its plans that were valid and scheduled someone.

Everything else — the world, the tools, the scripted user, the reward — is the booking base's
(:mod:`marft_envs.tasks.booking.base`). Options: ``max_rounds``, ``credit``, ``kinds``, ``world``,
``storage``, ``profile``.

Version history: the family's, in :mod:`marft_envs.tasks.booking`.
"""

from __future__ import annotations

from typing import Any

from marft_envs.graph import DependencyGraph, GraphError
from marft_envs.tasks.booking.actions import ActionError
from marft_envs.tasks.booking.base import BookingTask, Entry
from marft_envs.tasks.booking.tools import WORKERS

COORDINATOR = "coordinator_0"


class Booking(BookingTask):
    """A coordinator plans each round; its plan is the round's dependency graph over the workers."""

    metadata = {"name": "marft/Booking-v0", "is_parallelizable": False, "render_modes": ["human", "ansi"]}

    def __init__(self, **kwargs: Any):
        super().__init__([COORDINATOR, *WORKERS], **kwargs)

    def plan(self) -> dict[str, Any] | None:
        """This round's valid plan (``{"act": [...], "depends_on": {...}}``), or None before/without one."""
        entry = self.current.get(COORDINATOR)
        return entry.result if entry is not None and entry.call is not None and entry.call.name == "plan" else None

    def team_graph(self) -> DependencyGraph:
        # Until the coordinator acts every worker waits for it; then its plan adds the workers' edges.
        parents = {w: [COORDINATOR] for w in WORKERS}
        for worker, deps in (self.plan() or {}).get("depends_on", {}).items():
            parents[worker] += deps
        return DependencyGraph.from_parents(self.possible_agents, parents)

    def is_scheduled(self, agent: str) -> bool | None:
        if agent == COORDINATOR:
            return True
        if COORDINATOR not in self.current:
            return None
        plan = self.plan()
        return plan is not None and agent in plan["act"]

    def run_plan(self, arguments: dict[str, Any]) -> dict[str, Any]:
        act = arguments["act"]
        depends_on = arguments.get("depends_on", {})
        for worker, deps in depends_on.items():
            if worker not in act:
                raise ActionError(f"depends_on names {worker[:40]!r}, which is not in act {act}")
            outside = [d for d in deps if d not in act]
            if outside:
                raise ActionError(f"{worker} depends on {outside}, which are not in act {act}")
        try:
            DependencyGraph.from_parents(WORKERS, depends_on)
        except GraphError as err:
            raise ActionError(f"the plan is not a DAG: {err}") from None
        return {
            "act": [w for w in WORKERS if w in act],
            "depends_on": {w: [d for d in WORKERS if d in depends_on[w]] for w in WORKERS if depends_on.get(w)},
        }

    def _execute(self, agent: str, text: str) -> Entry:
        entry = super()._execute(agent, text)
        if agent == COORDINATOR:
            self.plans.append(entry.error is None and bool(entry.result and entry.result["act"]))
        return entry
