"""The tools: functions with JSON-schema specs in the function-calling style, and each role's subset.

=================  ===========  =========================================================================
tool               role         what it does
=================  ===========  =========================================================================
``plan``           coordinator  who acts this round and who depends on whom (the env sets the graph)
``find_people``    calendar     people whose first, last or full name starts with the text
``free_slots``     calendar     windows between 08:00 and 18:00 on a day when all the people are free
``search_venues``  location     venues with distances from a landmark, optional filters, that day's bookings
``get_distance``   location     how far a venue is from a landmark
``list_bookings``  booking      active bookings, filtered by person, day or venue
``create_booking`` booking      book a venue (checks hours, capacity, clashes, everyone's calendar)
``cancel_booking`` booking      cancel an active booking
``ask_user``       booking      ask the user a question (a scripted user answers)
``respond``        booking      the final message to the user; it ends the episode
``wait``           all workers  do nothing this round
=================  ===========  =========================================================================

Database tools are plain functions ``run(db, arguments) -> result`` that raise :class:`ToolError`
when a well-formed call cannot be done ("Ana Silva is busy 09:00-10:00 on Tue"); :func:`run_tool`
runs one inside a transaction, so a failed call changes nothing. ``plan``, ``ask_user``, ``respond``
and ``wait`` act on the env, not the database, and the env runs them. :func:`prepare` turns an
action's text into a checked :class:`~.actions.ToolCall` (or raises
:class:`~.actions.ActionError`) before anything runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from marft_envs.tasks.booking.actions import ActionError, ToolCall, looks_like_sql, parse_action, strings_in, validate
from marft_envs.tasks.booking.db import BookingDB
from marft_envs.tasks.booking.world import DAYS, LANDMARKS, WORK_END, WORK_START, distance, free_windows, hhmm, minutes
from marft_envs.tasks.profiles import role_of

WORKERS = ("calendar_0", "location_0", "booking_0")
"""The agents a coordinator can schedule."""


class ToolError(Exception):
    """A well-formed call that cannot be done (an unknown person, a venue already taken, ...)."""


@dataclass(frozen=True)
class Tool:
    """A function the agents can call: its JSON-schema spec and, for database tools, its implementation."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments (an object)."""
    run: Callable[[BookingDB, dict[str, Any]], dict[str, Any]] | None = None
    """``run(db, arguments) -> result`` for database tools; None for the tools the env runs itself."""

    def spec(self) -> dict[str, Any]:
        """The function-calling spec: ``{"type": "function", "function": {name, description, parameters}}``."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


# -- argument schemas ------------------------------------------------------------------------------

DAY = {"type": "string", "enum": list(DAYS), "description": "a day of next week: Mon, Tue, Wed, Thu or Fri"}
PERSON = {"type": "string", "minLength": 1, "maxLength": 60,
          "description": "a full name, or a first name that only one person has"}
PEOPLE = {"type": "array", "items": PERSON, "minItems": 1, "maxItems": 8, "uniqueItems": True}
DURATION = {"type": "integer", "minimum": 15, "maximum": 600, "multipleOf": 15, "description": "minutes"}
TIME = {"type": "string", "pattern": r"([01][0-9]|2[0-3]):[0-5][0-9]", "format": "HH:MM", "description": "HH:MM"}
NEAR = {"type": "string", "enum": list(LANDMARKS), "description": "the landmark distances are measured from"}
VENUE_ID = {"type": "integer", "minimum": 1, "maximum": 10_000}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


# -- lookups shared by the tools -------------------------------------------------------------------

def _quote(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def resolve_person(db: BookingDB, name: str) -> tuple[int, str]:
    """``(id, full name)`` of the person ``name`` means: a full name, or a first name only one person has."""
    key = " ".join(name.split()).casefold()
    people = [(r["id"], f"{r['first_name']} {r['last_name']}", r["first_name"]) for r in
              db.query("SELECT id, first_name, last_name FROM people ORDER BY id")]
    for pid, full, _ in people:
        if full.casefold() == key:
            return pid, full
    same_first = [(pid, full) for pid, full, first in people if first.casefold() == key]
    if len(same_first) == 1:
        return same_first[0]
    if same_first:
        names = " and ".join(full for _, full in same_first)
        raise ToolError(f"{_quote(name)} is ambiguous: it could be {names}; use the full name (ask the user which one)")
    raise ToolError(f"nobody called {_quote(name)}; find_people lists the people whose names start with a text")


def resolve_people(db: BookingDB, names: list[str]) -> list[tuple[int, str]]:
    """Resolve every name; the same person twice is an error."""
    resolved = [resolve_person(db, n) for n in names]
    seen: set[int] = set()
    for pid, full in resolved:
        if pid in seen:
            raise ToolError(f"{full} is listed twice")
        seen.add(pid)
    return resolved


def busy_intervals(db: BookingDB, person_ids: list[int], day: str) -> list[tuple[int, int]]:
    """Busy blocks and active bookings of these people on ``day``."""
    marks = ",".join("?" * len(person_ids))
    rows = db.query(f"SELECT start_min, end_min FROM busy_slots WHERE day = ? AND person_id IN ({marks})",
                    [day, *person_ids])
    rows += db.query(
        "SELECT b.start_min, b.end_min FROM bookings b JOIN booking_attendees a ON a.booking_id = b.id "
        f"WHERE b.status = 'active' AND b.day = ? AND a.person_id IN ({marks})", [day, *person_ids])
    return [(r[0], r[1]) for r in rows]


def _venue(db: BookingDB, venue_id: int) -> sqlite3.Row:
    rows = db.query("SELECT * FROM venues WHERE id = ?", (venue_id,))
    if not rows:
        raise ToolError(f"there is no venue {venue_id}; search_venues lists the venues and their ids")
    return rows[0]


def _landmark(db: BookingDB, name: str) -> sqlite3.Row:
    return db.query("SELECT * FROM landmarks WHERE name = ?", (name,))[0]


def _venue_bookings(db: BookingDB, venue_id: int, day: str) -> list[tuple[int, int]]:
    rows = db.query("SELECT start_min, end_min FROM bookings WHERE status = 'active' AND venue_id = ? AND day = ? "
                    "ORDER BY start_min", (venue_id, day))
    return [(r[0], r[1]) for r in rows]


def _names_of(db: BookingDB, booking_id: int) -> list[str]:
    rows = db.query("SELECT p.first_name || ' ' || p.last_name FROM booking_attendees a JOIN people p "
                    "ON p.id = a.person_id WHERE a.booking_id = ? ORDER BY p.id", (booking_id,))
    return [r[0] for r in rows]


# -- the database tools ----------------------------------------------------------------------------

def find_people(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    key = " ".join(args["name"].split()).casefold()
    rows = db.query("SELECT first_name, last_name FROM people ORDER BY id")
    names = [f"{f} {s}" for f, s in rows]
    return {"matches": [n for n, (f, s) in zip(names, rows)
                        if n.casefold().startswith(key) or s.casefold().startswith(key)]}


def free_slots(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    people = resolve_people(db, args["people"])
    duration = args.get("duration_minutes", 30)
    windows = free_windows(busy_intervals(db, [pid for pid, _ in people], args["day"]), WORK_START, WORK_END, duration)
    return {"people": [full for _, full in people], "day": args["day"], "duration_minutes": duration,
            "free": [[hhmm(s), hhmm(e)] for s, e in windows]}


def search_venues(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    near = args.get("near", "office")
    mark = _landmark(db, near)
    day = args.get("day")
    found = []
    for v in db.query("SELECT * FROM venues ORDER BY id"):
        km = distance(v["x_km"], v["y_km"], mark["x_km"], mark["y_km"])
        if "max_distance_km" in args and km > args["max_distance_km"]:
            continue
        if "min_capacity" in args and v["capacity"] < args["min_capacity"]:
            continue
        if "max_price_per_hour" in args and v["price_per_hour"] > args["max_price_per_hour"]:
            continue
        venue = {"id": v["id"], "name": v["name"], "capacity": v["capacity"], "opens": hhmm(v["opens_min"]),
                 "closes": hhmm(v["closes_min"]), "price_per_hour": v["price_per_hour"], "distance_km": km}
        if day is not None:
            venue["booked"] = [[hhmm(s), hhmm(e)] for s, e in _venue_bookings(db, v["id"], day)]
        found.append(venue)
    found.sort(key=lambda v: (v["distance_km"], v["id"]))
    return {"near": near, **({"day": day} if day else {}), "venues": found}


def get_distance(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    v = _venue(db, args["venue_id"])
    near = args.get("near", "office")
    mark = _landmark(db, near)
    return {"venue_id": v["id"], "venue": v["name"], "near": near,
            "distance_km": distance(v["x_km"], v["y_km"], mark["x_km"], mark["y_km"])}


def list_bookings(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    sql = ("SELECT b.id, b.venue_id, v.name, b.day, b.start_min, b.end_min, b.note FROM bookings b "
           "JOIN venues v ON v.id = b.venue_id WHERE b.status = 'active'")
    params: list[Any] = []
    if "person" in args:
        pid, _ = resolve_person(db, args["person"])
        sql += " AND b.id IN (SELECT booking_id FROM booking_attendees WHERE person_id = ?)"
        params.append(pid)
    if "day" in args:
        sql += " AND b.day = ?"
        params.append(args["day"])
    if "venue_id" in args:
        sql += " AND b.venue_id = ?"
        params.append(args["venue_id"])
    rows = db.query(sql + " ORDER BY b.id", params)
    return {"bookings": [
        {"id": r[0], "venue_id": r[1], "venue": r[2], "day": r[3], "start": hhmm(r[4]), "end": hhmm(r[5]),
         "attendees": _names_of(db, r[0]), "note": r[6]}
        for r in rows
    ]}


def create_booking(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    venue = _venue(db, args["venue_id"])
    day, start, duration = args["day"], minutes(args["start"]), args["duration_minutes"]
    end = start + duration
    if start % 15:
        raise ToolError(f"start {args['start']} is not on the quarter hour")
    if end > 24 * 60:
        raise ToolError(f"a {duration}-minute booking from {args['start']} would end after midnight")
    people = resolve_people(db, args["attendees"])
    if len(people) > venue["capacity"]:
        raise ToolError(f"{venue['name']} holds {venue['capacity']} people, not {len(people)}")
    if start < venue["opens_min"] or end > venue["closes_min"]:
        raise ToolError(f"{venue['name']} is open {hhmm(venue['opens_min'])}-{hhmm(venue['closes_min'])}; "
                        f"{args['start']}-{hhmm(end)} does not fit")
    for s, e in _venue_bookings(db, venue["id"], day):
        if s < end and start < e:
            raise ToolError(f"{venue['name']} is already booked {hhmm(s)}-{hhmm(e)} on {day}")
    for pid, full in people:
        for s, e in sorted(busy_intervals(db, [pid], day)):
            if s < end and start < e:
                raise ToolError(f"{full} is busy {hhmm(s)}-{hhmm(e)} on {day}")
    cursor = db.execute("INSERT INTO bookings (venue_id, day, start_min, end_min, note) VALUES (?, ?, ?, ?, ?)",
                        (venue["id"], day, start, end, args.get("note", "")))
    booking_id = cursor.lastrowid
    db.conn.executemany("INSERT INTO booking_attendees VALUES (?, ?)", [(booking_id, pid) for pid, _ in people])
    return {"booking_id": booking_id, "venue_id": venue["id"], "venue": venue["name"], "day": day,
            "start": args["start"], "end": hhmm(end), "attendees": [full for _, full in people],
            "total_price": venue["price_per_hour"] * duration // 60}


def cancel_booking(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    rows = db.query("SELECT status FROM bookings WHERE id = ?", (args["booking_id"],))
    if not rows:
        raise ToolError(f"there is no booking {args['booking_id']}; list_bookings shows the active ones")
    if rows[0]["status"] != "active":
        raise ToolError(f"booking {args['booking_id']} is already cancelled")
    db.execute("UPDATE bookings SET status = 'cancelled' WHERE id = ?", (args["booking_id"],))
    return {"cancelled": args["booking_id"]}


# -- the registry of tools -------------------------------------------------------------------------

TOOLS: dict[str, Tool] = {t.name: t for t in [
    Tool("plan", "Decide this round: which workers act and whose results each one sees first. "
         "An agent in depends_on[X] acts before X and X sees its result; no cycles.",
         _object({"act": {"type": "array", "items": {"type": "string", "enum": list(WORKERS)}, "uniqueItems": True,
                          "maxItems": len(WORKERS)},
                  "depends_on": {"type": "object", "additionalProperties": {
                      "type": "array", "items": {"type": "string", "enum": list(WORKERS)}, "uniqueItems": True,
                      "maxItems": len(WORKERS)}}}, ("act",))),
    Tool("find_people", "People whose first, last or full name starts with the text.",
         _object({"name": PERSON}, ("name",)), find_people),
    Tool("free_slots", "Windows between 08:00 and 18:00 when all the people are free, at least duration_minutes "
         "long (default 30).", _object({"people": PEOPLE, "day": DAY, "duration_minutes": DURATION}, ("people", "day")),
         free_slots),
    Tool("search_venues", "Venues, nearest first, with distance_km from a landmark (default office); optional "
         "filters; with a day, each venue's booked times that day.",
         _object({"day": DAY, "near": NEAR, "max_distance_km": {"type": "number", "minimum": 0, "maximum": 100},
                  "min_capacity": {"type": "integer", "minimum": 1, "maximum": 1000},
                  "max_price_per_hour": {"type": "integer", "minimum": 0, "maximum": 100_000}}), search_venues),
    Tool("get_distance", "How far a venue is from a landmark (default office), in km.",
         _object({"venue_id": VENUE_ID, "near": NEAR}, ("venue_id",)), get_distance),
    Tool("list_bookings", "Active bookings, optionally only a person's, a day's or a venue's.",
         _object({"person": PERSON, "day": DAY, "venue_id": VENUE_ID}), list_bookings),
    Tool("create_booking", "Book a venue for the attendees; fails if it is closed, too small, taken, "
         "or an attendee is busy.",
         _object({"venue_id": VENUE_ID, "day": DAY, "start": TIME, "duration_minutes": DURATION, "attendees": PEOPLE,
                  "note": {"type": "string", "maxLength": 200}},
                 ("venue_id", "day", "start", "duration_minutes", "attendees")), create_booking),
    Tool("cancel_booking", "Cancel an active booking.",
         _object({"booking_id": {"type": "integer", "minimum": 1, "maximum": 1_000_000}}, ("booking_id",)),
         cancel_booking),
    Tool("ask_user", "Ask the user a question; the answer comes back as the result.",
         _object({"question": {"type": "string", "minLength": 1, "maxLength": 300}}, ("question",))),
    Tool("respond", "Your final message to the user; it ends the episode.",
         _object({"message": {"type": "string", "minLength": 1, "maxLength": 1000}}, ("message",))),
    Tool("wait", "Do nothing this round.", _object({})),
]}

ROLE_TOOLS: dict[str, tuple[str, ...]] = {
    "coordinator": ("plan",),
    "calendar": ("find_people", "free_slots", "wait"),
    "location": ("search_venues", "get_distance", "wait"),
    "booking": ("list_bookings", "create_booking", "cancel_booking", "ask_user", "respond", "wait"),
}
WRITES = frozenset({"create_booking", "cancel_booking"})
"""Tools that change the database."""


def tools_of(agent: str) -> tuple[str, ...]:
    """The names of the tools ``agent`` may call."""
    return ROLE_TOOLS[role_of(agent)]


def owner_of(tool: str) -> str:
    """The role whose subset has ``tool`` (the first, for ``wait``)."""
    return next(role for role, names in ROLE_TOOLS.items() if tool in names)


def prepare(text: str, agent: str) -> ToolCall:
    """Parse ``agent``'s action and check it against the tool's schema; raises :class:`ActionError`."""
    return check_call(parse_action(text), agent)


def check_call(call: ToolCall, agent: str) -> ToolCall:
    """Check a parsed call: a tool of ``agent``'s, arguments that fit its schema, no SQL; raises :class:`ActionError`."""
    allowed = tools_of(agent)
    if call.name not in TOOLS:
        raise ActionError(f"unknown tool {call.name[:40]!r}; your tools: {', '.join(allowed)}")
    if call.name not in allowed:
        raise ActionError(f"{call.name} is the {owner_of(call.name)} agent's tool; your tools: {', '.join(allowed)}")
    tool = TOOLS[call.name]
    validate(call.arguments, tool.parameters)
    if tool.run is not None:
        sql = [s for s in strings_in(call.arguments) if looks_like_sql(s)]
        if sql:
            raise ActionError(f"arguments must be plain values, not SQL: {_quote(sql[0])}")
    return call


def run_tool(db: BookingDB, call: ToolCall) -> dict[str, Any]:
    """Run a prepared database tool in a transaction: it either succeeds or changes nothing (ToolError)."""
    tool = TOOLS[call.name]
    if tool.run is None:
        raise ValueError(f"{call.name} is run by the env, not on the database")
    try:
        with db.transaction():
            return tool.run(db, call.arguments)
    except sqlite3.IntegrityError as err:  # a safety net: the schema's constraints refuse what checks missed
        raise ToolError(f"the database refused the change ({err})") from None
