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

Database tools are plain functions ``run(db, arguments) -> result`` (``queries.py``) that raise :class:`ToolError`
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
from marft_envs.tasks.booking.queries import (
    ToolError,
    _quote,
    cancel_booking,
    create_booking,
    find_people,
    free_slots,
    get_distance,
    list_bookings,
    search_venues,
)
from marft_envs.tasks.booking.world import DAYS, LANDMARKS
from marft_envs.tasks.profiles import role_of

WORKERS = ("calendar_0", "location_0", "booking_0")
"""The agents a coordinator can schedule."""


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
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


# -- argument schemas ------------------------------------------------------------------------------

DAY = {"type": "string", "enum": list(DAYS), "description": "a day of next week: Mon, Tue, Wed, Thu or Fri"}
PERSON = {"type": "string", "minLength": 1, "maxLength": 60, "description": "a full name, or a first name that only one person has"}
PEOPLE = {"type": "array", "items": PERSON, "minItems": 1, "maxItems": 8, "uniqueItems": True}
DURATION = {"type": "integer", "minimum": 15, "maximum": 600, "multipleOf": 15, "description": "minutes"}
TIME = {"type": "string", "pattern": r"([01][0-9]|2[0-3]):[0-5][0-9]", "format": "HH:MM", "description": "HH:MM"}
NEAR = {"type": "string", "enum": list(LANDMARKS), "description": "the landmark distances are measured from"}
VENUE_ID = {"type": "integer", "minimum": 1, "maximum": 10_000}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


# -- the registry of tools -------------------------------------------------------------------------

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in [
        Tool(
            "plan",
            "Decide this round: which workers act and whose results each one sees first. "
            "An agent in depends_on[X] acts before X and X sees its result; no cycles.",
            _object(
                {
                    "act": {
                        "type": "array",
                        "items": {"type": "string", "enum": list(WORKERS)},
                        "uniqueItems": True,
                        "maxItems": len(WORKERS),
                    },
                    "depends_on": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "array",
                            "items": {"type": "string", "enum": list(WORKERS)},
                            "uniqueItems": True,
                            "maxItems": len(WORKERS),
                        },
                    },
                },
                ("act",),
            ),
        ),
        Tool(
            "find_people", "People whose first, last or full name starts with the text.", _object({"name": PERSON}, ("name",)), find_people
        ),
        Tool(
            "free_slots",
            "Windows between 08:00 and 18:00 when all the people are free, at least duration_minutes long (default 30).",
            _object({"people": PEOPLE, "day": DAY, "duration_minutes": DURATION}, ("people", "day")),
            free_slots,
        ),
        Tool(
            "search_venues",
            "Venues, nearest first, with distance_km from a landmark (default office); optional "
            "filters; with a day, each venue's booked times that day.",
            _object(
                {
                    "day": DAY,
                    "near": NEAR,
                    "max_distance_km": {"type": "number", "minimum": 0, "maximum": 100},
                    "min_capacity": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "max_price_per_hour": {"type": "integer", "minimum": 0, "maximum": 100_000},
                }
            ),
            search_venues,
        ),
        Tool(
            "get_distance",
            "How far a venue is from a landmark (default office), in km.",
            _object({"venue_id": VENUE_ID, "near": NEAR}, ("venue_id",)),
            get_distance,
        ),
        Tool(
            "list_bookings",
            "Active bookings, optionally only a person's, a day's or a venue's.",
            _object({"person": PERSON, "day": DAY, "venue_id": VENUE_ID}),
            list_bookings,
        ),
        Tool(
            "create_booking",
            "Book a venue for the attendees; fails if it is closed, too small, taken, or an attendee is busy.",
            _object(
                {
                    "venue_id": VENUE_ID,
                    "day": DAY,
                    "start": TIME,
                    "duration_minutes": DURATION,
                    "attendees": PEOPLE,
                    "note": {"type": "string", "maxLength": 200},
                },
                ("venue_id", "day", "start", "duration_minutes", "attendees"),
            ),
            create_booking,
        ),
        Tool(
            "cancel_booking",
            "Cancel an active booking.",
            _object({"booking_id": {"type": "integer", "minimum": 1, "maximum": 1_000_000}}, ("booking_id",)),
            cancel_booking,
        ),
        Tool(
            "ask_user",
            "Ask the user a question; the answer comes back as the result.",
            _object({"question": {"type": "string", "minLength": 1, "maxLength": 300}}, ("question",)),
        ),
        Tool(
            "respond",
            "Your final message to the user; it ends the episode.",
            _object({"message": {"type": "string", "minLength": 1, "maxLength": 1000}}, ("message",)),
        ),
        Tool("wait", "Do nothing this round.", _object({})),
    ]
}

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
