"""Branching the shipped families: MATH (shared problem source), Booking (its own SQLite database),
code repair (no sandbox state copied, nothing shared that changes)."""

import os
import threading

import pytest
from code_helpers import own_programs_may_run_on_a_weak_tier  # noqa: F401  (autouse fixture)
from test_code_envs import TASK

import marft_envs
from marft_envs.tasks.booking import Booking
from marft_envs.tasks.booking.db import open_databases
from marft_envs.tasks.booking.scripted import call, oracle
from marft_envs.tasks.code import CodeRepairChain
from marft_envs.tasks.code.harness import TestRunner, runner_for
from marft_envs.tasks.code.scripted import oracle_patch
from marft_envs.tasks.code.tasks import TaskList
from marft_envs.tasks.math import MathChain, MathCORY

# -- MATH ------------------------------------------------------------------------------------------


def test_a_math_branch_shares_the_problem_source_and_copies_the_attempts():
    env = MathChain(rounds=3)
    env.reset(seed=2)
    env.step({"reasoner_0": "thinking"})
    twin = env.branch()
    assert twin.problems is env.problems and twin.profile is env.profile  # read-only: shared
    assert twin.problem == env.problem and twin.observe("actor_0") == env.observe("actor_0")
    wrong = twin.step({"actor_0": "\\boxed{nothing}"})
    assert wrong.terminations["actor_0"] is False and len(twin.attempts) == 1
    assert env.attempts == [] and env.ready_agents() == ["actor_0"]  # the original did not move
    right = env.step({"actor_0": f"\\boxed{{{env.problem.answer}}}"})
    assert right.rewards["actor_0"] == 1.0 and twin.agents == ["reasoner_0", "actor_0"]
    assert "Attempt 1: the team answered nothing, which is wrong." in twin.observe("reasoner_0")["text"]


def test_a_cory_branch_has_its_own_roles():
    env = MathCORY()
    env.reset(seed=0)
    twin = env.branch()
    twin.set_pioneer("solver_1")
    twin.reset(seed=0)
    assert env.pioneer == "solver_0" and env.ready_agents() == ["solver_0"] and twin.ready_agents() == ["solver_1"]


# -- Booking ---------------------------------------------------------------------------------------


def _to_the_booking_agent(env):
    """Play the oracle's coordinator, calendar and location turns: mid-round, only booking_0 is left."""
    env.reset(seed=1, options={"kind": "book"})
    env.step(
        {
            "coordinator_0": call(
                "plan", act=["calendar_0", "location_0", "booking_0"], depends_on={"booking_0": ["calendar_0", "location_0"]}
            )
        }
    )
    env.step({a: oracle(a, env.observe(a)) for a in env.ready_agents()})
    assert env.ready_agents() == ["booking_0"]


@pytest.mark.parametrize("storage", ["memory", "file"])
def test_a_booking_branch_writes_to_a_database_of_its_own(storage):
    env = Booking(storage=storage)
    _to_the_booking_agent(env)
    live = open_databases()
    twin = env.branch()
    assert open_databases() == live + 1 and twin.db is not env.db and twin.db.conn is not env.db.conn
    assert twin.world is env.world and twin.task is env.task  # frozen: shared
    before = env.db.dump()
    assert twin.db.dump() == before and twin.board == env.board and twin.board is not env.board
    if storage == "file":
        assert twin.db.path != env.db.path and os.path.exists(twin.db.path)
    action = oracle("booking_0", twin.observe("booking_0"))
    result = twin.step({"booking_0": action})
    assert result.infos["booking_0"]["tool"] == "create_booking" and result.infos["booking_0"]["error"] is None
    assert twin.db.dump() != before and env.db.dump() == before  # the write went to the branch only
    assert env.current.keys() == {"coordinator_0", "calendar_0", "location_0"} and env.ready_agents() == ["booking_0"]
    path = twin.db.path
    twin.close()
    assert open_databases() == live and not env.db.closed
    if storage == "file":
        assert not os.path.exists(path) and os.path.exists(env.db.path)
    assert env.step({"booking_0": action}).infos == result.infos  # the same call, the same outcome
    env.close()


def test_booking_branches_grade_their_own_endings():
    env = Booking()
    _to_the_booking_agent(env)
    booked = env.branch()
    booked.step({"booking_0": oracle("booking_0", booked.observe("booking_0"))})
    while booked.agents:
        booked.step({a: oracle(a, booked.observe(a)) for a in booked.ready_agents()})
    env.step({"booking_0": call("respond", message="Sorry, I could not book it.")})
    while env.agents:
        env.step({a: call("wait") for a in env.ready_agents()})
    assert booked.last_grade.team == 1.0 and env.last_grade.team < 1.0
    booked.close()
    env.close()


# -- code repair -----------------------------------------------------------------------------------


class RunnerSource(TaskList):
    """A task source like the generated-bug ones: it holds a test runner and a lock, which do not copy."""

    def __init__(self, tasks):
        super().__init__(tasks, name="runner-source")
        self.runner = runner_for(marft_envs.sandbox.Limits(timeout_s=5.0, memory_mb=512))
        self._lock = threading.Lock()


def test_a_code_branch_copies_the_episode_and_no_sandbox_state(monkeypatch):
    def refuse(self, memo):
        raise AssertionError(f"a branch copied {type(self).__name__}: sandbox state must never be copied")

    monkeypatch.setattr(TestRunner, "__deepcopy__", refuse, raising=False)
    monkeypatch.setattr(marft_envs.sandbox.SandboxPool, "__deepcopy__", refuse, raising=False)
    env = CodeRepairChain(tasks=RunnerSource([TASK]), rounds=2)
    env.reset(seed=0, options={"problem": TASK})
    env.step({"locator_0": "Lines: 5"})
    twin = env.branch()
    assert twin.problems is env.problems and twin.runner is env.runner  # process-wide, shared, not copied
    wrong = env.step({"fixer_0": "I am not sure."})
    assert wrong.infos["fixer_0"]["status"] == "syntax_error" and len(env.attempts) == 1
    assert twin.attempts == [] and twin.ready_agents() == ["fixer_0"]
    right = twin.step({"fixer_0": oracle_patch(TASK, "diff")})
    assert right.infos["fixer_0"]["solved"] and twin.agents == []
    assert env.agents == ["locator_0", "fixer_0"] and "scored 0: syntax error" in env.observe("fixer_0")["text"]
