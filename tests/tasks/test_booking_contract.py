"""Booking and the env contract: tool calls run in ``on_action``, the graph is a pure query, text stays
valid, prompts come from a profile."""

import json

import numpy as np
import pytest

import marft_envs
from marft_envs.tasks.booking import Booking, BookingDecPOMDP, BookingFixed
from marft_envs.tasks.booking.base import BookingTask
from marft_envs.tasks.booking.scripted import call, oracle, random_tool_policy

IDS = ["marft/Booking-v0", "marft/BookingFixed-v0", "marft/BookingDecPOMDP-v0"]


def snapshot(env):
    """Everything a caller can see: the database, every agent's observation, the state, the infos."""
    return (env.db.dump(), {a: env.observe(a) for a in env.possible_agents}, env.state(), env.infos, env.ready_agents(), env.message)


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("policy", ["oracle", "random"])
def test_round_graph_between_steps_changes_neither_the_database_nor_any_observation(env_id, policy):
    act = oracle if policy == "oracle" else random_tool_policy
    for seed in range(3):
        env = marft_envs.make(env_id)
        rng = np.random.default_rng(seed)
        env.reset(seed=seed)
        while env.agents:
            before = snapshot(env)
            graphs = {env.round_graph() for _ in range(5)}
            assert len(graphs) == 1 and snapshot(env) == before
            env.step({a: act(a, env.observe(a), rng) for a in env.ready_agents()})


def test_a_call_runs_when_its_agent_acts_not_when_the_graph_is_asked_for(monkeypatch):
    # Whoever asks for the graph (the base class after every step, a caller, a view), no tool call
    # runs inside round_graph: they all run in on_action.
    inside = []
    real_graph, real_execute = BookingTask.round_graph, BookingTask._execute

    def graph(self):
        inside.append(True)
        try:
            return real_graph(self)
        finally:
            inside.pop()

    def execute(self, agent, text):
        assert not inside, f"{agent}'s action ran inside round_graph()"
        return real_execute(self, agent, text)

    monkeypatch.setattr(BookingTask, "round_graph", graph)
    monkeypatch.setattr(BookingTask, "_execute", execute)
    env = Booking()
    env.reset(seed=4)
    while env.agents:
        env.step({a: oracle(a, env.observe(a)) for a in env.ready_agents()})
    assert env.last_grade.team == 1.0


def test_the_coordinators_plan_takes_effect_as_soon_as_it_acts():
    env = Booking()
    env.reset(seed=1)
    plan = call("plan", act=["calendar_0", "booking_0"], depends_on={"booking_0": ["calendar_0"]})
    env.step({"coordinator_0": plan})
    assert env.current["coordinator_0"].result == {"act": ["calendar_0", "booking_0"], "depends_on": {"booking_0": ["calendar_0"]}}
    assert env.ready_agents() == ["calendar_0", "location_0"]
    assert env.graph.parents("booking_0") == ("coordinator_0", "calendar_0")


# -- valid text ----------------------------------------------------------------------------------------

SURROGATE_CALL = '{"name": "free_slots", "arguments": {"people": ["Ana \\ud800"], "day": "Tue", "duration_minutes": 60}}'


@pytest.mark.parametrize("make", [BookingFixed, BookingDecPOMDP])
def test_a_json_surrogate_escape_in_a_tool_argument_never_reaches_an_observation(make):
    env = make()
    env.reset(seed=0)
    assert "\\ud800" in SURROGATE_CALL and "\ud800" in json.loads(SURROGATE_CALL)["arguments"]["people"][0]
    while env.round == 0:
        env.step({a: SURROGATE_CALL if a == "calendar_0" else call("wait") for a in env.ready_agents()})
    assert env.agents
    for agent in env.possible_agents:
        for text in env.observe(agent).values():
            text.encode("utf-8")  # raised UnicodeEncodeError when the surrogate was shown
        assert "calendar_0 free_slots" in env.observe(agent)["text"]
        assert "Ana \ufffd" in env.observe(agent)["text"]
    env.state().encode("utf-8")


def test_a_surrogate_in_the_coordinators_plan_never_reaches_an_observation():
    env = Booking()
    env.reset(seed=0)
    env.step({"coordinator_0": '{"name": "plan", "arguments": {"act": ["calendar_\\udc00"]}}'})
    for agent in env.possible_agents:
        env.observe(agent)["text"].encode("utf-8")


# -- profiles -------------------------------------------------------------------------------------------


def test_role_prompts_come_from_the_profile():
    default = BookingFixed().profile["roles"]
    assert set(default) == {"coordinator", "calendar", "location", "booking"}
    custom = {"roles": {**default, "calendar": "You keep the calendars."}}
    env = BookingFixed(profile=custom)
    env.reset(seed=0)
    assert env.observe("calendar_0")["instructions"].startswith("You keep the calendars.\nTools: ")
    plain = BookingFixed()
    plain.reset(seed=0)
    assert env.observe("booking_0")["instructions"] == plain.observe("booking_0")["instructions"]
    assert plain.observe("calendar_0")["instructions"].startswith(default["calendar"] + "\nTools: ")


def test_a_profile_without_a_role_is_one_clear_line():
    with pytest.raises(ValueError, match=r"the profile has no prompt for roles \['coordinator'\]"):
        Booking(profile={"roles": {"calendar": "", "location": "", "booking": ""}})
    with pytest.raises(FileNotFoundError, match="no such profile"):
        BookingFixed(profile="no/such/profile.json")
