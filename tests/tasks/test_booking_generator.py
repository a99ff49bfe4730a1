"""Worlds and tasks: seeded, varied, and each gold booking checked by an independent brute force."""

import collections

import numpy as np
import pytest

from marft_envs.tasks.booking.db import BookingDB
from marft_envs.tasks.booking.generator import KINDS, generate_task, kind_weights
from marft_envs.tasks.booking.scripted import parse_request
from marft_envs.tasks.booking.user import DONT_KNOW, ScriptedUser
from marft_envs.tasks.booking.world import distance_km, generate_world

N_TASKS = 500


def draw(seed, kinds=None):
    rng = np.random.default_rng(seed)
    world = generate_world(rng)
    db = BookingDB(world)
    try:
        return world, generate_task(world, db, rng, kinds)
    finally:
        db.close()


@pytest.fixture(scope="module")
def tasks():
    return [draw(seed) for seed in range(N_TASKS)]


def brute_force(world, task):
    """The booking the rules call for, straight from the world's records (no tools, no SQL, no rules module)."""
    ids = {p.id for p in world.people if p.name in task.attendees}
    bookings = [b for b in world.bookings if b.id != task.cancel_id and b.day == task.day]
    busy = [(b.start, b.end) for b in world.busy if b.person_id in ids and b.day == task.day]
    busy += [(b.start, b.end) for b in bookings if ids & set(b.attendees)]
    mark = world.landmark(task.near)
    for start in range(8 * 60, 18 * 60 - task.duration + 1, 30):
        end = start + task.duration
        if any(s < end and start < e for s, e in busy):
            continue
        fits = [
            v
            for v in world.venues
            if v.capacity >= len(ids)
            and distance_km(v, mark) <= task.max_km
            and v.price(task.duration) <= task.budget
            and v.opens <= start
            and end <= v.closes
            and not any(b.venue_id == v.id and b.start < end and start < b.end for b in bookings)
        ]
        if fits:
            best = min(fits, key=lambda v: (v.price_per_hour, distance_km(v, mark), v.id))
            return best.id, start, end
    return None


def test_gold_bookings_match_an_independent_brute_force(tasks):
    for seed, (world, task) in enumerate(tasks):
        expected = brute_force(world, task)
        got = None if task.choice is None else (task.choice.venue_id, task.choice.start, task.choice.end)
        assert got == expected, f"seed {seed}: {task.kind} {task.request}"
        assert task.feasible == (task.kind != "infeasible")


def test_task_mix_covers_every_kind_and_reason(tasks):
    mix = collections.Counter((t.kind, t.reason or (t.clarification.topic if t.clarification else "")) for _, t in tasks)
    assert set(mix) == {
        ("book", ""),
        ("clarify", "duration"),
        ("clarify", "person"),
        ("reschedule", ""),
        ("infeasible", "budget"),
        ("infeasible", "calendar"),
        ("infeasible", "distance"),
    }
    assert all(n >= 20 for n in mix.values()), mix
    assert 0.15 < sum(not t.feasible for _, t in tasks) / len(tasks) < 0.35


def test_same_seed_same_world_and_task():
    (w1, t1), (w2, t2), (w3, t3) = draw(7), draw(7), draw(8)
    assert w1 == w2 and t1 == t2
    assert (w1, t1.request) != (w3, t3.request)


def test_every_world_has_exactly_one_shared_first_name(tasks):
    for world, _ in tasks[:100]:
        firsts = collections.Counter(p.first for p in world.people)
        assert sorted(firsts.values())[-2:] == [1, 2]
        assert len({p.name for p in world.people}) == len(world.people)


def test_requests_say_what_the_task_asks(tasks):
    for _world, task in tasks:
        r = parse_request(task.request)
        assert (r.day, r.near, r.max_km, r.budget) == (task.day, task.near, task.max_km, task.budget), task.request
        assert len(r.names) == len(task.attendees)
        missing_length = task.clarification is not None and task.clarification.topic == "duration"
        assert r.duration == (None if missing_length else task.duration), task.request
        if task.clarification is not None and task.clarification.topic == "person":
            assert task.clarification.mention in r.names  # named by the shared first name only


def test_gold_sequences_end_with_the_final_message(tasks):
    for _, task in tasks:
        names = [g.name for g in task.gold]
        assert names[-1] == "respond" and names.count("respond") == 1
        assert ("create_booking" in names) == task.feasible
        assert ("cancel_booking" in names) == (task.kind == "reschedule")
        assert ("ask_user" in names) == (task.kind == "clarify")


def test_scripted_user_answers_the_gold_question_and_nothing_else(tasks):
    for _, task in tasks:
        user = ScriptedUser(task)
        for step in task.gold:
            if step.name == "ask_user":
                assert user.answer(step.arguments["question"]) == task.clarification.answer
        assert user.answer("What is the budget?") == f"At most ${task.budget} in total."
        assert user.answer("Do you like jazz?") == DONT_KNOW
        assert user.answer("Do you like jazz?") == user.answer("Do you like jazz?")


def test_forced_kinds_and_bad_weights():
    for kind in KINDS:
        assert draw(3, {kind: 1.0})[1].kind == kind
    with pytest.raises(ValueError, match="unknown task kinds \\['lunch'\\]"):
        kind_weights({"lunch": 1.0})
    with pytest.raises(ValueError, match="positive sum"):
        kind_weights({"book": 0.0})
