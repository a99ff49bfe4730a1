"""Booking envs: the oracle solves every task, random play does not, graphs, errors, rewards, hostile play."""

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import marft_envs
from marft_envs.tasks.booking import Booking, BookingDecPOMDP, BookingFixed
from marft_envs.tasks.booking.scripted import call, oracle, random_tool_policy
from marft_envs.tasks.booking.tools import WRITES
from marft_envs.testing import check_env
from marft_envs.testing.checks import rollout_layered

IDS = ["marft/Booking-v0", "marft/BookingFixed-v0", "marft/BookingDecPOMDP-v0"]
N_TASKS = 500


def play(env, policy, seed, rng=None, options=None):
    """One whole episode through the layered interface; returns the env's grade."""
    rng = rng or np.random.default_rng(seed)
    env.reset(seed=seed, options=options)
    while env.agents:
        env.step({a: policy(a, env.observe(a), rng) for a in env.ready_agents()})
    return env.last_grade


@pytest.mark.parametrize("env_id", IDS)
def test_the_oracle_solves_every_one_of_500_tasks(env_id):
    env = marft_envs.make(env_id)
    kinds = set()
    for seed in range(N_TASKS):
        g = play(env, oracle, seed)
        assert g.team == 1.0, f"{env_id} seed {seed} ({env.task.kind}): {g.components} {g.assertions} {g.db_diff}"
        assert all(g.own.values()), (seed, g.own)  # every agent earned its own credit too
        kinds.add((env.task.kind, env.task.feasible))
    assert kinds == {("book", True), ("clarify", True), ("reschedule", True), ("infeasible", False)}
    env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_random_play_scores_at_most_five_percent(env_id):
    env = marft_envs.make(env_id)
    rng = np.random.default_rng(0)
    scores = [play(env, random_tool_policy, seed, rng).team for seed in range(N_TASKS)]
    assert np.mean(scores) <= 0.05
    env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_every_checker_passes_with_the_oracle_and_random_tool_calls(env_id):
    for policy in (oracle, random_tool_policy):
        report = check_env(env_id, seeds=range(5), num_cycles=50, policy=policy)
        assert "marft.determinism" in report.passed
    if env_id == "marft/BookingDecPOMDP-v0":
        assert "marft.dec_pomdp_equivalence" in report.passed


def test_coordinator_plan_sets_the_round_graph():
    env = Booking()
    env.reset(seed=1, options={"kind": "book"})
    assert env.ready_agents() == ["coordinator_0"]
    assert env.infos["booking_0"]["parents"] == ["coordinator_0"]
    env.step(
        {
            "coordinator_0": call(
                "plan", act=["calendar_0", "location_0", "booking_0"], depends_on={"booking_0": ["calendar_0", "location_0"]}
            )
        }
    )
    assert env.ready_agents() == ["calendar_0", "location_0"]
    assert env.infos["booking_0"]["parents"] == ["coordinator_0", "calendar_0", "location_0"]
    env.step({a: oracle(a, env.observe(a)) for a in env.ready_agents()})
    text = env.observe("booking_0")["text"]
    assert "This round so far:" in text and "calendar_0 free_slots(" in text and "location_0 search_venues(" in text
    result = env.step({"booking_0": oracle("booking_0", env.observe("booking_0"))})
    assert result.infos["booking_0"]["tool"] == "create_booking" and result.infos["booking_0"]["error"] is None


def test_workers_left_out_of_the_plan_are_ignored():
    env = Booking()
    env.reset(seed=1, options={"kind": "book"})
    env.step({"coordinator_0": call("plan", act=["location_0"])})
    assert env.ready_agents() == ["calendar_0", "location_0", "booking_0"]  # one layer: nobody depends on anyone
    assert "You are not scheduled this round" in env.observe("calendar_0")["text"]
    assert "not scheduled" not in env.observe("location_0")["text"]
    before = env.db.dump()
    bogus = call("create_booking", venue_id=1, day="Mon", start="08:00", duration_minutes=30, attendees=["x"])
    result = env.step({"calendar_0": "{{{", "location_0": call("wait"), "booking_0": bogus})
    assert result.infos["calendar_0"] == {"tool": None, "error": None, "scheduled": False}
    assert result.infos["booking_0"]["scheduled"] is False and env.db.dump() == before
    assert not any(e.agent == "calendar_0" for e in env.board if e.shown)


@pytest.mark.parametrize(
    "plan, message",
    [
        ("plan it", "malformed JSON"),
        (call("plan", act=["calendar_0"], depends_on={"booking_0": ["calendar_0"]}), "depends_on names 'booking_0', which is not in act"),
        (call("plan", act=["calendar_0", "booking_0"], depends_on={"booking_0": ["location_0"]}), "booking_0 depends on ['location_0']"),
        (
            call("plan", act=["calendar_0", "booking_0"], depends_on={"booking_0": ["calendar_0"], "calendar_0": ["booking_0"]}),
            "the plan is not a DAG: dependency cycle",
        ),
        (call("plan", act=["booking_0"], depends_on={"booking_0": ["booking_0"]}), "depends on itself"),
        (call("plan", act=["coordinator_0"]), "must be one of"),
        (call("free_slots", people=["Bo"], day="Mon"), "free_slots is the calendar agent's tool"),
    ],
)
def test_a_bad_plan_loses_the_round(plan, message):
    env = Booking()
    env.reset(seed=1)
    env.step({"coordinator_0": plan})
    assert message in env.current["coordinator_0"].error
    assert env.ready_agents() == ["calendar_0", "location_0", "booking_0"]
    assert all("You are not scheduled" in env.observe(w)["text"] for w in ("calendar_0", "location_0", "booking_0"))
    env.step({w: call("wait") for w in env.ready_agents()})
    assert env.plans == [False]
    assert message in env.observe("coordinator_0")["text"].splitlines()[-1]  # the board tells it what went wrong


def test_errors_are_observations_and_leave_the_database_alone():
    env = BookingFixed()
    env.reset(seed=2)
    before = env.db.dump()
    result = None
    while result is None:
        result = env.step(
            {
                a: {
                    "calendar_0": "not json",
                    "location_0": '{"name": "drop_tables"}',
                    "booking_0": call(
                        "create_booking",
                        venue_id=1,
                        day="Mon",
                        start="08:00",
                        duration_minutes=30,
                        attendees=["Robert'); DROP TABLE people;--"],
                    ),
                }[a]
                for a in env.ready_agents()
            }
        )
    assert result.infos["calendar_0"]["error"].startswith("malformed JSON")
    assert result.infos["location_0"]["error"].startswith("unknown tool 'drop_tables'")
    assert "not SQL" in result.infos["booking_0"]["error"]
    assert env.db.dump() == before and set(result.rewards.values()) == {0.0} and env.agents
    text = env.observe("calendar_0")["text"]
    assert "[r1] calendar_0 (unreadable action) -> error: malformed JSON" in text
    assert "[r1] booking_0 create_booking(" in text


def test_episode_ends_on_respond_or_runs_out_of_rounds():
    env = BookingFixed(max_rounds=2)
    env.reset(seed=5)
    rounds = []
    while env.agents:
        rounds.append(env.step({a: call("wait") for a in env.ready_agents()}))
    first, last = [r for r in rounds if r is not None]
    assert set(first.rewards.values()) == {0.0} and not any(first.truncations.values())
    assert all(last.truncations.values()) and not any(last.terminations.values()) and env.agents == []
    assert last.infos["booking_0"]["solved"] is False
    assert set(last.infos["booking_0"]["reward_components"]) == {"db", "outputs", "assertions", "team", "own"}

    env.reset(seed=5)
    env.step({a: call("wait") for a in ("calendar_0", "location_0")})
    result = env.step({"booking_0": call("respond", message="All done!")})
    assert all(result.terminations.values()) and env.agents == [] and env.message == "All done!"


@pytest.mark.parametrize(
    "credit, expected",
    [
        ("team", {"calendar_0": 1.0, "location_0": 1.0, "booking_0": 1.0}),
        ("last", {"calendar_0": 0.0, "location_0": 0.0, "booking_0": 1.0}),
        ("per_agent", {"calendar_0": 0.0, "location_0": 1.0, "booking_0": 1.0}),
    ],
)
def test_credit_modes(credit, expected):
    # The calendar agent only waits; the booking agent books the gold booking anyway (it peeks at the task):
    # the team succeeds, and per-agent credit tells the idle calendar agent apart.
    env = BookingFixed(credit=credit)
    env.reset(seed=0, options={"kind": "book"})
    gold = {g.name: g.arguments for g in env.task.gold}
    env.step({"calendar_0": call("wait"), "location_0": oracle("location_0", env.observe("location_0"))})
    env.step({"booking_0": call("create_booking", **gold["create_booking"])})
    env.step({"calendar_0": call("wait"), "location_0": call("wait")})
    result = env.step({"booking_0": call("respond", **gold["respond"])})
    assert result.rewards == expected and env.last_grade.team == 1.0


def test_calendar_credit_is_lost_when_it_never_asks_right():
    env = BookingFixed(credit="per_agent")
    env.reset(seed=0, options={"kind": "infeasible"})
    result = None
    while env.agents:
        actions = {a: oracle(a, env.observe(a)) if a != "calendar_0" else call("wait") for a in env.ready_agents()}
        result = env.step(actions) or result
    assert result.rewards["calendar_0"] == 0.0 and result.rewards["location_0"] == 1.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_rounds": 0}, "max_rounds must be an integer from 1 to 100"),
        ({"max_rounds": 2.5}, "max_rounds must be an integer from 1 to 100"),
        ({"credit": "everyone"}, "unknown credit mode 'everyone'"),
        ({"storage": "disk"}, "storage must be one of"),
        ({"kinds": {"lunch": 1}}, "unknown task kinds ['lunch']"),
        ({"world": {"n_rooms": 3}}, "unknown world fields ['n_rooms']"),
        ({"world": {"n_people": 1}}, "n_people must be between 4 and 20"),
        ({"world": {"n_venues": "9"}}, "n_venues must be an integer, got '9'"),
        ({"world": 3}, "world must be a WorldConfig or a dict"),
    ],
)
def test_bad_options_give_one_clear_line(kwargs, message):
    with pytest.raises(ValueError) as err:
        Booking(**kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_reset_option():
    env = BookingFixed()
    with pytest.raises(ValueError, match="options\\['kind'\\] must be one of"):
        env.reset(seed=0, options={"kind": "party"})


def test_views():
    par = marft_envs.make("marft/BookingDecPOMDP-v0", view="parallel")
    observations, infos = par.reset(seed=0)
    assert sorted(observations) == ["booking_0", "calendar_0", "location_0"] and infos["booking_0"]["parents"] == []
    with pytest.raises(ValueError, match="use the AEC view"):
        marft_envs.make("marft/BookingFixed-v0", view="parallel")
    assert "marft/BookingDecPOMDP-v0" in marft_envs.list_envs("parallel")
    assert "marft/Booking-v0" not in marft_envs.list_envs("parallel")
    aec = marft_envs.make("marft/Booking-v0", view="aec")
    aec.reset(seed=0)
    assert aec.agent_selection == "coordinator_0" and aec.state().startswith("Request: ")


def test_a_deep_copy_mid_episode_plays_on_identically():
    env = Booking()
    env.reset(seed=4)
    env.step({"coordinator_0": oracle("coordinator_0", env.observe("coordinator_0"))})
    twin = copy.deepcopy(env)
    assert twin.db is not env.db
    for e in (env, twin):
        while e.agents:
            e.step({a: oracle(a, e.observe(a)) for a in e.ready_agents()})
    assert env.board == twin.board and env.last_grade.team == twin.last_grade.team == 1.0
    env.close(), twin.close()


def test_observations_show_the_request_the_board_and_only_parents_results():
    env = BookingFixed()
    env.reset(seed=3, options={"kind": "book"})
    first = env.observe("calendar_0")["text"]
    assert first.startswith(f"Request: {env.task.request}\nRound 1 of 6.") and "Team board" not in first
    env.step({a: oracle(a, env.observe(a)) for a in env.ready_agents()})
    # location_0 is not calendar_0's parent: it does not see location_0's result of this round.
    assert "location_0" not in env.observe("calendar_0")["text"]
    assert "location_0 search_venues" in env.observe("booking_0")["text"]
    instructions = env.observe("booking_0")["instructions"]
    assert "Booking rules:" in instructions and '"name":"create_booking"' in instructions
    assert '"name":"free_slots"' in env.observe("calendar_0")["instructions"]


def test_render_is_a_transcript():
    env = Booking(render_mode="ansi")
    play(env, oracle, 4)
    text = env.render()
    assert text.startswith("Request: ") and "[r1] coordinator_0 plan(" in text
    assert text.splitlines()[-1] == "reward 1 {'db': 1.0, 'outputs': 1.0, 'assertions': 1.0}"
    assert Booking().render() is None


def test_determinism_through_a_scripted_rollout():
    traces = [rollout_layered(marft_envs.make("marft/Booking-v0"), 11, oracle) for _ in range(2)]
    assert traces[0] == traces[1]


# -- hostile play through the env (property-based) -----------------------------------------------------

ACTION = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            call("plan", act=["calendar_0", "location_0", "booking_0"], depends_on={"booking_0": ["calendar_0"]}),
            call("plan", act=["booking_0"], depends_on={"booking_0": ["booking_0"]}),
            call("plan", act=[]),
            call("wait"),
            call("respond", message="INFEASIBLE"),
            call("ask_user", question="Which one? how long?"),
            call("ask_user", question="'; DROP TABLE bookings; --"),
            call("free_slots", people=["Ana"], day="Tue"),
            call("search_venues", day="Tue"),
            call("list_bookings"),
            call("cancel_booking", booking_id=1),
            call("cancel_booking", booking_id=2),
            call("create_booking", venue_id=1, day="Mon", start="09:00", duration_minutes=30, attendees=["Ana"]),
            '{"name": "create_booking", "arguments": {"venue_id": "1 OR 1=1"}}',
            "[" * 4000,
            "\x00\x01",
        ]
    ),
    st.builds(
        lambda v, s, p: call(
            "create_booking",
            venue_id=v,
            day="Mon",
            start=s,
            duration_minutes=30,
            attendees=[p],
            note="'); DELETE FROM bookings; --" if v == 2 else "",
        ),
        st.integers(1, 10),
        st.sampled_from(["08:00", "10:00", "13:30", "16:00"]),
        st.sampled_from(["Ana", "Bo", "Kai", "Lena", "Mo"]),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env_index=st.integers(0, 2), seed=st.integers(0, 10_000), actions=st.lists(ACTION, min_size=1, max_size=30))
def test_hostile_play_never_raises_corrupts_or_half_writes(env_index, seed, actions):
    env = [Booking, BookingFixed, BookingDecPOMDP][env_index]()
    env.reset(seed=seed)
    for text in actions:
        if not env.agents:
            break
        agent = env.ready_agents()[0]  # one agent per step: exactly one action runs per step
        before = env.db.dump()
        env.step({agent: text})
        entry = env.current.get(agent) or next(e for e in reversed(env.board) if e.agent == agent)
        changed = env.db.dump() != before
        if changed:
            assert entry.error is None and entry.call.name in WRITES, (text, entry)
        assert env.db.integrity_errors() == []
    env.close()
