"""The booking database: its SQLite schema, one fresh database per episode, and its canonical state.

:class:`BookingDB` holds one ``sqlite3`` connection filled from a :class:`~.world.World`, in memory
(the default) or in a temporary file (``storage="file"``, to inspect it with the ``sqlite3`` shell).
``close()`` closes the connection and deletes the file; a database that is garbage-collected without
``close()`` is released by a finaliser, so nothing outlives its env. ``open_databases()`` counts the
live ones (the leak tests use it).

Every tool call runs inside :meth:`BookingDB.transaction` (a SAVEPOINT): a call that fails leaves
the database exactly as it was. Queries are always parameterised.

Tables::

    people(id, first_name, last_name)
    busy_slots(id, person_id -> people, day, start_min, end_min, label)
    landmarks(id, name, x_km, y_km)
    venues(id, name, capacity, opens_min, closes_min, price_per_hour, x_km, y_km)
    bookings(id, venue_id -> venues, day, start_min, end_min, status 'active'|'cancelled', note)
    booking_attendees(booking_id -> bookings, person_id -> people)

The tables that matter for the reward are ``bookings`` and ``booking_attendees``; their canonical
state (:meth:`BookingDB.canonical_bookings`) is the multiset of active bookings as
``(venue_id, day, start_min, end_min, attendee ids)``: row order, booking ids (surrogate keys) and
free-text notes do not count, and neither do cancelled rows (history, not state).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import weakref
from collections.abc import Iterator
from typing import Any

from marft_envs.tasks.booking.world import World

SCHEMA = """
CREATE TABLE people (
    id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL
);
CREATE TABLE busy_slots (
    id INTEGER PRIMARY KEY,
    person_id INTEGER NOT NULL REFERENCES people(id),
    day TEXT NOT NULL CHECK (day IN ('Mon', 'Tue', 'Wed', 'Thu', 'Fri')),
    start_min INTEGER NOT NULL,
    end_min INTEGER NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    CHECK (0 <= start_min AND start_min < end_min AND end_min <= 1440)
);
CREATE TABLE landmarks (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    x_km REAL NOT NULL,
    y_km REAL NOT NULL
);
CREATE TABLE venues (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    capacity INTEGER NOT NULL CHECK (capacity > 0),
    opens_min INTEGER NOT NULL,
    closes_min INTEGER NOT NULL,
    price_per_hour INTEGER NOT NULL CHECK (price_per_hour >= 0),
    x_km REAL NOT NULL,
    y_km REAL NOT NULL,
    CHECK (0 <= opens_min AND opens_min < closes_min AND closes_min <= 1440)
);
CREATE TABLE bookings (
    id INTEGER PRIMARY KEY,
    venue_id INTEGER NOT NULL REFERENCES venues(id),
    day TEXT NOT NULL CHECK (day IN ('Mon', 'Tue', 'Wed', 'Thu', 'Fri')),
    start_min INTEGER NOT NULL,
    end_min INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'cancelled')),
    note TEXT NOT NULL DEFAULT '',
    CHECK (0 <= start_min AND start_min < end_min AND end_min <= 1440)
);
CREATE TABLE booking_attendees (
    booking_id INTEGER NOT NULL REFERENCES bookings(id),
    person_id INTEGER NOT NULL REFERENCES people(id),
    PRIMARY KEY (booking_id, person_id)
);
CREATE INDEX busy_by_person_day ON busy_slots(person_id, day);
CREATE INDEX bookings_by_venue_day ON bookings(venue_id, day);
"""

TABLES = ("people", "busy_slots", "landmarks", "venues", "bookings", "booking_attendees")
TABLES_THAT_MATTER = ("bookings", "booking_attendees")
STORAGES = ("memory", "file")

CanonicalBooking = tuple[int, str, int, int, tuple[int, ...]]
"""``(venue_id, day, start_min, end_min, sorted attendee ids)`` of one active booking."""

_live: weakref.WeakSet[BookingDB] = weakref.WeakSet()


def open_databases() -> int:
    """How many :class:`BookingDB` connections are open in this process."""
    return len(_live)


def _release(conn: sqlite3.Connection, path: str | None) -> None:
    # A finaliser: it must not refer to the BookingDB itself, or the object would never be collected.
    conn.close()
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


class BookingDB:
    """One episode's SQLite database, filled from a world; in memory or in a temp file."""

    def __init__(self, world: World | None, storage: str = "memory", directory: str | None = None):
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {list(STORAGES)}, got {storage!r}")
        self.storage = storage
        self.path: str | None = None
        if storage == "file":
            fd, self.path = tempfile.mkstemp(prefix="marft-booking-", suffix=".sqlite", dir=directory)
            os.close(fd)
        # isolation_level=None: we open transactions ourselves (SAVEPOINTs), sqlite3 must not.
        # check_same_thread=False: the finaliser may run on another thread; nothing shares a connection.
        self.conn = sqlite3.connect(self.path or ":memory:", isolation_level=None, check_same_thread=False)
        self._finalizer = weakref.finalize(self, _release, self.conn, self.path)
        _live.add(self)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        # A throwaway database: no journal file next to it, no fsync.
        self.conn.execute("PRAGMA journal_mode = MEMORY")
        self.conn.execute("PRAGMA synchronous = OFF")
        if world is not None:
            self._fill(world)

    def _fill(self, world: World) -> None:
        c = self.conn
        c.executescript(SCHEMA)
        with self.transaction():
            c.executemany("INSERT INTO people VALUES (?, ?, ?)", [(p.id, p.first, p.last) for p in world.people])
            c.executemany(
                "INSERT INTO busy_slots (person_id, day, start_min, end_min, label) VALUES (?, ?, ?, ?, ?)",
                [(b.person_id, b.day, b.start, b.end, b.label) for b in world.busy],
            )
            c.executemany("INSERT INTO landmarks VALUES (?, ?, ?, ?)", [(m.id, m.name, m.x, m.y) for m in world.landmarks])
            c.executemany(
                "INSERT INTO venues VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(v.id, v.name, v.capacity, v.opens, v.closes, v.price_per_hour, v.x, v.y) for v in world.venues],
            )
            c.executemany(
                "INSERT INTO bookings (id, venue_id, day, start_min, end_min, note) VALUES (?, ?, ?, ?, ?, ?)",
                [(b.id, b.venue_id, b.day, b.start, b.end, b.note) for b in world.bookings],
            )
            c.executemany("INSERT INTO booking_attendees VALUES (?, ?)", [(b.id, p) for b in world.bookings for p in b.attendees])

    # -- use -------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def query(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        """Rows of a parameterised query."""
        return self.conn.execute(sql, params).fetchall()

    def execute(self, sql: str, params: tuple | list = ()) -> sqlite3.Cursor:
        """Run a parameterised statement (inside :meth:`transaction` when it writes)."""
        return self.conn.execute(sql, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: an exception inside rolls every change back, then propagates."""
        self.conn.execute("SAVEPOINT tool_call")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK TO tool_call")
            self.conn.execute("RELEASE tool_call")
            raise
        self.conn.execute("RELEASE tool_call")

    def canonical_bookings(self) -> tuple[CanonicalBooking, ...]:
        """The reward's view of the tables that matter: active bookings, sorted, without ids or notes."""
        rows = self.query(
            "SELECT b.venue_id, b.day, b.start_min, b.end_min, group_concat(a.person_id) AS people "
            "FROM bookings b LEFT JOIN booking_attendees a ON a.booking_id = b.id "
            "WHERE b.status = 'active' GROUP BY b.id"
        )
        canon = [
            (r["venue_id"], r["day"], r["start_min"], r["end_min"], tuple(sorted(int(p) for p in (r["people"] or "").split(",") if p)))
            for r in rows
        ]
        return tuple(sorted(canon))

    def active_bookings(self) -> dict[int, CanonicalBooking]:
        """Active bookings by id, in canonical form (for assertions that need to know which rows are new)."""
        rows = self.query(
            "SELECT b.id, b.venue_id, b.day, b.start_min, b.end_min, group_concat(a.person_id) AS people "
            "FROM bookings b LEFT JOIN booking_attendees a ON a.booking_id = b.id "
            "WHERE b.status = 'active' GROUP BY b.id"
        )
        return {
            r["id"]: (
                r["venue_id"],
                r["day"],
                r["start_min"],
                r["end_min"],
                tuple(sorted(int(p) for p in (r["people"] or "").split(",") if p)),
            )
            for r in rows
        }

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, sorted: an exact snapshot for tests ("did this call change anything?")."""
        return {t: sorted(tuple(r) for r in self.query(f"SELECT * FROM {t}")) for t in TABLES}  # noqa: S608 (fixed names)

    def integrity_errors(self) -> list[str]:
        """SQLite's integrity and foreign-key checks plus the domain's invariants; empty when all hold."""
        errors = [r[0] for r in self.query("PRAGMA integrity_check") if r[0] != "ok"]
        errors += [f"foreign key violation in {r[0]} row {r[1]}" for r in self.query("PRAGMA foreign_key_check")]
        clash = self.query(
            "SELECT x.id, y.id FROM bookings x JOIN bookings y ON x.venue_id = y.venue_id AND x.day = y.day "
            "AND x.id < y.id AND x.start_min < y.end_min AND y.start_min < x.end_min "
            "WHERE x.status = 'active' AND y.status = 'active'"
        )
        errors += [f"bookings {a} and {b} overlap at the same venue" for a, b in clash]
        double = self.query(
            "SELECT ax.person_id, x.id, y.id FROM bookings x JOIN booking_attendees ax ON ax.booking_id = x.id "
            "JOIN bookings y ON x.day = y.day AND x.id < y.id AND x.start_min < y.end_min AND y.start_min < x.end_min "
            "JOIN booking_attendees ay ON ay.booking_id = y.id AND ay.person_id = ax.person_id "
            "WHERE x.status = 'active' AND y.status = 'active'"
        )
        errors += [f"person {p} is in overlapping bookings {a} and {b}" for p, a, b in double]
        empty = self.query("SELECT b.id FROM bookings b WHERE NOT EXISTS (SELECT 1 FROM booking_attendees a WHERE a.booking_id = b.id)")
        errors += [f"booking {r[0]} has no attendees" for r in empty]
        return errors

    def image(self) -> bytes:
        """The whole database as bytes (SQLite's serialisation): a cheap copy of a pristine state."""
        return self.conn.serialize()

    @classmethod
    def from_image(cls, image: bytes) -> BookingDB:
        """A new in-memory database holding ``image`` (from :meth:`image`)."""
        db = cls(None)
        db.conn.deserialize(image)
        return db

    # -- lifetime ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection and delete the file (idempotent)."""
        _live.discard(self)
        self._finalizer()

    def __deepcopy__(self, memo: dict) -> BookingDB:
        # A connection cannot be copied; copy the database's content into a new one instead.
        copy = BookingDB(None, storage=self.storage, directory=os.path.dirname(self.path) if self.path else None)
        if self.closed:
            copy.close()
        else:
            self.conn.backup(copy.conn)
        memo[id(self)] = copy
        return copy

    def __getstate__(self) -> dict[str, Any]:
        return {"storage": self.storage, "content": None if self.closed else self.conn.serialize()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        fresh = BookingDB(None, storage=state["storage"])
        if state["content"] is not None:
            source = sqlite3.connect(":memory:")
            source.deserialize(state["content"])
            source.backup(fresh.conn)
            source.close()
        self.__dict__.update(fresh.__dict__)
        # The finaliser and the live set were registered for `fresh`; move them to this object.
        fresh._finalizer.detach()
        self._finalizer = weakref.finalize(self, _release, self.conn, self.path)
        _live.discard(fresh)
        _live.add(self)

    def __repr__(self) -> str:
        where = self.path or ":memory:"
        return f"BookingDB({where}, {'closed' if self.closed else 'open'})"
