"""Seeded booking tasks, each with its gold action sequence and the outputs its final message must state.

A task is drawn from the episode's generator against the episode's database (it asks the same tools
the agents have, so the gold is computed from what the agents can see). Kinds:

- ``book``: a feasible request ("book a room for Ana and Bo for 90 minutes next Tuesday, within 2 km
  of the office, at most $200 in total");
- ``infeasible``: no time and venue satisfy it — the calendars never line up, or every venue that
  fits is too far or too expensive; the right outcome is to book nothing and say so;
- ``clarify``: feasible, but the request leaves out the length or names someone by a first name two
  people share; the team must ask the (scripted) user;
- ``reschedule``: cancel an existing meeting and book the same people on another day.

The gold action sequence is what a perfect team does, as ``(agent, tool, arguments)`` steps: the
queries whose results decide the booking, the writes, and the final message. Replaying its writes on
a fresh copy of the initial database gives the gold database the reward compares against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from marft_envs.tasks.booking import tools
from marft_envs.tasks.booking.db import BookingDB
from marft_envs.tasks.booking.rules import Choice, VenueInfo, choose_booking
from marft_envs.tasks.booking.world import DAY_NAMES, DAYS, DURATIONS, GRID, LANDMARKS, WORK_END, WORK_START, World, hhmm, minutes, pick

KINDS = ("book", "infeasible", "clarify", "reschedule")
DEFAULT_KIND_WEIGHTS = {"book": 0.35, "infeasible": 0.25, "clarify": 0.2, "reschedule": 0.2}
INFEASIBLE_REASONS = ("calendar", "budget", "distance")
MAX_DRAWS = 30
"""Draws per kind before falling back to a budget-infeasible task (which always exists)."""
DURATION_TEXT = {30: "30 minutes", 60: "an hour", 90: "90 minutes", 120: "two hours"}
DURATION_ADJECTIVE = {30: "30-minute", 60: "one-hour", 90: "90-minute", 120: "two-hour"}


@dataclass(frozen=True)
class GoldCall:
    """One step of the gold action sequence."""

    agent: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Clarification:
    """What a request leaves out, and what the user answers when asked about it."""

    topic: str
    """``"duration"`` (the length is missing) or ``"person"`` (a first name two people share)."""
    answer: str
    """The user's answer."""
    mention: str = ""
    """For ``"person"``: the ambiguous first name as the request writes it."""


@dataclass(frozen=True)
class Output:
    """A fact the final message must state: ``kind`` is venue, day, time, price or infeasible."""

    kind: str
    value: str


@dataclass(frozen=True)
class Task:
    """One booking request: what it asks for, its gold actions, and the outputs the final message must state."""

    kind: str
    request: str
    """The request as the agents read it."""
    attendees: tuple[str, ...]
    """Full names."""
    day: str
    duration: int
    near: str
    max_km: float
    budget: int
    choice: Choice | None
    """The booking the rules pick; None when the task is infeasible."""
    gold: tuple[GoldCall, ...]
    required_outputs: tuple[Output, ...]
    candidate_venues: tuple[int, ...]
    """Venues within the distance limit and big enough (what a good location search returns)."""
    clarification: Clarification | None = None
    cancel_id: int | None = None
    """The booking a reschedule cancels."""
    reason: str | None = None
    """Why an infeasible task is infeasible: calendar, budget or distance."""

    @property
    def feasible(self) -> bool:
        return self.choice is not None


def kind_weights(kinds: Mapping[str, float] | None) -> np.ndarray:
    """Probabilities over :data:`KINDS` from a ``{kind: weight}`` mapping (missing kinds get 0)."""
    weights = dict(DEFAULT_KIND_WEIGHTS if kinds is None else kinds)
    unknown = sorted(set(weights) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown task kinds {unknown}: use {list(KINDS)}")
    w = np.array([float(weights.get(k, 0.0)) for k in KINDS])
    if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
        raise ValueError(f"task kind weights must be non-negative with a positive sum, got {weights}")
    return w / w.sum()


def generate_task(world: World, db: BookingDB, rng: np.random.Generator, kinds: Mapping[str, float] | None = None) -> Task:
    """Draw a task from ``rng`` for the world in ``db`` (read only)."""
    kind = str(rng.choice(KINDS, p=kind_weights(kinds)))
    # An infeasible task's reason is drawn once, so that the rarer reasons are not crowded out by retries.
    draw = _DRAW[kind] if kind != "infeasible" else _reasoned(pick(rng, INFEASIBLE_REASONS))
    for _ in range(MAX_DRAWS):
        task = draw(world, db, rng)
        if task is not None:
            return task
    # Some worlds cannot host a kind (say, no calendars that never line up); a budget no venue meets always exists.
    task = _infeasible(world, db, rng, reason="budget", always=True)
    assert task is not None, "a budget under every venue's price is always infeasible"
    return task


# -- the kinds -------------------------------------------------------------------------------------


def _book(world, db, rng, *, clarify: str | None = None, reschedule: bool = False) -> Task | None:
    old = None
    if reschedule:
        if not world.bookings:
            return None
        old = pick(rng, world.bookings)
        people = [world.person(p) for p in old.attendees]
        day = pick(rng, [d for d in DAYS if d != old.day])
        duration = old.end - old.start
    else:
        people = _attendees(world, rng, include_twin=clarify == "person")
        day, duration = pick(rng, DAYS), pick(rng, DURATIONS)
    near = pick(rng, LANDMARKS)
    free, venues = _lookups(db, people, day, duration, near)
    options = _options(free, venues, duration, len(people))
    if not options:
        return None
    start, venue = options[int(rng.integers(len(options)))]
    max_km = math.ceil((venue.distance_km + float(rng.uniform(0, 1.5))) * 2) / 2
    budget = 10 * math.ceil(venue.price_per_hour * duration / 600) + 10 * int(rng.integers(0, 6))
    choice = choose_booking(free, venues, duration=duration, budget=budget, max_km=max_km, n_attendees=len(people))
    assert choice is not None, "the sampled option qualifies, so the rules must find a booking"
    kind = "reschedule" if reschedule else "clarify" if clarify else "book"
    return _task(world, rng, kind, people, day, duration, near, max_km, budget, choice, venues, clarify=clarify, old=old)


def _clarify(world, db, rng) -> Task | None:
    return _book(world, db, rng, clarify=pick(rng, ("duration", "person")))


def _reschedule(world, db, rng) -> Task | None:
    return _book(world, db, rng, reschedule=True)


def _reasoned(reason: str):
    return lambda world, db, rng: _infeasible(world, db, rng, reason)


def _infeasible(world, db, rng, reason: str, always: bool = False) -> Task | None:
    people = _attendees(world, rng, include_twin=False)
    day, duration, near = pick(rng, DAYS), pick(rng, DURATIONS), pick(rng, LANDMARKS)
    if reason == "calendar":  # try every day for these people: one where their calendars never line up
        for day in (DAYS[int(k)] for k in rng.permutation(len(DAYS))):
            if not tools.free_slots(db, {"people": [p.name for p in people], "day": day, "duration_minutes": duration})["free"]:
                break
    free, venues = _lookups(db, people, day, duration, near)
    options = _options(free, venues, duration, len(people))
    far = max(v.distance_km for v in venues)
    if reason == "calendar":
        if free:  # the calendars must never line up for this length
            return None
        max_km = math.ceil(far * 2) / 2
        budget = 10 * math.ceil(max(v.price_per_hour for v in venues) * duration / 600)
    elif reason == "distance":
        nearest = min((v.distance_km for _, v in options), default=None)
        if nearest is None or nearest < 1.0:
            return None
        max_km = math.floor((nearest - 0.01) * 2) / 2
        budget = 10 * math.ceil(max(v.price_per_hour for v in venues) * duration / 600)
    else:  # budget: the limit sits just under the cheapest venue that would otherwise do
        max_km = math.ceil(far * (1.0 if always else float(rng.uniform(0.5, 1.0))) * 2) / 2
        totals = [v.price_per_hour * duration // 60 for _, v in options if v.distance_km <= max_km]
        if always:  # the fallback: under every venue's price, whatever the calendars say
            totals += [v.price_per_hour * duration // 60 for v in venues]
        if not totals or min(totals) <= 10:
            return None
        budget = 10 * ((min(totals) - 1) // 10)
    if choose_booking(free, venues, duration=duration, budget=budget, max_km=max_km, n_attendees=len(people)):
        return None
    return _task(world, rng, "infeasible", people, day, duration, near, max_km, budget, None, venues, reason=reason)


_DRAW = {"book": _book, "clarify": _clarify, "reschedule": _reschedule}


# -- helpers ---------------------------------------------------------------------------------------


def _attendees(world: World, rng: np.random.Generator, *, include_twin: bool) -> list:
    firsts = [p.first for p in world.people]
    twins = [p for p in world.people if firsts.count(p.first) > 1]
    n = int(rng.integers(2, 4))
    if include_twin:
        twin = twins[int(rng.integers(len(twins)))]
        others = [p for p in world.people if p.first != twin.first]
        picked = [twin] + [others[int(i)] for i in rng.choice(len(others), size=n - 1, replace=False)]
    else:
        picked = [world.people[int(i)] for i in rng.choice(len(world.people), size=n, replace=False)]
    return sorted(picked, key=lambda p: p.id)


def _lookups(db: BookingDB, people, day: str, duration: int, near: str) -> tuple[list, list[VenueInfo]]:
    # The same tools the agents call: the gold is computed from what the team can find out.
    slots = tools.free_slots(db, {"people": [p.name for p in people], "day": day, "duration_minutes": duration})
    found = tools.search_venues(db, {"day": day, "near": near})
    free = [(minutes(s), minutes(e)) for s, e in slots["free"]]
    return free, [VenueInfo.from_result(v) for v in found["venues"]]


def _options(free, venues: list[VenueInfo], duration: int, n: int) -> list[tuple[int, VenueInfo]]:
    """Every (start, venue) that fits the calendars, the venue's hours, bookings and capacity (any price or distance)."""
    out = []
    for start in range(WORK_START, WORK_END - duration + 1, GRID):
        end = start + duration
        if any(s <= start and end <= e for s, e in free):
            out += [
                (start, v)
                for v in venues
                if v.capacity >= n and v.opens <= start and end <= v.closes and not any(s < end and start < e for s, e in v.booked)
            ]
    return out


def _mention(world: World, person, *, ambiguous_ok: bool) -> str:
    """How the request names someone: the first name when only they have it, else the full name."""
    shared = sum(p.first == person.first for p in world.people) > 1
    return person.first if (not shared or ambiguous_ok) else person.name


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _task(world, rng, kind, people, day, duration, near, max_km, budget, choice, venues, *, clarify=None, old=None, reason=None) -> Task:
    names = [p.name for p in people]
    mentions = [_mention(world, p, ambiguous_ok=clarify == "person") for p in people]
    who, km, day_name = _join(mentions), f"{max_km:g}", DAY_NAMES[day]
    length = DURATION_TEXT[duration]
    limits = f"within {km} km of the {near}, at most ${budget} in total"
    if old is not None:
        old_venue = world.venue(old.venue_id).name
        request = (
            f"{who}'s {DURATION_ADJECTIVE[duration]} meeting next {DAY_NAMES[old.day]} at {hhmm(old.start)} in {old_venue} has to "
            f"move. Cancel it and book them a room next {day_name} instead, {limits}."
        )
    else:
        for_length = "" if clarify == "duration" else f" for {length}"
        template = int(rng.integers(3))
        if template == 0:
            request = f"Please book a room for {who}{for_length} next {day_name}, {limits}."
        elif template == 1:
            request = (
                f"{who} need to meet next {day_name}{for_length}. Book a venue at most {km} km from the "
                f"{near}; the budget is ${budget} in total."
            )
        else:
            of_length = "" if clarify == "duration" else f" of {length}"
            request = (
                f"Next {day_name}: a meeting{of_length} for {who}. Keep it within {km} km of the {near} "
                f"and no more than ${budget} in total. Book it, please."
            )

    clarification = None
    gold: list[GoldCall] = []
    if clarify == "duration":
        clarification = Clarification("duration", f"It should take {length}.")
        gold.append(GoldCall("booking_0", "ask_user", {"question": "How long should the meeting be?"}))
    elif clarify == "person":
        twin = next(p for p in people if sum(q.first == p.first for q in world.people) > 1)
        clarification = Clarification("person", f"I mean {twin.name}.", mention=twin.first)
        gold.append(GoldCall("booking_0", "ask_user", {"question": f"Which {twin.first} do you mean?"}))
    if old is not None:
        gold.append(GoldCall("booking_0", "list_bookings", {"person": names[0], "day": old.day}))
    gold.append(GoldCall("calendar_0", "free_slots", {"people": names, "day": day, "duration_minutes": duration}))
    gold.append(GoldCall("location_0", "search_venues", {"day": day, "near": near, "max_distance_km": max_km, "min_capacity": len(people)}))
    if old is not None:
        gold.append(GoldCall("booking_0", "cancel_booking", {"booking_id": old.id}))
    if choice is not None:
        gold.append(
            GoldCall(
                "booking_0",
                "create_booking",
                {"venue_id": choice.venue_id, "day": day, "start": hhmm(choice.start), "duration_minutes": duration, "attendees": names},
            )
        )
        message = (
            f"Booked {choice.venue} next {day_name} ({day}) {hhmm(choice.start)}-{hhmm(choice.end)} "
            f"for {_join(names)}: ${choice.total_price} in total."
        )
        outputs = (
            Output("venue", choice.venue),
            Output("day", day),
            Output("time", hhmm(choice.start)),
            Output("price", str(choice.total_price)),
        )
    else:
        message = f"INFEASIBLE: nothing fits the request ({reason}); I booked nothing."
        outputs = (Output("infeasible", "INFEASIBLE"),)
    gold.append(GoldCall("booking_0", "respond", {"message": message}))
    candidates = tuple(sorted(v.id for v in venues if v.distance_km <= max_km and v.capacity >= len(people)))
    return Task(
        kind=kind,
        request=request,
        attendees=tuple(names),
        day=day,
        duration=duration,
        near=near,
        max_km=max_km,
        budget=budget,
        choice=choice,
        gold=tuple(gold),
        required_outputs=outputs,
        candidate_venues=candidates,
        clarification=clarification,
        cancel_id=old.id if old is not None else None,
        reason=reason,
    )
