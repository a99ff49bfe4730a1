"""Booking tools: parsing, schema checks, each tool's results and refusals, and hostile call sequences."""

import json

import pytest
from booking_worlds import tiny_world
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marft_envs.tasks.booking.actions import ActionError, looks_like_sql, parse_action, validate
from marft_envs.tasks.booking.db import BookingDB
from marft_envs.tasks.booking.tools import TOOLS, WRITES, ToolError, prepare, run_tool, tools_of


@pytest.fixture
def db():
    database = BookingDB(tiny_world())
    yield database
    database.close()


def act(db, agent, tool, **arguments):
    """Prepare and run a database tool call as ``agent`` would send it."""
    return run_tool(db, prepare(json.dumps({"name": tool, "arguments": arguments}), agent))


# -- parsing and schemas -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty action"),
        ("book it please", "malformed JSON"),
        ('{"name": "wait"', "malformed JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"arguments": {}}', 'needs "name"'),
        ('{"name": "wait", "extra": 1}', "unexpected keys ['extra']"),
        ('{"name": "wait", "arguments": [1]}', '"arguments" must be a JSON object'),
        ('{"name": "wait", "arguments": "not json"}', "not a JSON object"),
        ('{"name": "wait", "arguments": {"x": NaN}}', "malformed JSON (NaN is not JSON)"),
        ("[" * 100_000, "the action is 100000 characters"),
        ("[" * 3000 + "]" * 3000, "nested too deeply"),
    ],
)
def test_malformed_actions_say_what_to_fix(text, message):
    with pytest.raises(ActionError) as err:
        parse_action(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_fences_and_string_arguments_are_tolerated():
    fenced = '```json\n{"name": "free_slots", "arguments": {"people": ["Bo"], "day": "Tue"}}\n```'
    assert parse_action(fenced).arguments == {"people": ["Bo"], "day": "Tue"}
    openai_style = json.dumps({"name": "free_slots", "arguments": json.dumps({"people": ["Bo"], "day": "Tue"})})
    assert parse_action(openai_style).arguments == {"people": ["Bo"], "day": "Tue"}
    assert parse_action('{"name": "wait"}').arguments == {}


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"people": "Bo", "day": "Tue"}, "arguments.people must be an array"),
        ({"people": ["Bo"], "day": "Tuesday"}, "arguments.day must be one of"),
        ({"people": ["Bo"]}, "missing required ['day']"),
        ({"people": ["Bo"], "day": "Tue", "duration_minutes": 90.0}, "must be an integer"),
        ({"people": ["Bo"], "day": "Tue", "duration_minutes": True}, "must be an integer"),
        ({"people": ["Bo"], "day": "Tue", "duration_minutes": 95}, "multiple of 15"),
        ({"people": ["Bo"], "day": "Tue", "duration_minutes": 6000}, "at most 600"),
        ({"people": [], "day": "Tue"}, "at least 1 items"),
        ({"people": ["Bo", "Bo"], "day": "Tue"}, "lists an item twice"),
        ({"people": [""], "day": "Tue"}, "must not be empty"),
        ({"people": ["Bo"], "day": "Tue", "room": 1}, "unknown keys"),
    ],
)
def test_schema_violations(arguments, message):
    with pytest.raises(ActionError) as err:
        validate(arguments, TOOLS["free_slots"].parameters)
    assert message in str(err.value)


def test_unknown_and_foreign_tools():
    with pytest.raises(ActionError, match="unknown tool 'drop_tables'; your tools: find_people, free_slots, wait"):
        prepare('{"name": "drop_tables"}', "calendar_0")
    with pytest.raises(ActionError, match="create_booking is the booking agent's tool"):
        prepare('{"name": "create_booking", "arguments": {}}', "calendar_0")
    assert tools_of("coordinator_0") == ("plan",)


@pytest.mark.parametrize(
    "text, is_sql",
    [
        ("Ana'; DROP TABLE bookings;--", True),
        ("x' OR '1'='1", True),
        ("1 UNION SELECT name FROM people", True),
        ("a /* comment */", True),
        ("DELETE FROM bookings", True),
        ("x or 1=1", True),
        ("PRAGMA foreign_keys", True),
        ("Ana Silva", False),
        ("quarterly planning", False),
        ("Bo O'Brien", False),
        ("select a room", False),
        ("update the team", False),
        ("Q3 planning; bring laptops", False),
        ("prep -- slides first", False),
        ("'--", True),
        ("x; SELECT 1", True),
    ],
)
def test_looks_like_sql(text, is_sql):
    assert looks_like_sql(text) is is_sql


def test_sql_text_in_arguments_is_refused_before_anything_runs(db):
    before = db.dump()
    with pytest.raises(ActionError, match="not SQL"):
        act(
            db,
            "booking_0",
            "create_booking",
            venue_id=1,
            day="Tue",
            start="08:00",
            duration_minutes=30,
            attendees=["Bo"],
            note="'); DELETE FROM bookings; --",
        )
    with pytest.raises(ActionError, match="not SQL"):
        act(db, "calendar_0", "free_slots", people=["Ana' OR '1'='1"], day="Tue")
    assert db.dump() == before


# -- each tool ---------------------------------------------------------------------------------------


def test_find_people_and_ambiguous_names(db):
    assert act(db, "calendar_0", "find_people", name="ana")["matches"] == ["Ana Silva", "Ana Costa"]
    assert act(db, "calendar_0", "find_people", name="Ch")["matches"] == ["Bo Chen"]
    with pytest.raises(ToolError, match="'Ana' is ambiguous: it could be Ana Silva and Ana Costa; use the full name"):
        act(db, "calendar_0", "free_slots", people=["Ana", "Bo"], day="Tue")
    with pytest.raises(ToolError, match="nobody called 'Zed'"):
        act(db, "calendar_0", "free_slots", people=["Zed"], day="Tue")
    with pytest.raises(ToolError, match="Bo Chen is listed twice"):
        act(db, "calendar_0", "free_slots", people=["Bo", "bo  chen"], day="Tue")


def test_free_slots_merges_calendars_and_bookings(db):
    # Ana Silva: busy 9-10, booked 12-13; Bo: 9:30-11, 15-16.
    result = act(db, "calendar_0", "free_slots", people=["Ana Silva", "Bo"], day="Tue", duration_minutes=60)
    assert result == {
        "people": ["Ana Silva", "Bo Chen"],
        "day": "Tue",
        "duration_minutes": 60,
        "free": [["08:00", "09:00"], ["11:00", "12:00"], ["13:00", "15:00"], ["16:00", "18:00"]],
    }
    assert act(db, "calendar_0", "free_slots", people=["Bo"], day="Mon")["free"] == [["08:00", "18:00"]]


def test_search_venues_filters_and_day_bookings(db):
    result = act(db, "location_0", "search_venues", day="Tue", near="station")
    assert [(v["name"], v["distance_km"], v["booked"]) for v in result["venues"]] == [
        ("Harbor Hall", 1.0, []),
        ("Maple Room", 4.12, [["12:00", "13:00"]]),
    ]
    assert act(db, "location_0", "search_venues", max_distance_km=2, min_capacity=3)["venues"][0]["name"] == "Maple Room"
    assert act(db, "location_0", "search_venues", max_price_per_hour=50)["venues"] == []
    assert "booked" not in act(db, "location_0", "search_venues")["venues"][0]
    assert act(db, "location_0", "get_distance", venue_id=2, near="office")["distance_km"] == 3.0
    with pytest.raises(ToolError, match="there is no venue 9"):
        act(db, "location_0", "get_distance", venue_id=9)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"venue_id": 7}, "there is no venue 7"),
        ({"start": "07:30"}, "open 08:00-18:00; 07:30-08:30 does not fit"),
        ({"start": "12:30"}, "already booked 12:00-13:00 on Tue"),
        ({"start": "09:30"}, "Ana Silva is busy 09:00-10:00 on Tue"),
        ({"start": "10:00", "attendees": ["Ana Costa", "Bo"]}, "Bo Chen is busy 09:30-11:00 on Tue"),
        ({"start": "08:10"}, "not on the quarter hour"),
        ({"start": "23:30"}, "would end after midnight"),
        ({"venue_id": 2, "attendees": ["Ana Silva", "Ana Costa", "Bo"], "start": "11:00"}, "holds 2 people, not 3"),
        ({"attendees": ["Ana"]}, "ambiguous"),
    ],
)
def test_create_booking_refusals_change_nothing(db, overrides, message):
    args = {"venue_id": 1, "day": "Tue", "start": "08:00", "duration_minutes": 60, "attendees": ["Ana Silva"], **overrides}
    before = db.dump()
    with pytest.raises(ToolError, match=message):
        act(db, "booking_0", "create_booking", **args)
    assert db.dump() == before


def test_create_list_and_cancel(db):
    made = act(
        db,
        "booking_0",
        "create_booking",
        venue_id=1,
        day="Tue",
        start="13:00",
        duration_minutes=90,
        attendees=["Ana Costa", "Bo"],
        note="planning",
    )
    assert made == {
        "booking_id": 2,
        "venue_id": 1,
        "venue": "Maple Room",
        "day": "Tue",
        "start": "13:00",
        "end": "14:30",
        "attendees": ["Ana Costa", "Bo Chen"],
        "total_price": 150,
    }
    listed = act(db, "booking_0", "list_bookings", person="Bo")["bookings"]
    assert [(b["id"], b["attendees"]) for b in listed] == [(2, ["Ana Costa", "Bo Chen"])]
    # Bo is now busy 13:00-14:30: free_slots sees the booking.
    assert ["13:00", "15:00"] not in act(db, "calendar_0", "free_slots", people=["Bo"], day="Tue")["free"]
    assert act(db, "booking_0", "cancel_booking", booking_id=2) == {"cancelled": 2}
    with pytest.raises(ToolError, match="already cancelled"):
        act(db, "booking_0", "cancel_booking", booking_id=2)
    with pytest.raises(ToolError, match="there is no booking 9"):
        act(db, "booking_0", "cancel_booking", booking_id=9)
    assert [b["id"] for b in act(db, "booking_0", "list_bookings")["bookings"]] == [1]
    assert db.integrity_errors() == []


def test_every_tool_spec_is_function_calling_style():
    for tool in TOOLS.values():
        spec = tool.spec()
        assert spec["type"] == "function" and spec["function"]["name"] == tool.name
        params = spec["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        json.dumps(spec)  # plain JSON


# -- hostile call sequences (property-based) ---------------------------------------------------------

NAMES = [
    "Ana",
    "Ana Silva",
    "Ana Costa",
    "Bo",
    "bo chen",
    "Zed",
    "",
    "Ana'; DROP TABLE people;--",
    "x' OR '1'='1",
    "\x00",
    "名前",
    "a" * 70,
]
SCALARS = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.sampled_from(NAMES + ["Tue", "Mon", "09:00", "12:30", "24:00", "9:00", "1; DROP TABLE bookings"]),
)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["people", "day", "x"]), inner, max_size=3)),
    max_leaves=8,
)


GOOD_NAMES = ["Ana Silva", "Ana Costa", "Bo", "bo chen"]


def well_formed_call():
    """Calls that pass the schema and often succeed: they reach the tools' writes and their own refusals."""
    people = st.lists(st.sampled_from(GOOD_NAMES * 3 + NAMES), min_size=1, max_size=3, unique=True)
    return st.one_of(
        st.builds(
            lambda p, d, m: ("calendar_0", {"name": "free_slots", "arguments": {"people": p, "day": d, "duration_minutes": m}}),
            people,
            st.sampled_from(["Mon", "Tue", "Wed"]),
            st.sampled_from([15, 30, 60, 90, 120, 600]),
        ),
        st.builds(
            lambda v, d, s, m, a, n: (
                "booking_0",
                {
                    "name": "create_booking",
                    "arguments": {"venue_id": v, "day": d, "start": s, "duration_minutes": m, "attendees": a, "note": n},
                },
            ),
            st.sampled_from([1, 1, 2, 3]),
            st.sampled_from(["Mon", "Mon", "Tue", "Wed"]),
            st.sampled_from(["07:00", "08:00", "09:00", "09:15", "10:00", "11:00", "12:30", "13:00", "16:45", "23:45"]),
            st.sampled_from([15, 30, 30, 60, 120, 600]),
            st.lists(st.sampled_from(GOOD_NAMES * 4 + NAMES), min_size=1, max_size=2, unique=True),
            st.sampled_from(["", "planning", "'); DELETE FROM bookings; --", "x" * 300]),
        ),
        st.builds(lambda b: ("booking_0", {"name": "cancel_booking", "arguments": {"booking_id": b}}), st.integers(0, 5)),
        st.builds(
            lambda p, d: ("booking_0", {"name": "list_bookings", "arguments": {"person": p, "day": d}}),
            st.sampled_from(NAMES),
            st.sampled_from(["Tue", "Sun"]),
        ),
        st.builds(
            lambda d, n, k: ("location_0", {"name": "search_venues", "arguments": {"day": d, "near": n, "max_distance_km": k}}),
            st.sampled_from(["Tue", "Fri"]),
            st.sampled_from(["office", "station", "moon"]),
            st.floats(-1, 200, allow_nan=False),
        ),
    ).map(lambda pair: (pair[0], json.dumps(pair[1])))


AGENTS = st.sampled_from(["calendar_0", "location_0", "booking_0", "coordinator_0"])
HOSTILE_TEXTS = st.one_of(
    st.builds(
        lambda name, args: json.dumps({"name": name, "arguments": args}),
        st.sampled_from(sorted(TOOLS) + ["drop"]),
        st.dictionaries(st.sampled_from(["venue_id", "day", "start", "attendees", "people", "booking_id", "note"]), JSONISH, max_size=5),
    ),
    st.text(max_size=60),
    st.sampled_from(
        [
            "[" * 3000,
            '{"name": "wait", "arguments": {"a": NaN}}',
            '{"name": 5}',
            "null",
            '"wait"',
            '{"name": "cancel_booking", "arguments": "{\\"booking_id\\": 1}"}',
            '{"name": "cancel_booking", "arguments": {"booking_id": 1, "booking_id": 1}}',
        ]
    ),
)
ACTIONS = st.one_of(well_formed_call(), st.tuples(AGENTS, HOSTILE_TEXTS))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(ACTIONS, min_size=1, max_size=12))
def test_random_call_sequences_never_raise_corrupt_or_half_write(texts):
    db = BookingDB(tiny_world())
    try:
        for agent, text in texts:
            before = db.dump()
            try:
                call = prepare(text, agent)
                if TOOLS[call.name].run is None:
                    continue  # plan/ask_user/respond/wait: the env runs them (tested with the env)
                run_tool(db, call)
            except (ActionError, ToolError):
                assert db.dump() == before, f"a failed call changed the database: {text!r}"
            else:
                if call.name not in WRITES:
                    assert db.dump() == before, f"a read-only call changed the database: {text!r}"
            assert db.integrity_errors() == [], text
    finally:
        db.close()


def test_a_failing_write_rolls_back_its_earlier_statements(db):
    # A tool that fails after its first statement (create_booking inserts the booking, then its
    # attendees) must leave nothing behind: the transaction rolls the first statement back.
    before = db.dump()
    with pytest.raises(ToolError, match="boom"):
        with db.transaction():
            db.execute("INSERT INTO bookings (venue_id, day, start_min, end_min) VALUES (1, 'Mon', 540, 600)")
            raise ToolError("boom after the first insert")
    assert db.dump() == before and db.integrity_errors() == []
