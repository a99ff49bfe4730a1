"""The booking domain and its seeded generator: people with calendars, venues, landmarks, bookings.

A *world* is the static content of one episode's database, drawn from a NumPy generator: a small
directory of people (two of whom always share a first name, so a request can be ambiguous), each
with busy blocks on the five workdays of next week; venues with a capacity, opening hours, an hourly
price and coordinates; landmarks (the office, the station, ...) to measure distances from; and a few
existing bookings. Times are minutes after midnight on a 30-minute grid; days are ``Mon`` .. ``Fri``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The days, working hours and distance are shared with the grader, so they live below it; the
# booking family reads them from here.
from marft_envs.rewards.booking_units import DAY_NAMES, DAYS, WORK_END, WORK_START, distance, distance_km  # noqa: F401

GRID = 30
"""Minutes: busy blocks, opening hours and meeting start times all lie on this grid."""
DURATIONS = (30, 60, 90, 120)
"""Meeting lengths that tasks ask for."""

FIRST_NAMES = (
    "Ana",
    "Bo",
    "Dara",
    "Eli",
    "Farah",
    "Gus",
    "Hana",
    "Ivo",
    "Jun",
    "Kai",
    "Lena",
    "Mo",
    "Nia",
    "Omar",
    "Pia",
    "Raj",
    "Sol",
    "Tess",
    "Uma",
    "Vik",
)
LAST_NAMES = (
    "Silva",
    "Chen",
    "Okafor",
    "Novak",
    "Haddad",
    "Berg",
    "Ito",
    "Moreau",
    "Costa",
    "Rossi",
    "Kim",
    "Lund",
    "Park",
    "Reyes",
    "Sato",
    "Weber",
    "Nakata",
    "Olsen",
    "Pereira",
    "Quinn",
)
VENUE_NAMES = (
    "Maple Room",
    "Harbor Hall",
    "Cedar Studio",
    "Atlas Suite",
    "Birch Loft",
    "Quarry Room",
    "Lantern House",
    "Orchard Room",
    "Summit Hall",
    "Willow Studio",
    "Granite Suite",
    "Pier Loft",
    "Juniper Room",
    "Beacon Hall",
    "Falcon Room",
    "Meadow Hall",
)
LANDMARKS = ("office", "station", "library", "hotel")
BUSY_LABELS = ("standup", "1:1", "focus time", "lunch", "review", "dentist", "training", "call")
NOTES = ("", "quarterly planning", "interview", "client visit", "offsite prep", "team lunch")


def hhmm(minutes: int) -> str:
    """``570`` -> ``"09:30"``."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def minutes(text: str) -> int:
    """``"09:30"`` -> ``570`` (the caller has checked the ``HH:MM`` format)."""
    hours, mins = text.split(":")
    return int(hours) * 60 + int(mins)


def overlaps(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    """Whether two half-open intervals ``[a_start, a_end)`` and ``[b_start, b_end)`` share a minute."""
    return a_start < b_end and b_start < a_end


def free_windows(busy: list[tuple[int, int]], start: int, end: int, min_length: int) -> list[tuple[int, int]]:
    """Maximal intervals inside ``[start, end)`` that miss every busy interval and last ``min_length`` or more."""
    windows, cursor = [], start
    for b_start, b_end in sorted(busy):
        if b_start > cursor:
            windows.append((cursor, min(b_start, end)))
        cursor = max(cursor, b_end)
        if cursor >= end:
            break
    if cursor < end:
        windows.append((cursor, end))
    return [(s, e) for s, e in windows if e - s >= min_length]


@dataclass(frozen=True)
class Person:
    """Someone in the directory; ``name`` (first and last) is unique, the first name may not be."""

    id: int
    first: str
    last: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


@dataclass(frozen=True)
class Landmark:
    """A named place that distances are measured from."""

    id: int
    name: str
    x: float
    y: float


@dataclass(frozen=True)
class Venue:
    """A bookable room: capacity, opening hours (minutes), price per hour (dollars), position (km)."""

    id: int
    name: str
    capacity: int
    opens: int
    closes: int
    price_per_hour: int
    x: float
    y: float

    def price(self, duration: int) -> int:
        """Total price of a booking of ``duration`` minutes (whole dollars: prices are multiples of 10)."""
        return self.price_per_hour * duration // 60


@dataclass(frozen=True)
class Busy:
    """A block of a person's calendar (a busy slot); the label is free text."""

    person_id: int
    day: str
    start: int
    end: int
    label: str


@dataclass(frozen=True)
class Booking:
    """A venue booked for some people on one day; the note is free text."""

    id: int
    venue_id: int
    day: str
    start: int
    end: int
    attendees: tuple[int, ...]
    note: str = ""


@dataclass(frozen=True)
class World:
    """The static content of one episode's database."""

    people: tuple[Person, ...]
    landmarks: tuple[Landmark, ...]
    venues: tuple[Venue, ...]
    busy: tuple[Busy, ...]
    bookings: tuple[Booking, ...]

    def person(self, person_id: int) -> Person:
        return next(p for p in self.people if p.id == person_id)

    def venue(self, venue_id: int) -> Venue:
        return next(v for v in self.venues if v.id == venue_id)

    def landmark(self, name: str) -> Landmark:
        return next(m for m in self.landmarks if m.name == name)


@dataclass(frozen=True)
class WorldConfig:
    """Sizes and ranges of a generated world."""

    n_people: int = 8
    """People in the directory; two of them always share a first name."""
    n_venues: int = 9
    """Venues to choose from."""
    max_busy_per_day: int = 3
    """Most busy blocks per person and day (each day draws 0 to this many)."""
    n_bookings: int = 5
    """Existing bookings to attempt; a draw that does not fit anywhere is skipped."""
    area_km: float = 3.0
    """Venues and landmarks lie within this many km of the office along each axis."""

    def __post_init__(self):
        for name in ("n_people", "n_venues", "max_busy_per_day", "n_bookings"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if isinstance(self.area_km, bool) or not isinstance(self.area_km, (int, float)):
            raise ValueError(f"area_km must be a number, got {self.area_km!r}")
        if not 4 <= self.n_people <= len(FIRST_NAMES):
            raise ValueError(f"n_people must be between 4 and {len(FIRST_NAMES)}, got {self.n_people}")
        if not 2 <= self.n_venues <= len(VENUE_NAMES):
            raise ValueError(f"n_venues must be between 2 and {len(VENUE_NAMES)}, got {self.n_venues}")
        if not 0 <= self.max_busy_per_day <= 8:
            raise ValueError(f"max_busy_per_day must be between 0 and 8, got {self.max_busy_per_day}")
        if not 0 <= self.n_bookings <= 50:
            raise ValueError(f"n_bookings must be between 0 and 50, got {self.n_bookings}")
        if not 0.5 <= self.area_km <= 50:
            raise ValueError(f"area_km must be between 0.5 and 50, got {self.area_km}")


def pick(rng: np.random.Generator, options: tuple | list):
    """One element of ``options``, uniformly (``rng.choice`` costs far more on a short list)."""
    return options[int(rng.integers(len(options)))]


def generate_world(rng: np.random.Generator, config: WorldConfig = WorldConfig()) -> World:
    """Draw a world from ``rng`` (every random choice comes from it, so a seed reproduces the world)."""
    n = config.n_people
    firsts = [str(f) for f in rng.choice(FIRST_NAMES, size=n - 1, replace=False)]
    firsts.append(firsts[int(rng.integers(n - 1))])  # one shared first name: requests can be ambiguous
    lasts = [str(s) for s in rng.choice(LAST_NAMES, size=n, replace=False)]
    people = tuple(Person(id=k + 1, first=firsts[i], last=lasts[k]) for k, i in enumerate(rng.permutation(n)))

    busy = []
    for person in people:
        for day in DAYS:
            for _ in range(int(rng.integers(0, config.max_busy_per_day + 1))):
                length = pick(rng, DURATIONS)
                start = int(rng.integers(WORK_START // GRID, (WORK_END - length) // GRID + 1)) * GRID
                busy.append(Busy(person.id, day, start, start + length, pick(rng, BUSY_LABELS)))

    area = config.area_km
    landmarks = [Landmark(1, "office", 0.0, 0.0)] + [
        Landmark(k + 1, name, *(round(float(c), 2) for c in rng.uniform(-area / 2, area / 2, size=2)))
        for k, name in enumerate(LANDMARKS[1:], start=1)
    ]
    venues = []
    for k, name in enumerate(rng.choice(VENUE_NAMES, size=config.n_venues, replace=False)):
        opens = pick(rng, (7 * 60, 7 * 60 + 30, 8 * 60, 8 * 60 + 30, 9 * 60, 10 * 60))
        closes = pick(rng, (16 * 60, 17 * 60, 18 * 60, 20 * 60, 22 * 60))
        x, y = (round(float(c), 2) for c in rng.uniform(-area, area, size=2))
        venues.append(
            Venue(
                id=k + 1,
                name=str(name),
                capacity=pick(rng, (2, 4, 6, 8, 12, 20)),
                opens=opens,
                closes=closes,
                price_per_hour=int(rng.integers(4, 25)) * 10,
                x=x,
                y=y,
            )
        )

    bookings: list[Booking] = []
    for _ in range(config.n_bookings):
        venue = pick(rng, venues)
        day = pick(rng, DAYS)
        length = pick(rng, DURATIONS)
        size = int(rng.integers(1, min(3, venue.capacity) + 1))
        attendees = tuple(sorted(int(i) for i in rng.choice([p.id for p in people], size=size, replace=False)))
        start = int(rng.integers(WORK_START // GRID, (WORK_END - length) // GRID + 1)) * GRID
        note = pick(rng, NOTES)
        end = start + length
        taken = [(b.start, b.end) for b in bookings if b.venue_id == venue.id and b.day == day]
        blocked = [(b.start, b.end) for b in busy if b.person_id in attendees and b.day == day]
        blocked += [(b.start, b.end) for b in bookings if b.day == day and set(b.attendees) & set(attendees)]
        fits = venue.opens <= start and end <= venue.closes
        if fits and not any(overlaps(start, end, s, e) for s, e in taken + blocked):
            bookings.append(Booking(len(bookings) + 1, venue.id, day, start, end, attendees, note))
    return World(people=people, landmarks=tuple(landmarks), venues=tuple(venues), busy=tuple(busy), bookings=tuple(bookings))
