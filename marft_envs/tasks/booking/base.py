"""What the booking envs share: a seeded world in SQLite, one request per episode, tool calls as actions.

Each episode draws a world (people, calendars, venues, bookings) and a task from ``self.np_random``,
fills a fresh SQLite database with the world, and shows every agent the user's request. Each round
every active agent answers with one JSON tool call from its role's subset (see :mod:`.tools`). A call
runs as soon as its agent acts, in ``possible_agents`` order within a layer, so the agents that
depend on it this round see its result. Every result (or error) goes on the team board, which all
agents see from the next round on. A malformed action, an unknown tool, bad arguments or SQL text
gets an error result: never an exception, never a change to the database.

The episode ends when ``booking_0`` calls ``respond`` (terminated) or after ``max_rounds`` rounds
(truncated); ``max_cycles=N``, PettingZoo's name for that limit, is ``max_rounds=N`` (when given,
it replaces ``max_rounds``). Then the episode is graded (:mod:`marft_envs.rewards.booking`): the
final database against a replay of the gold actions on a fresh copy of the initial one, the final
message against the required outputs, the task's assertions; the reward goes to the agents by the
``credit`` mode ("team", "last", "per_agent"). Every round's ``infos[agent]`` has ``tool`` and
``error``; the last round's also ``reward_components``, ``assertions`` and ``solved``.

Options: ``max_rounds`` (default 6), ``credit`` (default "team"), ``kinds`` (task-kind weights, e.g.
``{"book": 1, "infeasible": 1}``), ``world`` (a :class:`~.world.WorldConfig` or a dict of its fields),
``storage`` ("memory" or "file"), ``profile`` (the role prompts: ``"default"``, this package's
``profiles/default.json``, a JSON file, or a dict ``{"roles": {...}}``).
``reset(options={"kind": "clarify"})`` draws a task of that kind.

``env.branch()`` (tree sampling) copies the env mid-episode, database included: SQLite's backup API
copies it into a new connection (a new temp file with ``storage="file"``), so each branch's tool
calls write to its own database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from marft_envs.core import FlexEnv, RoundResult
from marft_envs.graph import DependencyGraph
from marft_envs.rewards.booking import Grade, grade
from marft_envs.rewards.credit import CREDIT_MODES, assign_credit, shared_part
from marft_envs.tasks.booking.actions import MAX_SHOWN_CHARS, ActionError, ToolCall, parse_action
from marft_envs.tasks.booking.db import STORAGES, BookingDB
from marft_envs.tasks.booking.generator import KINDS, Task, generate_task, kind_weights
from marft_envs.tasks.booking.rules import RULES
from marft_envs.tasks.booking.tools import TOOLS, WRITES, ToolError, check_call, role_of, run_tool, tools_of
from marft_envs.tasks.booking.user import ScriptedUser
from marft_envs.tasks.booking.world import World, WorldConfig, generate_world
from marft_envs.tasks.profiles import load_profile

ACTION_FORMAT = 'Answer with exactly one JSON tool call: {"name": "<tool>", "arguments": {...}}.'


@dataclass(frozen=True)
class Entry:
    """One agent's action of one round, as the team board shows it."""

    round: int
    agent: str
    call: ToolCall | None = None
    """The parsed call (None when the action did not parse or was not scheduled)."""
    result: dict[str, Any] | None = None
    error: str | None = None
    scheduled: bool = True
    """False when the coordinator left the agent out of the round (its action was ignored)."""

    @property
    def shown(self) -> bool:
        """Whether teammates see it: not when it was ignored or a ``wait`` (they carry no news)."""
        return self.scheduled and not (self.call is not None and self.call.name == "wait" and self.error is None)

    @cached_property  # observations show every line again each round; build it once
    def text(self) -> str:
        what = self.call.text() if self.call is not None else "(unreadable action)"
        error = self.error if self.error is None or len(self.error) <= MAX_SHOWN_CHARS else self.error[:397] + "..."
        outcome = f"error: {error}" if error is not None else json.dumps(self.result, separators=(",", ":"))
        return f"[r{self.round + 1}] {self.agent} {what} -> {outcome}"  # rounds count from 1 in text, as in "Round 1 of 6"


class BookingTask(FlexEnv):
    """Base of the booking envs: SQLite state, tool-call actions, a scripted user, τ²-style grading."""

    reset_options = ("kind",)
    # Frozen or never changed in place (a reset replaces them); the database is copied (BookingDB.__deepcopy__).
    branch_shared = ("profile", "world", "task", "user")

    def __init__(
        self,
        possible_agents: list[str],
        *,
        max_rounds: int = 6,
        credit: str = "team",
        kinds: dict[str, float] | None = None,
        world: WorldConfig | dict[str, Any] | None = None,
        storage: str = "memory",
        profile: str | Path | dict = "default",
        render_mode: str | None = None,
        max_cycles: int | None = None,
    ):
        super().__init__(possible_agents, render_mode=render_mode)
        if max_cycles is not None:  # PettingZoo's name for the same limit (pettingzoo.make(..., max_cycles=N))
            if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or not 1 <= max_cycles <= 100:
                raise ValueError(f"max_cycles (the number of rounds) must be an integer from 1 to 100, got {max_cycles!r}")
            max_rounds = max_cycles
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or not 1 <= max_rounds <= 100:
            raise ValueError(f"max_rounds must be an integer from 1 to 100, got {max_rounds!r}")
        if credit not in CREDIT_MODES:
            raise ValueError(f"unknown credit mode {credit!r}: use one of {list(CREDIT_MODES)}")
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {list(STORAGES)}, got {storage!r}")
        kind_weights(kinds)  # fail now, not at the first reset, on unknown kinds or bad weights
        self.profile = load_profile(profile, "marft_envs.tasks.booking", agents=possible_agents)
        self.kinds = kinds
        self.world_config = self._world_config(world)
        self.max_rounds = max_rounds
        self.credit = credit
        self.storage = storage
        self.world: World | None = None
        self.db: BookingDB | None = None
        self.task: Task | None = None
        self.user: ScriptedUser | None = None
        self.board: list[Entry] = []
        self.current: dict[str, Entry] = {}
        self.message: str | None = None
        self.plans: list[bool] = []
        self.last_grade: Grade | None = None
        self._initial: dict = {}
        self._image = b""

    @staticmethod
    def _world_config(world: WorldConfig | dict[str, Any] | None) -> WorldConfig:
        if world is None or isinstance(world, WorldConfig):
            return world or WorldConfig()
        if not isinstance(world, dict):
            raise ValueError(f"world must be a WorldConfig or a dict of its fields, got {type(world).__name__}")
        unknown = sorted(set(world) - set(WorldConfig.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown world fields {unknown}; WorldConfig has {sorted(WorldConfig.__dataclass_fields__)}")
        return WorldConfig(**world)

    # -- FlexEnv hooks ------------------------------------------------------------------------------

    def reset_task(self, options: dict[str, Any]) -> None:
        kinds = self.kinds
        if "kind" in options:
            if options["kind"] not in KINDS:
                raise ValueError(f"options['kind'] must be one of {list(KINDS)}, got {options['kind']!r}")
            kinds = {options["kind"]: 1.0}
        self._close_db()  # the previous episode's database goes before the next one opens
        self.world = generate_world(self.np_random, self.world_config)
        self.db = BookingDB(self.world, storage=self.storage)
        self.task = generate_task(self.world, self.db, self.np_random, kinds)
        self.user = ScriptedUser(self.task)
        self._initial = self.db.active_bookings()
        self._image = self.db.image()  # the initial state, for the gold replay
        self.board, self.current, self.message, self.plans, self.last_grade = [], {}, None, [], None

    def instructions(self, agent: str) -> str:
        role = role_of(agent)
        specs = json.dumps([TOOLS[name].spec() for name in tools_of(agent)], separators=(",", ":"))
        rules = f"\n{RULES}" if role in ("booking", "coordinator") else ""
        return f"{self.profile['roles'][role]}{rules}\nTools: {specs}\n{ACTION_FORMAT}"

    def observe_text(self, agent: str) -> str:
        lines = [f"Request: {self.task.request}", f"Round {self.round + 1} of {self.max_rounds}."]
        shown = [e.text for e in self.board if e.shown]
        if shown:
            lines += ["Team board:", *shown]
        parents = self.graph.parents(agent) if agent in self.agents else ()
        seen = [self.current[p].text for p in parents if p in self.current and self.current[p].shown]
        if seen:
            lines += ["This round so far:", *seen]
        if self.is_scheduled(agent) is False:
            lines.append("You are not scheduled this round: your action will be ignored.")
        return "\n".join(lines)

    def on_action(self, agent: str, action: str) -> None:
        # A call runs as soon as its agent acts, so the agents that depend on it this round see its
        # result (and a coordinator's plan sets the rest of the round's graph).
        self.current[agent] = self._execute(agent, action)

    def round_graph(self) -> DependencyGraph:
        return self.team_graph()

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        entries = [self.current[a] for a in self.possible_agents if a in actions]
        self.board += entries
        self.current = {}
        terminated = self.message is not None
        truncated = not terminated and self.round + 1 >= self.max_rounds
        infos = {e.agent: {"tool": e.call.name if e.call else None, "error": e.error, "scheduled": e.scheduled} for e in entries}
        rewards: dict[str, float] = {}
        if terminated or truncated:
            g = self.last_grade = self.grade()
            order = list(self.graph.order())
            rewards = assign_credit(self.credit, order, g.team, g.own)
            for a, info in infos.items():
                info.update(
                    reward_components={**g.components, "team": g.team, "own": g.own[a]},
                    assertions=dict(g.assertions),
                    solved=g.team == 1.0,
                    shared_reward=shared_part(self.credit, g.team),
                )
        return RoundResult(
            rewards=rewards, terminations=dict.fromkeys(actions, terminated), truncations=dict.fromkeys(actions, truncated), infos=infos
        )

    def state_text(self) -> str:
        lines = [f"Request: {self.task.request}", *(e.text for e in self.board if e.shown)]
        return "\n".join(lines)

    def render_text(self) -> str:
        lines = [f"Request: {self.task.request}"] if self.task else []
        lines += [e.text for e in self.board + list(self.current.values()) if e.scheduled]
        if self.last_grade is not None:
            lines.append(f"reward {self.last_grade.team:g} {self.last_grade.components}")
        return "\n".join(lines)

    def close(self) -> None:
        self._close_db()

    # -- what the variants decide -------------------------------------------------------------------

    def team_graph(self) -> DependencyGraph:
        """This round's dependency graph (may read this round's executed entries in ``self.current``)."""
        raise NotImplementedError

    def is_scheduled(self, agent: str) -> bool | None:
        """Whether ``agent``'s action this round counts (a coordinator may leave workers out); None: not decided yet."""
        return True

    def needs_action(self, agent: str) -> bool:
        # Only a decided "not scheduled" lets an engine skip generating: _execute ignores the action.
        return self.is_scheduled(agent) is not False

    def run_plan(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a coordinator's plan; only the coordinated env has one."""
        raise ActionError("this team has no coordinator")

    # -- grading -------------------------------------------------------------------------------------

    def gold_bookings(self) -> tuple:
        """The canonical bookings after replaying the gold writes on a fresh copy of the initial database."""
        gold_db = BookingDB.from_image(self._image)
        try:
            for step in self.task.gold:
                if step.name in WRITES:
                    run_tool(gold_db, ToolCall(step.name, step.arguments))
            return gold_db.canonical_bookings()
        finally:
            gold_db.close()

    def grade(self) -> Grade:
        """Grade the episode as it stands (the final round calls this)."""
        results = [(e.agent, e.call.name, e.result) for e in self.board if e.result is not None and e.call is not None]
        return grade(
            self.task,
            self.world,
            before=self._initial,
            after=self.db.active_bookings(),
            gold=self.gold_bookings(),
            message=self.message,
            results=results,
            plans=self.plans,
            agents=self.possible_agents,
        )

    # -- running actions -----------------------------------------------------------------------------

    def _execute(self, agent: str, text: str) -> Entry:
        if not self.is_scheduled(agent):
            return Entry(self.round, agent, scheduled=False)
        try:
            call = parse_action(text)
        except ActionError as err:
            return Entry(self.round, agent, error=str(err))
        try:
            return Entry(self.round, agent, call, result=self._run(check_call(call, agent)))
        except (ActionError, ToolError) as err:
            return Entry(self.round, agent, call, error=str(err))

    def _run(self, call: ToolCall) -> dict[str, Any]:
        args = call.arguments
        if call.name == "wait":
            return {"waited": True}
        if call.name == "ask_user":
            return {"answer": self.user.answer(args["question"])}
        if call.name == "respond":
            self.message = args["message"]
            return {"sent": True}
        if call.name == "plan":
            return self.run_plan(args)
        return run_tool(self.db, call)

    def _close_db(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
