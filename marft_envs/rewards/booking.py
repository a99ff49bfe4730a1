"""The booking reward, in the style of τ²-bench: a product of pass/fail components, plus per-agent credit.

    team = db × outputs × assertions            (each component is 0 or 1)

- ``db``: the final database equals the gold replay's on the tables that matter — the canonical
  multiset of active bookings ``(venue, day, start, end, attendees)``; row order, booking ids and
  free-text notes do not count (no hashes of dumps: a diff says what differs).
- ``outputs``: the final message states every required output (venue, day, start time, total price;
  or that the request is infeasible). Matching is forgiving about form (``Tue``/``Tuesday``,
  ``9:30``/``09:30``, ``$180``/``180 dollars``) and strict about values.
- ``assertions``: the task's named checks on the final state hold (one new booking, on the requested
  day, for the requested people and length, within the distance limit and the budget, no other
  booking touched; for an infeasible task, nothing booked).

Per-agent credit, for credit assignment (``credit="per_agent"``), each in [0, 1]:

- ``calendar_0``: it asked ``free_slots`` for exactly the attendees, on the requested day, for at most
  the requested length — so every window it reported is really free for the people who matter;
- ``location_0``: it searched the requested day from the requested landmark and its result contains
  every venue within the distance limit that is big enough;
- ``booking_0``: the team reward (it makes the writes and the final message);
- ``coordinator_0``: the share of its plans that were valid and scheduled someone.

Every function here is pure: the env (:mod:`marft_envs.tasks.booking.base`) gathers the inputs
and composes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from marft_envs.rewards.booking_units import DAY_NAMES, WORK_END, WORK_START, distance_km

if TYPE_CHECKING:  # the booking family's records, for annotations only
    from marft_envs.tasks.booking.db import CanonicalBooking
    from marft_envs.tasks.booking.generator import Output, Task
    from marft_envs.tasks.booking.world import World

ToolResult = tuple[str, str, Mapping[str, Any]]
"""``(agent, tool, result)`` of one successful call."""

_INFEASIBLE = re.compile(r"\b(infeasible|not feasible|impossible|not possible|cannot|can't|can ?not|unable)\b", re.I)


@dataclass
class Grade:
    """A graded episode: the team reward, its components, the named assertions, and per-agent credit."""

    team: float
    components: dict[str, float]
    assertions: dict[str, bool]
    own: dict[str, float] = field(default_factory=dict)
    db_diff: dict[str, list] = field(default_factory=dict)


# -- db ----------------------------------------------------------------------------------------------


def db_diff(final: Sequence[CanonicalBooking], gold: Sequence[CanonicalBooking]) -> dict[str, list]:
    """What the final state has that the gold lacks (``extra``) and the reverse (``missing``), as multisets."""
    rest = list(gold)
    extra = []
    for row in final:
        if row in rest:
            rest.remove(row)
        else:
            extra.append(row)
    return {"extra": sorted(extra), "missing": sorted(rest)}


def db_match(final: Sequence[CanonicalBooking], gold: Sequence[CanonicalBooking]) -> float:
    """1.0 when the canonical states are equal as multisets, else 0.0."""
    return float(sorted(final) == sorted(gold))


# -- outputs -----------------------------------------------------------------------------------------


def stated(message: str, output: Output) -> bool:
    """Whether ``message`` states ``output``."""
    if output.kind == "venue":
        return " ".join(output.value.split()).casefold() in " ".join(message.split()).casefold()
    if output.kind == "day":
        return bool(re.search(rf"\b({output.value}|{DAY_NAMES[output.value]})\b", message, re.I))
    if output.kind == "time":
        h, m = output.value.split(":")
        return bool(re.search(rf"(?<![\d:]){'0?' if h[0] == '0' else ''}{int(h)}[:.]{m}(?!\d)", message))
    if output.kind == "price":
        v = re.escape(output.value)
        return bool(re.search(rf"\$\s?{v}(\.00?)?(?![\d,])|(?<![\d.]){v}(\.00?)?\s*(dollars|usd)\b", message, re.I))
    if output.kind == "infeasible":
        return bool(_INFEASIBLE.search(message))
    raise ValueError(f"unknown output kind {output.kind!r}")


def outputs_stated(message: str | None, outputs: Sequence[Output]) -> float:
    """1.0 when there is a final message and it states every required output."""
    return float(message is not None and all(stated(message, o) for o in outputs))


# -- assertions --------------------------------------------------------------------------------------


def check_assertions(
    task: Task, world: World, before: Mapping[int, CanonicalBooking], after: Mapping[int, CanonicalBooking]
) -> dict[str, bool]:
    """The task's named checks on the final state (``before``/``after``: active bookings by id)."""
    new = [row for bid, row in after.items() if bid not in before]
    kept = all(bid in after for bid in before if bid != task.cancel_id)
    if not task.feasible:
        return {"booked_nothing": not new, "kept_other_bookings": kept}
    checks = {"one_new_booking": len(new) == 1, "kept_other_bookings": kept}
    if task.cancel_id is not None:
        checks["cancelled_old_booking"] = task.cancel_id not in after
    venue_id, day, start, end, people = new[0] if len(new) == 1 else (None, None, 0, 0, ())
    ids = {p.id for p in world.people if p.name in task.attendees}
    venue = world.venue(venue_id) if venue_id is not None else None
    checks.update(
        {
            "requested_day": day == task.day,
            "requested_length": end - start == task.duration,
            "requested_attendees": set(people) == ids,
            "working_hours": WORK_START <= start and end <= WORK_END,
            "within_distance": venue is not None and distance_km(venue, world.landmark(task.near)) <= task.max_km,
            "within_budget": venue is not None and venue.price(end - start) <= task.budget,
        }
    )
    return checks


# -- per-agent credit --------------------------------------------------------------------------------


def calendar_credit(task: Task, results: Sequence[ToolResult]) -> float:
    """1.0 if ``calendar_0`` asked for exactly the attendees' free time on the day, for at most the length."""
    return float(
        any(
            agent == "calendar_0"
            and tool == "free_slots"
            and set(r["people"]) == set(task.attendees)
            and r["day"] == task.day
            and r["duration_minutes"] <= task.duration
            for agent, tool, r in results
        )
    )


def location_credit(task: Task, results: Sequence[ToolResult]) -> float:
    """1.0 if ``location_0`` searched the day from the landmark and found every candidate venue."""
    return float(
        any(
            agent == "location_0"
            and tool == "search_venues"
            and r.get("day") == task.day
            and r["near"] == task.near
            and set(task.candidate_venues) <= {v["id"] for v in r["venues"]}
            for agent, tool, r in results
        )
    )


def coordinator_credit(plans: Sequence[bool]) -> float:
    """The share of the coordinator's plans that were valid and scheduled someone (0 with no plans)."""
    return sum(plans) / len(plans) if plans else 0.0


# -- composition -------------------------------------------------------------------------------------


def grade(
    task: Task,
    world: World,
    *,
    before: Mapping[int, CanonicalBooking],
    after: Mapping[int, CanonicalBooking],
    gold: Sequence[CanonicalBooking],
    message: str | None,
    results: Sequence[ToolResult],
    plans: Sequence[bool] = (),
    agents: Sequence[str] = ("calendar_0", "location_0", "booking_0"),
) -> Grade:
    """Grade a finished episode: the team reward, its components and every agent's own credit."""
    final = sorted(after.values())
    checks = check_assertions(task, world, before, after)
    components = {
        "db": db_match(final, gold),
        "outputs": outputs_stated(message, task.required_outputs),
        "assertions": float(all(checks.values())),
    }
    team = components["db"] * components["outputs"] * components["assertions"]
    own = {
        "calendar_0": calendar_credit(task, results),
        "location_0": location_credit(task, results),
        "booking_0": team,
        "coordinator_0": coordinator_credit(plans),
    }
    return Grade(team=team, components=components, assertions=checks, own={a: own[a] for a in agents}, db_diff=db_diff(final, gold))
