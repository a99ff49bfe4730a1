"""Scripted (non-LLM) policies for the booking envs: an oracle and a random tool caller.

Both have the signature ``policy(agent, observation, rng) -> str`` that ``check_env`` and the demos
use, and both read nothing but the observation.

- :func:`oracle_policy` plays every role perfectly from what it is shown: it parses the request
  (:func:`parse_request`) and the team board (:func:`board`). The calendar agent asks for the named
  people's free time (30-minute windows while the length is unknown); the location agent searches
  the day from the landmark; the booking agent asks the user when a name turned out ambiguous or the
  length is missing, finds and cancels the meeting a reschedule moves, applies the booking rules
  (:func:`~.rules.choose_booking`) to the calendar and location results, and reports what
  ``create_booking`` returned; the coordinator schedules exactly the workers that have something to
  do, the booking agent depending on the others. It plays all three envs.
- :func:`random_tool_policy` calls a random tool of the agent's subset with random arguments drawn
  from its JSON schema (words for strings come from the observation): mostly well-formed calls,
  which exercise the tools rather than the parser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from marft_envs.tasks.booking.generator import DURATION_ADJECTIVE, DURATION_TEXT
from marft_envs.tasks.booking.rules import VenueInfo, choose_booking
from marft_envs.tasks.booking.tools import TOOLS, WORKERS, tools_of
from marft_envs.tasks.booking.world import DAY_NAMES, hhmm, minutes

Policy = Callable[[str, dict, np.random.Generator], str]
_LINE = re.compile(r"^\[r(\d+)\] (\w+) (\w+)\(")
_decoder = json.JSONDecoder()
_DAY_OF = {name: day for day, name in DAY_NAMES.items()}
_LENGTHS = {**{t: d for d, t in DURATION_TEXT.items()}, **{t: d for d, t in DURATION_ADJECTIVE.items()}}
_LENGTH = "|".join(sorted(map(re.escape, _LENGTHS), key=len, reverse=True))
_WHO = [  # where each request template names the attendees
    re.compile(rf"^Please book a room for (?P<who>.+?)(?: for (?:{_LENGTH}))? next "),
    re.compile(r"^(?P<who>.+?) need to meet next "),
    re.compile(r": a meeting(?: of .+?)? for (?P<who>.+?)\. Keep it"),
    re.compile(r"^(?P<who>.+?)'s \S+ meeting next "),
]


@dataclass(frozen=True)
class Found:
    """One call shown on the board: who called which tool with what, and its result or error."""

    agent: str
    tool: str
    arguments: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class Request:
    """What a request asks for, as read from its text."""

    names: tuple[str, ...]
    """The attendees as the request names them (first names where those are unique)."""
    day: str
    duration: int | None
    """None when the request leaves the length out."""
    near: str
    max_km: float
    budget: int
    old_day: str | None = None
    """For a reschedule: the meeting to move."""
    old_start: str | None = None


def parse_request(text: str) -> Request:
    """Read a request written by :mod:`~.generator`'s templates."""
    who = next(m["who"] for pattern in _WHO if (m := pattern.search(text)))
    days = [_DAY_OF[d] for d in re.findall(r"\b[Nn]ext (\w+day)\b", text)]
    length = re.search(rf"\b({_LENGTH})\b", text)
    place = re.search(r"(\d+(?:\.\d+)?) km (?:of|from) the (\w+)", text)
    old = re.search(r"meeting next \w+ at (\d\d:\d\d)", text)
    return Request(
        names=tuple(re.split(r", | and ", who)),
        day=days[-1],
        duration=_LENGTHS[length[1]] if length else None,
        near=place[2],
        max_km=float(place[1]),
        budget=int(re.search(r"\$(\d+)", text)[1]),
        old_day=days[0] if old else None,
        old_start=old[1] if old else None,
    )


def board(text: str) -> list[Found]:
    """Every call an observation shows (the board and this round's parents), in order."""
    out = []
    for line in text.splitlines():
        head = _LINE.match(line)
        if not head:
            continue
        try:
            args, end = _decoder.raw_decode(line, head.end())
        except ValueError:  # an action that did not parse: "(unreadable action)"
            continue
        rest = line[end:]
        if rest.startswith(") -> error: "):
            out.append(Found(head[2], head[3], args, None, rest[len(") -> error: ") :]))
        elif rest.startswith(") -> "):
            out.append(Found(head[2], head[3], args, _decoder.raw_decode(rest, len(") -> "))[0], None))
    return out


def call(name: str, **arguments: Any) -> str:
    """The JSON text of a tool call."""
    return json.dumps({"name": name, "arguments": arguments})


WAIT = call("wait")


@dataclass
class _Team:
    """What an observation tells a perfect team member."""

    request: Request
    found: list[Found]

    def results(self, agent: str, tool: str) -> list[dict[str, Any]]:
        return [f.result for f in self.found if f.agent == agent and f.tool == tool and f.result is not None]

    def latest(self, agent: str, tool: str) -> dict[str, Any] | None:
        results = self.results(agent, tool)
        return results[-1] if results else None

    def answers(self) -> list[str]:
        return [r["answer"] for r in self.results("booking_0", "ask_user")]

    def names(self) -> list[str]:
        """The attendees, with every name the user has clarified in full."""
        names = list(self.request.names)
        for answer in self.answers():
            meant = re.match(r"I mean (\w+) (\w+)\.", answer)
            if meant:
                names = [f"{meant[1]} {meant[2]}" if n == meant[1] else n for n in names]
        return names

    def duration(self) -> int | None:
        if self.request.duration is not None:
            return self.request.duration
        for answer in self.answers():
            length = re.search(rf"\b({_LENGTH})\b", answer)
            if length:
                return _LENGTHS[length[1]]
        return None

    def unresolved_name(self) -> str | None:
        """A name the calendar found ambiguous and the user has not yet clarified."""
        for f in self.found:
            ambiguous = f.error and re.match(r"'(\w+)' is ambiguous", f.error)
            if ambiguous and ambiguous[1] in self.names():
                return ambiguous[1]
        return None


def _calendar(team: _Team) -> str:
    if team.latest("calendar_0", "free_slots") is not None or team.unresolved_name():
        return WAIT
    # While the length is unknown, 30-minute windows: every longer meeting fits inside one of them.
    return call("free_slots", people=team.names(), day=team.request.day, duration_minutes=team.duration() or 30)


def _location(team: _Team) -> str:
    r = team.request
    if team.latest("location_0", "search_venues") is not None:
        return WAIT
    return call("search_venues", day=r.day, near=r.near, max_distance_km=r.max_km, min_capacity=len(r.names))


def _booking(team: _Team) -> str:
    r, asked = team.request, len(team.results("booking_0", "ask_user"))
    if team.unresolved_name():
        return call("ask_user", question=f"Which {team.unresolved_name()} do you mean?")
    if team.duration() is None and not asked:
        return call("ask_user", question="How long should the meeting be?")
    listed = team.latest("booking_0", "list_bookings")
    if r.old_day is not None and listed is None:
        return call("list_bookings", person=r.names[0], day=r.old_day)
    if r.old_day is not None and team.latest("booking_0", "cancel_booking") is None:
        old = next(b for b in listed["bookings"] if b["start"] == r.old_start)
        return call("cancel_booking", booking_id=old["id"])
    created = team.latest("booking_0", "create_booking")
    if created is not None:
        return call(
            "respond",
            message=f"Booked {created['venue']} on {DAY_NAMES[created['day']]} at "
            f"{created['start']}-{created['end']} for {', '.join(created['attendees'])}: "
            f"${created['total_price']} in total.",
        )
    slots, venues, duration = team.latest("calendar_0", "free_slots"), team.latest("location_0", "search_venues"), team.duration()
    if slots is None or venues is None or duration is None:
        return WAIT
    choice = choose_booking(
        [(minutes(a), minutes(b)) for a, b in slots["free"]],
        [VenueInfo.from_result(v) for v in venues["venues"]],
        duration=duration,
        budget=r.budget,
        max_km=r.max_km,
        n_attendees=len(slots["people"]),
    )
    if choice is None:
        return call("respond", message="INFEASIBLE: no time and venue meet the request, so I booked nothing.")
    return call(
        "create_booking",
        venue_id=choice.venue_id,
        day=r.day,
        start=hhmm(choice.start),
        duration_minutes=duration,
        attendees=slots["people"],
    )


def _coordinator(team: _Team) -> str:
    # Schedule the workers with something to do; the booking agent sees their results of this round.
    busy = [w for w, act in (("calendar_0", _calendar), ("location_0", _location)) if act(team) != WAIT]
    return call("plan", act=[*busy, "booking_0"], depends_on={"booking_0": busy} if busy else {})


_ROLES = {"coordinator": _coordinator, "calendar": _calendar, "location": _location, "booking": _booking}


def oracle(agent: str, observation: dict, rng: np.random.Generator | None = None) -> str:
    """The perfect action of ``agent`` given its observation."""
    text = observation["text"]
    request = parse_request(next(line for line in text.splitlines() if line.startswith("Request: "))[len("Request: ") :])
    return _ROLES[agent.rsplit("_", 1)[0]](_Team(request, board(text)))


def oracle_policy(env: Any = None) -> Policy:
    """The oracle as a policy factory, like the other families' (it needs nothing from ``env``)."""
    return oracle


def random_tool_policy(agent: str, observation: dict, rng: np.random.Generator) -> str:
    """A random tool of ``agent``'s subset with random arguments drawn from its schema."""
    words = re.findall(r"[A-Za-z][A-Za-z'-]+", observation.get("text", "") + " " + observation.get("instructions", ""))
    names = tools_of(agent)
    tool = TOOLS[names[int(rng.integers(len(names)))]]
    return json.dumps({"name": tool.name, "arguments": _sample(tool.parameters, rng, words or ["x"])})


def _sample(schema: dict[str, Any], rng: np.random.Generator, words: list[str]) -> Any:
    if "enum" in schema:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    kind = schema.get("type")
    if kind == "object":
        out = {}
        for key, sub in schema.get("properties", {}).items():
            if key in schema.get("required", []) or rng.random() < 0.5:
                out[key] = _sample(sub, rng, words)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):  # a mapping keyed by agents (the plan's depends_on)
            for worker in WORKERS:
                if rng.random() < 0.3:
                    out[worker] = _sample(extra, rng, words)
        return out
    if kind == "array":
        n = int(rng.integers(schema.get("minItems", 0), min(schema.get("maxItems", 3), 3) + 1))
        return [_sample(schema.get("items", {}), rng, words) for _ in range(n)]
    if kind == "integer":
        low = schema.get("minimum", 0)
        step = schema.get("multipleOf", 1)
        value = int(rng.integers(low, min(schema.get("maximum", low + 200), low + 200) + 1))
        return value - value % step if value - value % step >= low else low
    if kind == "number":
        return round(float(rng.uniform(0, 5)), 1)
    if kind == "string":
        if "pattern" in schema:  # a time of day
            return f"{int(rng.integers(7, 20)):02d}:{int(rng.choice([0, 30])):02d}"
        n = int(rng.integers(1, 3 if schema.get("maxLength", 100) <= 60 else 9))
        return " ".join(words[int(rng.integers(len(words)))] for _ in range(n))[: schema.get("maxLength", 1000)]
    return None
