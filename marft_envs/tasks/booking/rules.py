"""The booking policy: which booking a request calls for, as the agents are told and as the gold computes it.

A request names attendees, a day, a length, a landmark with a distance limit and a budget. Many
bookings could satisfy it, but the final database is compared with one gold database, so the policy
picks exactly one (the agents read :data:`RULES` in their instructions; :func:`choose_booking`
implements it on the data the calendar and location tools return):

1. the earliest start on the half hour, within 08:00-18:00, when every attendee is free for the whole
   meeting and at least one venue qualifies (open throughout, not booked then, big enough, within the
   distance limit, total price within the budget);
2. among the venues that qualify at that time: the cheapest, then the nearest, then the lowest id.

No such time and venue: the request is infeasible; book nothing and say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from marft_envs.tasks.booking.world import GRID, WORK_END, WORK_START, minutes, overlaps

RULES = (
    "Booking rules: book the earliest start on the half hour (08:00-18:00) when every attendee is free for "
    "the whole meeting and at least one venue qualifies: open for the whole meeting, not booked then, big "
    "enough, within the distance limit from the landmark, and total price (price_per_hour x hours) within "
    "the budget. At that time take the cheapest qualifying venue, then the nearest, then the lowest id. "
    "If nothing qualifies, book nothing and respond with a message that contains the word INFEASIBLE. "
    "Otherwise respond with the venue name, the day, the start time (HH:MM) and the total price ($N). "
    "If the request leaves something out or a name fits several people, ask the user first."
)


@dataclass(frozen=True)
class VenueInfo:
    """What the booking rule needs to know about a venue on the requested day (times in minutes)."""

    id: int
    name: str
    capacity: int
    opens: int
    closes: int
    price_per_hour: int
    distance_km: float
    booked: tuple[tuple[int, int], ...]

    @classmethod
    def from_result(cls, venue: Mapping[str, Any]) -> VenueInfo:
        """From one entry of a ``search_venues`` result (a search with a ``day``)."""
        return cls(
            id=venue["id"],
            name=venue["name"],
            capacity=venue["capacity"],
            opens=minutes(venue["opens"]),
            closes=minutes(venue["closes"]),
            price_per_hour=venue["price_per_hour"],
            distance_km=venue["distance_km"],
            booked=tuple((minutes(s), minutes(e)) for s, e in venue.get("booked", [])),
        )


@dataclass(frozen=True)
class Choice:
    """The booking a request calls for."""

    venue_id: int
    venue: str
    start: int
    end: int
    total_price: int


def qualifies(venue: VenueInfo, start: int, end: int, *, budget: int, max_km: float, n_attendees: int) -> bool:
    """Whether ``venue`` may be booked for ``[start, end)`` under the request's limits."""
    return (
        venue.capacity >= n_attendees
        and venue.distance_km <= max_km
        and venue.price_per_hour * (end - start) // 60 <= budget
        and venue.opens <= start
        and end <= venue.closes
        and not any(overlaps(start, end, s, e) for s, e in venue.booked)
    )


def choose_booking(
    free: Sequence[tuple[int, int]], venues: Sequence[VenueInfo], *, duration: int, budget: int, max_km: float, n_attendees: int
) -> Choice | None:
    """The booking the rules pick, from the attendees' common free windows and the day's venues; None if infeasible."""
    for start in range(WORK_START, WORK_END - duration + 1, GRID):
        end = start + duration
        if not any(s <= start and end <= e for s, e in free):
            continue
        fitting = [v for v in venues if qualifies(v, start, end, budget=budget, max_km=max_km, n_attendees=n_attendees)]
        if fitting:
            best = min(fitting, key=lambda v: (v.price_per_hour, v.distance_km, v.id))
            return Choice(best.id, best.name, start, end, best.price_per_hour * duration // 60)
    return None
