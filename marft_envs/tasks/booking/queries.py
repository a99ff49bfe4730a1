"""The booking env's database tools: plain functions ``run(db, arguments) -> result`` over :class:`BookingDB`.

Each looks people, venues and bookings up by the names and ids the agents use and raises
:class:`ToolError` when a well-formed call cannot be done ("Ana Silva is busy 09:00-10:00 on Tue");
``tools.py`` declares their JSON-schema specs and runs each inside a transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marft_envs.tasks.booking.db import BookingDB
from marft_envs.tasks.booking.world import WORK_END, WORK_START, distance, free_windows, hhmm, minutes


class ToolError(Exception):
    """A well-formed call that cannot be done (an unknown person, a venue already taken, ...)."""


# -- lookups shared by the tools -------------------------------------------------------------------


def _quote(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def resolve_person(db: BookingDB, name: str) -> tuple[int, str]:
    """``(id, full name)`` of the person ``name`` means: a full name, or a first name only one person has."""
    key = " ".join(name.split()).casefold()
    people = [
        (r["id"], f"{r['first_name']} {r['last_name']}", r["first_name"])
        for r in db.query("SELECT id, first_name, last_name FROM people ORDER BY id")
    ]
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
    rows = db.query(f"SELECT start_min, end_min FROM busy_slots WHERE day = ? AND person_id IN ({marks})", [day, *person_ids])
    rows += db.query(
        "SELECT b.start_min, b.end_min FROM bookings b JOIN booking_attendees a ON a.booking_id = b.id "
        f"WHERE b.status = 'active' AND b.day = ? AND a.person_id IN ({marks})",
        [day, *person_ids],
    )
    return [(r[0], r[1]) for r in rows]


def _venue(db: BookingDB, venue_id: int) -> sqlite3.Row:
    rows = db.query("SELECT * FROM venues WHERE id = ?", (venue_id,))
    if not rows:
        raise ToolError(f"there is no venue {venue_id}; search_venues lists the venues and their ids")
    return rows[0]


def _landmark(db: BookingDB, name: str) -> sqlite3.Row:
    return db.query("SELECT * FROM landmarks WHERE name = ?", (name,))[0]


def _venue_bookings(db: BookingDB, venue_id: int, day: str) -> list[tuple[int, int]]:
    rows = db.query(
        "SELECT start_min, end_min FROM bookings WHERE status = 'active' AND venue_id = ? AND day = ? ORDER BY start_min", (venue_id, day)
    )
    return [(r[0], r[1]) for r in rows]


def _names_of(db: BookingDB, booking_id: int) -> list[str]:
    rows = db.query(
        "SELECT p.first_name || ' ' || p.last_name FROM booking_attendees a JOIN people p "
        "ON p.id = a.person_id WHERE a.booking_id = ? ORDER BY p.id",
        (booking_id,),
    )
    return [r[0] for r in rows]


# -- the database tools ----------------------------------------------------------------------------


def find_people(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    key = " ".join(args["name"].split()).casefold()
    rows = db.query("SELECT first_name, last_name FROM people ORDER BY id")
    names = [f"{f} {s}" for f, s in rows]
    return {"matches": [n for n, (f, s) in zip(names, rows) if n.casefold().startswith(key) or s.casefold().startswith(key)]}


def free_slots(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    people = resolve_people(db, args["people"])
    duration = args.get("duration_minutes", 30)
    windows = free_windows(busy_intervals(db, [pid for pid, _ in people], args["day"]), WORK_START, WORK_END, duration)
    return {
        "people": [full for _, full in people],
        "day": args["day"],
        "duration_minutes": duration,
        "free": [[hhmm(s), hhmm(e)] for s, e in windows],
    }


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
        venue = {
            "id": v["id"],
            "name": v["name"],
            "capacity": v["capacity"],
            "opens": hhmm(v["opens_min"]),
            "closes": hhmm(v["closes_min"]),
            "price_per_hour": v["price_per_hour"],
            "distance_km": km,
        }
        if day is not None:
            venue["booked"] = [[hhmm(s), hhmm(e)] for s, e in _venue_bookings(db, v["id"], day)]
        found.append(venue)
    found.sort(key=lambda v: (v["distance_km"], v["id"]))
    return {"near": near, **({"day": day} if day else {}), "venues": found}


def get_distance(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    v = _venue(db, args["venue_id"])
    near = args.get("near", "office")
    mark = _landmark(db, near)
    return {
        "venue_id": v["id"],
        "venue": v["name"],
        "near": near,
        "distance_km": distance(v["x_km"], v["y_km"], mark["x_km"], mark["y_km"]),
    }


def list_bookings(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    sql = (
        "SELECT b.id, b.venue_id, v.name, b.day, b.start_min, b.end_min, b.note FROM bookings b "
        "JOIN venues v ON v.id = b.venue_id WHERE b.status = 'active'"
    )
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
    return {
        "bookings": [
            {
                "id": r[0],
                "venue_id": r[1],
                "venue": r[2],
                "day": r[3],
                "start": hhmm(r[4]),
                "end": hhmm(r[5]),
                "attendees": _names_of(db, r[0]),
                "note": r[6],
            }
            for r in rows
        ]
    }


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
        raise ToolError(
            f"{venue['name']} is open {hhmm(venue['opens_min'])}-{hhmm(venue['closes_min'])}; {args['start']}-{hhmm(end)} does not fit"
        )
    for s, e in _venue_bookings(db, venue["id"], day):
        if s < end and start < e:
            raise ToolError(f"{venue['name']} is already booked {hhmm(s)}-{hhmm(e)} on {day}")
    for pid, full in people:
        for s, e in sorted(busy_intervals(db, [pid], day)):
            if s < end and start < e:
                raise ToolError(f"{full} is busy {hhmm(s)}-{hhmm(e)} on {day}")
    cursor = db.execute(
        "INSERT INTO bookings (venue_id, day, start_min, end_min, note) VALUES (?, ?, ?, ?, ?)",
        (venue["id"], day, start, end, args.get("note", "")),
    )
    booking_id = cursor.lastrowid
    db.conn.executemany("INSERT INTO booking_attendees VALUES (?, ?)", [(booking_id, pid) for pid, _ in people])
    return {
        "booking_id": booking_id,
        "venue_id": venue["id"],
        "venue": venue["name"],
        "day": day,
        "start": args["start"],
        "end": hhmm(end),
        "attendees": [full for _, full in people],
        "total_price": venue["price_per_hour"] * duration // 60,
    }


def cancel_booking(db: BookingDB, args: dict[str, Any]) -> dict[str, Any]:
    rows = db.query("SELECT status FROM bookings WHERE id = ?", (args["booking_id"],))
    if not rows:
        raise ToolError(f"there is no booking {args['booking_id']}; list_bookings shows the active ones")
    if rows[0]["status"] != "active":
        raise ToolError(f"booking {args['booking_id']} is already cancelled")
    db.execute("UPDATE bookings SET status = 'cancelled' WHERE id = ?", (args["booking_id"],))
    return {"cancelled": args["booking_id"]}
