"""The booking reward: tables for each pure function, and the product of components."""

import dataclasses

import pytest
from booking_worlds import tiny_world

from marft_envs.rewards.booking import (
    calendar_credit,
    check_assertions,
    coordinator_credit,
    db_diff,
    db_match,
    grade,
    location_credit,
    outputs_stated,
    stated,
)
from marft_envs.tasks.booking.generator import Output, Task
from marft_envs.tasks.booking.rules import Choice
from marft_envs.testing import Case, check_table

WORLD = tiny_world()
OUTPUTS = (Output("venue", "Maple Room"), Output("day", "Tue"), Output("time", "09:30"), Output("price", "150"))
TASK = Task(
    kind="book",
    request="...",
    attendees=("Ana Costa", "Bo Chen"),
    day="Tue",
    duration=90,
    near="office",
    max_km=2.0,
    budget=200,
    choice=Choice(1, "Maple Room", 13 * 60, 14 * 60 + 30, 150),
    gold=(),
    required_outputs=OUTPUTS,
    candidate_venues=(1,),
)
INFEASIBLE = dataclasses.replace(TASK, kind="infeasible", choice=None, required_outputs=(Output("infeasible", "INFEASIBLE"),))
BEFORE = {1: (1, "Tue", 720, 780, (1,))}
NEW = (1, "Tue", 780, 870, (2, 3))


def test_stated():
    check_table(
        stated,
        [
            Case(("Booked the maple  room.", Output("venue", "Maple Room")), True, id="venue: case and spaces"),
            Case(("Booked Harbor Hall.", Output("venue", "Maple Room")), False, id="venue: another one"),
            Case(("next Tuesday", Output("day", "Tue")), True, id="day: full name"),
            Case(("on tue", Output("day", "Tue")), True, id="day: short, lower case"),
            Case(("on Thursday", Output("day", "Tue")), False, id="day: wrong"),
            Case(("at 9:30", Output("time", "09:30")), True, id="time: no leading zero"),
            Case(("at 09.30", Output("time", "09:30")), True, id="time: dot"),
            Case(("at 19:30", Output("time", "09:30")), False, id="time: another hour"),
            Case(("from 08:00-09:30", Output("time", "09:30")), True, id="time: as an end still counts"),
            Case(("$150 in total", Output("price", "150")), True, id="price: dollars sign"),
            Case(("$ 150.00", Output("price", "150")), True, id="price: cents"),
            Case(("150 dollars", Output("price", "150")), True, id="price: word"),
            Case(("$1500", Output("price", "150")), False, id="price: more digits"),
            Case(("$15", Output("price", "150")), False, id="price: fewer digits"),
            Case(("150 people", Output("price", "150")), False, id="price: a bare number"),
            Case(("INFEASIBLE: nothing fits", Output("infeasible", "INFEASIBLE")), True, id="infeasible: the word"),
            Case(("Sorry, I cannot book that.", Output("infeasible", "INFEASIBLE")), True, id="infeasible: cannot"),
            Case(("Booked it.", Output("infeasible", "INFEASIBLE")), False, id="infeasible: not said"),
        ],
    )


def test_outputs_need_a_message_with_all_of_them():
    check_table(
        outputs_stated,
        [
            Case(("Booked Maple Room on Tuesday at 09:30 for $150.", OUTPUTS), 1.0, id="all"),
            Case(("Booked Maple Room on Tuesday at 09:30.", OUTPUTS), 0.0, id="no price"),
            Case((None, OUTPUTS), 0.0, id="no final message"),
        ],
    )


def test_db_match_is_a_multiset_comparison():
    a, b = (1, "Tue", 780, 870, (2, 3)), (2, "Mon", 480, 540, (1,))
    check_table(
        db_match,
        [
            Case(([a, b], [b, a]), 1.0, id="order does not matter"),
            Case(([a, a], [a]), 0.0, id="a duplicate counts"),
            Case(([a], [a, b]), 0.0, id="a missing booking counts"),
        ],
    )
    assert db_diff([a, a], [a, b]) == {"extra": [a], "missing": [b]}


@pytest.mark.parametrize(
    "after, failed",
    [
        ({**BEFORE, 2: NEW}, []),
        (
            BEFORE,
            [
                "one_new_booking",
                "requested_day",
                "requested_length",
                "requested_attendees",
                "working_hours",
                "within_distance",
                "within_budget",
            ],
        ),
        (
            {**BEFORE, 2: NEW, 3: (2, "Mon", 540, 600, (1,))},
            [
                "one_new_booking",
                "requested_day",
                "requested_length",
                "requested_attendees",
                "working_hours",
                "within_distance",
                "within_budget",
            ],
        ),
        ({2: NEW}, ["kept_other_bookings"]),
        ({**BEFORE, 2: (1, "Wed", 780, 870, (2, 3))}, ["requested_day"]),
        ({**BEFORE, 2: (1, "Tue", 780, 840, (2, 3))}, ["requested_length"]),
        ({**BEFORE, 2: (1, "Tue", 780, 870, (1, 3))}, ["requested_attendees"]),
        ({**BEFORE, 2: (2, "Tue", 540, 630, (2, 3))}, ["within_distance"]),
        ({**BEFORE, 2: (1, "Tue", 1080, 1170, (2, 3))}, ["working_hours"]),
    ],
)
def test_feasible_task_assertions(after, failed):
    checks = check_assertions(TASK, WORLD, BEFORE, after)
    assert sorted(k for k, ok in checks.items() if not ok) == sorted(failed)


def test_budget_and_infeasible_and_reschedule_assertions():
    cheap = dataclasses.replace(TASK, budget=100)
    assert not check_assertions(cheap, WORLD, BEFORE, {**BEFORE, 2: NEW})["within_budget"]
    assert check_assertions(INFEASIBLE, WORLD, BEFORE, BEFORE) == {"booked_nothing": True, "kept_other_bookings": True}
    assert not check_assertions(INFEASIBLE, WORLD, BEFORE, {**BEFORE, 2: NEW})["booked_nothing"]
    moved = dataclasses.replace(TASK, kind="reschedule", cancel_id=1)
    assert check_assertions(moved, WORLD, BEFORE, {2: NEW})["cancelled_old_booking"]
    assert not check_assertions(moved, WORLD, BEFORE, {**BEFORE, 2: NEW})["cancelled_old_booking"]


def test_per_agent_credit():
    slots = {"people": ["Bo Chen", "Ana Costa"], "day": "Tue", "duration_minutes": 30, "free": []}
    check_table(
        lambda results: calendar_credit(TASK, results),
        [
            Case(([("calendar_0", "free_slots", slots)],), 1.0, id="the attendees, shorter windows"),
            Case(([("calendar_0", "free_slots", {**slots, "day": "Mon"})],), 0.0, id="wrong day"),
            Case(([("calendar_0", "free_slots", {**slots, "people": ["Bo Chen"]})],), 0.0, id="someone missing"),
            Case(([("calendar_0", "free_slots", {**slots, "duration_minutes": 120})],), 0.0, id="longer than asked"),
            Case(([],), 0.0, id="never asked"),
        ],
    )
    search = {"near": "office", "day": "Tue", "venues": [{"id": 1}, {"id": 2}]}
    check_table(
        lambda results: location_credit(TASK, results),
        [
            Case(([("location_0", "search_venues", search)],), 1.0, id="found the candidates"),
            Case(([("location_0", "search_venues", {**search, "venues": [{"id": 2}]})],), 0.0, id="missed one"),
            Case(([("location_0", "search_venues", {**search, "near": "hotel"})],), 0.0, id="wrong landmark"),
            Case(([("location_0", "search_venues", {k: v for k, v in search.items() if k != "day"})],), 0.0, id="no day"),
        ],
    )
    check_table(coordinator_credit, [Case(([True, False, True, True],), 0.75), Case(([],), 0.0)])


def test_the_team_reward_is_the_product_of_components():
    message = "Booked Maple Room on Tuesday at 13:00 for $150."
    task = dataclasses.replace(TASK, required_outputs=OUTPUTS[:2] + (Output("time", "13:00"), OUTPUTS[3]))
    good = grade(task, WORLD, before=BEFORE, after={**BEFORE, 2: NEW}, gold=[BEFORE[1], NEW], message=message, results=[])
    assert good.team == 1.0 and good.components == {"db": 1.0, "outputs": 1.0, "assertions": 1.0}
    assert good.own == {"calendar_0": 0.0, "location_0": 0.0, "booking_0": 1.0}
    silent = grade(task, WORLD, before=BEFORE, after={**BEFORE, 2: NEW}, gold=[BEFORE[1], NEW], message=None, results=[])
    assert silent.team == 0.0 and silent.components["db"] == 1.0 and silent.components["outputs"] == 0.0
    wrong = grade(task, WORLD, before=BEFORE, after={**BEFORE, 2: NEW}, gold=[BEFORE[1]], message=message, results=[])
    assert wrong.team == 0.0 and wrong.db_diff == {"extra": [NEW], "missing": []}
