"""The booking database: schema, canonical state, copies, and no leaks over 1,000 episodes."""

import copy
import gc
import os
import pickle
import tempfile

import numpy as np
import pytest

import marft_envs
from marft_envs.tasks.booking.db import BookingDB, open_databases
from marft_envs.tasks.booking.scripted import oracle, random_tool_policy
from marft_envs.tasks.booking.world import WorldConfig, generate_world


@pytest.fixture
def world():
    return generate_world(np.random.default_rng(0))


def test_the_database_holds_the_world(world):
    db = BookingDB(world)
    counts = {t: db.query(f"SELECT count(*) FROM {t}")[0][0] for t in ("people", "venues", "landmarks", "busy_slots")}
    assert counts == {"people": len(world.people), "venues": len(world.venues), "landmarks": 4, "busy_slots": len(world.busy)}
    assert db.canonical_bookings() == tuple(sorted((b.venue_id, b.day, b.start, b.end, b.attendees) for b in world.bookings))
    assert db.integrity_errors() == []
    db.close()


def test_canonical_state_ignores_ids_row_order_notes_and_cancelled_rows(world):
    a, b = BookingDB(world), BookingDB(world)
    # The same booking made in another order, with other ids and notes, plus a booking made and cancelled.
    a.execute("INSERT INTO bookings (id, venue_id, day, start_min, end_min, note) VALUES (50, 1, 'Fri', 480, 540, 'x')")
    a.execute("INSERT INTO booking_attendees VALUES (50, 1)")
    b.execute("INSERT INTO bookings (id, venue_id, day, start_min, end_min, status) VALUES (70, 2, 'Fri', 480, 540, 'cancelled')")
    b.execute("INSERT INTO booking_attendees VALUES (70, 2)")
    b.execute("INSERT INTO bookings (id, venue_id, day, start_min, end_min, note) VALUES (60, 1, 'Fri', 480, 540, 'other')")
    b.execute("INSERT INTO booking_attendees VALUES (60, 1)")
    assert a.canonical_bookings() == b.canonical_bookings()
    assert a.dump() != b.dump()
    b.execute("INSERT INTO booking_attendees VALUES (60, 2)")  # a different attendee list does count
    assert a.canonical_bookings() != b.canonical_bookings()
    a.close(), b.close()


def test_integrity_errors_name_the_broken_invariants(world):
    db = BookingDB(world)
    db.execute("INSERT INTO bookings (id, venue_id, day, start_min, end_min) VALUES (90, 1, 'Mon', 480, 600)")
    db.execute("INSERT INTO bookings (id, venue_id, day, start_min, end_min) VALUES (91, 1, 'Mon', 540, 660)")
    db.execute("INSERT INTO booking_attendees VALUES (90, 1)")
    db.execute("INSERT INTO booking_attendees VALUES (91, 1)")
    db.execute("INSERT INTO bookings (id, venue_id, day, start_min, end_min) VALUES (92, 2, 'Mon', 480, 500)")
    errors = db.integrity_errors()
    assert "bookings 90 and 91 overlap at the same venue" in errors
    assert "person 1 is in overlapping bookings 90 and 91" in errors
    assert "booking 92 has no attendees" in errors
    db.close()


def test_copies_image_and_pickle_are_independent(world):
    db = BookingDB(world)
    twin = copy.deepcopy(db)
    restored = pickle.loads(pickle.dumps(db))
    from_image = BookingDB.from_image(db.image())
    db.execute("UPDATE bookings SET status = 'cancelled'")
    for other in (twin, restored, from_image):
        assert other.canonical_bookings() != db.canonical_bookings()
        assert other.dump()["people"] == db.dump()["people"]
    before = open_databases()
    for d in (db, twin, restored, from_image):
        d.close()
        d.close()  # idempotent
    assert open_databases() == before - 4


def test_file_storage_is_deleted_on_close_and_on_collection(world, tmp_path):
    db = BookingDB(world, storage="file", directory=str(tmp_path))
    assert os.path.exists(db.path) and db.path.startswith(str(tmp_path))
    assert os.listdir(tmp_path) == [os.path.basename(db.path)]  # no journal file next to it
    db.close()
    assert os.listdir(tmp_path) == []
    BookingDB(world, storage="file", directory=str(tmp_path))  # dropped without close()
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_bad_storage_and_world_options():
    with pytest.raises(ValueError, match="storage must be one of"):
        BookingDB(None, storage="disk")
    with pytest.raises(ValueError, match="n_venues must be between 2 and 16"):
        WorldConfig(n_venues=1)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


@pytest.mark.slow  # 1,000 episodes (~17 s)
def test_a_thousand_episodes_leave_no_files_or_connections(tmp_path, monkeypatch):
    # File storage, so that leaked databases would show as files; envs closed or just dropped.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gc.collect()
    live, fds = open_databases(), _open_fds()
    ids = ["marft/Booking-v0", "marft/BookingFixed-v0", "marft/BookingDecPOMDP-v0"]
    rng = np.random.default_rng(0)
    episodes = 0
    for k in range(10):
        env = marft_envs.make(ids[k % 3], storage="file")
        policy = oracle if k % 2 else random_tool_policy
        for _ in range(100):
            env.reset(seed=episodes)
            while env.agents:
                env.step({a: policy(a, env.observe(a), rng) for a in env.ready_agents()})
            episodes += 1
            assert len(os.listdir(tmp_path)) == 1  # the current episode's database, nothing more
        if k % 2:
            env.close()
        del env  # the others are only dropped: their finaliser must clean up
        gc.collect()
        assert os.listdir(tmp_path) == []
    assert episodes == 1000
    assert open_databases() == live
    assert _open_fds() <= fds
