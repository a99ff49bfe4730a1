"""Misusing an env raises EnvUsageError, in every view of every registered env, in one line that says what to do.

One table of misuses per view (layered, AEC, Parallel, Gymnasium), run over every registered id
that has the view. After the error the env is as it was: the test then steps it normally.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

import marft_envs
from marft_envs import EnvUsageError

IDS = marft_envs.list_envs("aec")


class Misuse(NamedTuple):
    """One wrong call: on a fresh view (``reset=False``) or just after ``reset(seed=0)``, and what the error says."""

    name: str
    reset: bool
    call: Callable[[Any], Any]
    says: str  # a regex the one-line message must contain


def _first(view) -> str:
    return view.possible_agents[0]


def kind_of(view) -> str:
    return "gym" if isinstance(view, marft_envs.GymView) else "other"


def _too_long(view) -> str:
    space = view.action_space if kind_of(view) == "gym" else view.action_space(_first(view))
    return "x" * (space.max_length + 1)


BEFORE_RESET = "call reset\\(\\) before using the env"
NOT_A_DICT = "takes a dict of actions by agent, got {}"
NOT_A_STRING = "must be a string, got {}"
TOO_LONG = "characters; its action space allows at most 1,048,576: shorten it"
BAD_OPTIONS = "options must be a dict \\(or None\\), got list: pass options="
BAD_SEED = "seed must be None or an integer >= 0, got"

MISUSES = {
    "layered": [
        Misuse("step before reset", False, lambda v: v.step({_first(v): "hi"}), BEFORE_RESET),
        Misuse("state before reset", False, lambda v: v.state(), BEFORE_RESET),
        Misuse("observe before reset", False, lambda v: v.observe(_first(v)), BEFORE_RESET),
        Misuse("step(None)", True, lambda v: v.step(None), NOT_A_DICT.format("NoneType")),
        Misuse("step(text)", True, lambda v: v.step("text"), NOT_A_DICT.format("str")),
        Misuse("step(list)", True, lambda v: v.step(["text"]), NOT_A_DICT.format("list")),
        Misuse("unknown agent", True, lambda v: v.step({"nobody_0": "hi"}), "unknown agent 'nobody_0'; agents are"),
        Misuse("not a string", True, lambda v: v.step({v.ready_agents()[0]: 42}), NOT_A_STRING.format("int")),
        Misuse("too long", True, lambda v: v.step({v.ready_agents()[0]: _too_long(v)}), TOO_LONG),
        Misuse("no ready agent", True, lambda v: v.step({}), "got no action for a ready agent; ready:"),
        Misuse("options not a dict", True, lambda v: v.reset(options=[1]), BAD_OPTIONS),
        Misuse("seed not an int", True, lambda v: v.reset(seed="7"), BAD_SEED),
        Misuse("negative seed", True, lambda v: v.reset(seed=-1), BAD_SEED),
    ],
    "aec": [
        Misuse("step before reset", False, lambda v: v.step("hi"), BEFORE_RESET),
        Misuse("last before reset", False, lambda v: v.last(), BEFORE_RESET),
        Misuse("observe before reset", False, lambda v: v.observe(_first(v)), BEFORE_RESET),
        Misuse("state before reset", False, lambda v: v.state(), BEFORE_RESET),
        Misuse("step(None) for a live agent", True, lambda v: v.step(None), NOT_A_STRING.format("NoneType")),
        Misuse("step(list)", True, lambda v: v.step(["text"]), NOT_A_STRING.format("list")),
        Misuse("too long", True, lambda v: v.step(_too_long(v)), TOO_LONG),
        Misuse("options not a dict", True, lambda v: v.reset(options=[1]), BAD_OPTIONS),
    ],
    "parallel": [
        Misuse("step before reset", False, lambda v: v.step({a: "hi" for a in v.possible_agents}), BEFORE_RESET),
        Misuse("state before reset", False, lambda v: v.state(), BEFORE_RESET),
        Misuse("step(None)", True, lambda v: v.step(None), NOT_A_DICT.format("NoneType")),
        Misuse("step(text)", True, lambda v: v.step("text"), NOT_A_DICT.format("str")),
        Misuse("step(list)", True, lambda v: v.step(["text"]), NOT_A_DICT.format("list")),
        Misuse(
            "unknown agent",
            True,
            lambda v: v.step({**{a: "hi" for a in v.agents}, "nobody_0": "hi"}),
            "got actions for unknown agents \\['nobody_0'\\]: pass one action for each active agent",
        ),
        Misuse("missing agents", True, lambda v: v.step({}), "needs an action for every active agent; missing"),
        Misuse("not a string", True, lambda v: v.step(dict.fromkeys(v.agents, 42)), NOT_A_STRING.format("int")),
        Misuse("options not a dict", True, lambda v: v.reset(options=[1]), BAD_OPTIONS),
    ],
    "gym": [
        Misuse("step before reset", False, lambda v: v.step("hi"), BEFORE_RESET),
        Misuse("step(None)", True, lambda v: v.step(None), NOT_A_STRING.format("NoneType")),
        Misuse("step(list)", True, lambda v: v.step(["text"]), NOT_A_STRING.format("list")),
        Misuse("too long", True, lambda v: v.step(_too_long(v)), TOO_LONG),
        Misuse("options not a dict", True, lambda v: v.reset(options=[1]), BAD_OPTIONS),
    ],
}


def _cases():
    for view in MISUSES:
        ids = IDS if view in ("layered", "aec") else marft_envs.list_envs(view)
        for env_id in ids:
            yield pytest.param(env_id, view, id=f"{env_id}-{view}")


def _step_normally(view, kind: str) -> None:
    """One ordinary step: the env still works after the refused calls."""
    if kind == "layered":
        view.step({a: "1" for a in view.ready_agents()})
    elif kind == "aec":
        view.step("1")
    elif kind == "parallel":
        view.step(dict.fromkeys(view.agents, "1"))
    else:
        view.step("1")


@pytest.mark.parametrize("env_id, kind", list(_cases()))
def test_every_misuse_is_one_env_usage_error_that_says_what_to_do(env_id, kind):
    view = marft_envs.make(env_id, view=kind)
    for misuse in MISUSES[kind]:
        if misuse.reset:
            view.reset(seed=0)
        with pytest.raises(EnvUsageError, match=misuse.says) as info:
            misuse.call(view)
        message = str(info.value)
        assert "\n" not in message, (misuse.name, message)
        assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
        if misuse.reset:
            _step_normally(view, kind)  # nothing changed: the episode goes on


def test_the_old_name_is_the_same_class():
    assert marft_envs.FlexEnvError is EnvUsageError


def test_a_view_the_env_does_not_have_is_a_usage_error():
    with pytest.raises(EnvUsageError, match="use the AEC view or the layered interface"):
        marft_envs.make("marft/MathChain-v0", view="parallel")
    with pytest.raises(EnvUsageError, match="no Gymnasium view"):
        marft_envs.make("marft/MathChain-v0", view="gym")
    with pytest.raises(EnvUsageError, match="unknown view 'cuda'"):
        marft_envs.make("marft/MathChain-v0", view="cuda")


def test_a_dead_agent_in_the_aec_view_takes_only_none():
    env = marft_envs.make("marft/MathSolo-v0", view="aec")
    env.reset(seed=0)
    env.step(r"\boxed{0}")  # one attempt (rounds=1): the agent is done, and selected for its dead step
    agent = env.agent_selection
    assert env.agents == [agent] and env.terminations[agent]
    with pytest.raises(EnvUsageError, match=f"agent '{agent}' has finished its episode: its only valid action is None"):
        env.step("more")
    env.step(None)
    assert env.agents == []


def test_a_math_step_on_the_longest_actions_keeps_the_graders_time_promise():
    # Each agent sends a hostile action of the action space's maximum length: the round (two
    # extractions, the matches, the next observations) stays within 10x the grader's 0.1 s per call.
    import time

    env = marft_envs.make("marft/MathChain-v0")
    env.reset(seed=0)
    longest = env.action_space("reasoner_0").max_length
    start = time.perf_counter()
    env.step({"reasoner_0": ("0." * longest)[:longest]})
    env.step({"actor_0": ("1," * longest)[:longest]})
    assert time.perf_counter() - start < 10 * 0.1 * 4  # four grader calls
