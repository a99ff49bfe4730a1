"""The Flex-POMDP base class that task authors subclass.

A task writes five small methods; :class:`FlexEnv` turns them into the layered interface that
trainers use (``ready_agents`` / ``observe`` / ``step``) and, through :mod:`marft_envs.views`, into
PettingZoo's ``AECEnv`` and ``ParallelEnv`` and Gymnasium's ``Env``::

    class Echo(FlexEnv):
        metadata = {"name": "Echo-v0", "is_parallelizable": False}

        def __init__(self):
            super().__init__(possible_agents=["speaker_0", "listener_0"])

        def reset_task(self, options):                    # all randomness from self.np_random
            self.word = str(self.np_random.choice(["red", "blue"]))

        def observe_text(self, agent):                    # parents' actions are in self.round_actions
            if agent == "speaker_0":
                return f"Say {self.word}."
            return f"The speaker said: {self.round_actions['speaker_0']}. Repeat it."

        def round_graph(self):                            # who sees whom, this round
            return DependencyGraph.chain(self.possible_agents)

        def end_round(self, actions):                     # rewards and terminations
            r = float(actions["listener_0"].strip() == self.word)
            return RoundResult(rewards={"listener_0": r}, terminations=dict.fromkeys(actions, True))

A round: the active agents act in a topological order of the round's graph; an agent is *ready*
when every parent has acted. The graph may depend on the state and on the actions already taken this
round (a coordinator acting first can decide who depends on whom), but an agent that has acted must
never gain a parent. A task that must act on each action as it comes in (run a tool call, so that the
agents depending on it see the result) does it in ``on_action``, which the base class calls once per
action in acting order; ``round_graph`` and ``observe_text`` are then pure queries. When every active
agent has acted, ``end_round`` applies the joint action.

Every action a task receives and every observation it emits are valid Unicode text
(:func:`marft_envs.text.valid_text`). An exception raised by a task method while the base class
steps the env abandons the episode: it is re-raised as a :class:`TaskError` naming the method, the
env has no active agents, and ``reset()`` starts a fresh episode. Misusing the env (using it
before ``reset()``, a wrong action or agent, an action longer than the action space allows) raises
:class:`~marft_envs.errors.EnvUsageError` and changes nothing.
"""

from __future__ import annotations

import copy
import difflib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium.utils import seeding

from marft_envs import spaces
from marft_envs.errors import EnvUsageError, FlexEnvError, TaskError, UnknownOptionWarning  # noqa: F401 (re-exported)
from marft_envs.graph import DependencyGraph
from marft_envs.outcomes import SHARED_REWARD
from marft_envs.text import terminal_text, valid_text
from marft_envs.validation import MAX_HELDOUT, check_heldout_n, checked_actions
from marft_envs.validation import check_seed as _check_seed

RENDER_MODES = ("human", "ansi")
"""What every FlexEnv renders: ``"ansi"`` returns the transcript, ``"human"`` prints it (and returns None)."""


@dataclass
class RoundResult:
    """What a finished round did: rewards, who finished, and per-agent info such as reward components."""

    rewards: dict[str, float] = field(default_factory=dict)
    """Reward per agent; agents left out get 0."""
    terminations: dict[str, bool] = field(default_factory=dict)
    """True for agents whose episode ended; left out means False."""
    truncations: dict[str, bool] = field(default_factory=dict)
    """True for agents cut off by a limit; left out means False."""
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra info per agent (e.g. ``reward_components``, ``parse``), merged into ``infos[agent]``."""
    shared_reward: float | None = None
    """The part of every agent's reward that all agents of the round received alike (a team reward paid to each).
    None: ``rewards.shared`` when ``rewards`` came from ``assign_credit`` (``Credit``), else 0. The base class reports it
    as ``infos[agent]["shared_reward"]`` (where the env did not), so the team's return counts it once."""


class FlexEnv:
    """A Flex-POMDP text task: agents act in rounds, ordered by each round's dependency graph."""

    metadata: dict[str, Any] = {"name": "FlexEnv", "is_parallelizable": False, "render_modes": list(RENDER_MODES)}
    reward_structure: str = "cooperative"
    """How the agents' rewards relate: "cooperative" (one team), "zero_sum" (each round's rewards sum to 0: opponents)
    or "general_sum" (each agent its own interests); ``marft_envs.outcomes.REWARD_STRUCTURES``. ``check_env`` holds it,
    and learners that assume one team (MARFT, MAPPO, CORY) refuse the other two in one line."""
    reset_options: tuple[str, ...] | None = None
    """The ``reset(options=...)`` keys the task reads; any other key warns (UnknownOptionWarning). None: not declared."""

    def __init__(self, possible_agents: list[str], render_mode: str | None = None):
        if not possible_agents:
            raise ValueError("a FlexEnv needs at least one agent in possible_agents")
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be None, 'human' or 'ansi', got {render_mode!r}")
        self.possible_agents: list[str] = list(possible_agents)
        self.render_mode = render_mode
        self.agents: list[str] = []
        self.round = 0
        self.round_actions: dict[str, str] = {}
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.np_random: np.random.Generator | None = None
        self.np_random_seed: int | None = None
        self.history: list[dict[str, str]] = []
        self._observation_spaces = {a: spaces.observation_space() for a in self.possible_agents}
        self._action_spaces = {a: spaces.action_space() for a in self.possible_agents}
        self._last_infos: dict[str, dict[str, Any]] = {}
        self._acted_parents: dict[str, tuple[str, ...]] = {}
        self._graph: DependencyGraph | None = None
        self._started = False
        self._abandoned: str | None = None  # why the episode was abandoned (a step raised), until reset

    # -- what a task author writes ------------------------------------------------------------

    def reset_task(self, options: dict[str, Any]) -> None:
        """Set up a new episode's state. Draw every random choice from ``self.np_random``."""
        raise NotImplementedError

    def observe_text(self, agent: str) -> str:
        """What ``agent`` sees now: the task state plus its parents' actions in ``self.round_actions``.

        May be called for any agent at any time (PettingZoo's checkers observe agents that are not
        ready, or have finished), so read ``self.round_actions`` with ``.get``.
        """
        raise NotImplementedError

    def instructions(self, agent: str) -> str:
        """``agent``'s standing role prompt (the same every round); empty by default."""
        return ""

    def round_graph(self) -> DependencyGraph:
        """This round's dependency graph over ``possible_agents``; no edges by default (a Dec-POMDP).

        A pure query: it may read the state and ``self.round_actions`` but must not change anything
        (the base class calls it after every step, and callers may call it any number of times).
        """
        return DependencyGraph.empty(self.possible_agents)

    def on_action(self, agent: str, action: str) -> None:
        """React to one action as it comes in; nothing by default.

        Called once per action, in acting order (the agents of one ``step`` call in
        ``possible_agents`` order), right after ``self.round_actions[agent] = action`` and before
        the graph is refreshed or the round ends. Side effects that agents acting later this round
        must see (running a tool call, a coordinator's plan) belong here.
        """

    def needs_action(self, agent: str) -> bool:
        """Whether ``agent``'s action this round will be read; True by default. A pure query.

        A task whose rounds may ignore a ready agent's action (``marft/Booking-v0``: the coordinator's
        plan leaves a worker out) returns False for it once that is decided. The agent must still act
        (the round waits for it), but a rollout engine may skip generating and send ``""`` instead.
        """
        return True

    def heldout_options(self, n: int, seed: int) -> list[dict[str, Any]]:
        """Reset options of (up to) ``n`` fixed held-out episodes; evaluation resets episode ``i`` with seed ``seed + i``.

        Read only for envs registered with ``eval_kwargs`` (a held-out split). By default the seeds
        alone pick the episodes: ``n`` empty option dicts. ``n`` past ``MAX_HELDOUT`` (10,000), negative
        or not an integer: ValueError in one line.
        """
        return [{} for _ in range(check_heldout_n(n, MAX_HELDOUT, f"{self.name}.heldout_options"))]

    def difficulties(self) -> tuple:
        """The difficulty levels this env can play on request, easiest first; optional, empty by default.

        An env that returns levels accepts ``reset(options={"difficulty": d})`` for each ``d`` of them
        and plays an episode at that level; trainers use it to draw levels by the team's running
        success (``signal.curriculum``, ``marft_agents/signal/curriculum.py``). Empty: the env declares none.
        """
        return ()

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        """Apply the joint action of a finished round: rewards, terminations, next state."""
        raise NotImplementedError

    def state_text(self) -> str:
        """The global state as text (for centralised critics); optional."""
        raise NotImplementedError(f"{self.name} does not expose a global state")

    def render_text(self) -> str:
        """The episode's transcript so far, what :meth:`render` shows; by default one line per action.

        Override to show more (the task, tool results, the final grade); it must not change anything.
        """
        lines = []
        for t, acts in enumerate(self.history + ([self.round_actions] if self.round_actions else [])):
            lines += [f"round {t} | {a}: {text}" for a, text in acts.items()]
        return "\n".join(lines)

    # -- the layered interface ----------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.metadata.get("name", type(self).__name__)

    def observation_space(self, agent: str):
        """The observation space of ``agent`` (the same object every call)."""
        return self._observation_spaces[agent]

    def action_space(self, agent: str):
        """The action space of ``agent`` (the same object every call)."""
        return self._action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, dict]:
        """Start an episode; returns ``infos`` for every agent."""
        seed = _check_seed(self.name, seed)
        if options is not None and not isinstance(options, Mapping):
            raise EnvUsageError(
                f"{self.name}.reset: options must be a dict (or None), got {type(options).__name__}: pass options={{'key': value}}"
            )
        # PettingZoo's api_test passes options no task knows, so an unknown key is a loud warning, not an error.
        unknown = sorted(set(options or {}) - set(self.reset_options)) if self.reset_options is not None else []
        for key in unknown:
            close = difflib.get_close_matches(str(key), self.reset_options, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            warnings.warn(
                f"{type(self).__name__}.reset: unknown option {key!r} is ignored; {hint}its options are {list(self.reset_options)}",
                UnknownOptionWarning,
                stacklevel=2,
            )
        if seed is not None or self.np_random is None:
            self.np_random, self.np_random_seed = seeding.np_random(seed)
        self._started = False  # until the task is set up: a reset that raises leaves nothing usable
        self._abandoned = None
        self.agents = list(self.possible_agents)
        self.round = 0
        self.round_actions = {}
        self.history = []
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._last_infos = {a: {} for a in self.agents}
        self._acted_parents = {}
        self.reset_task(dict(options or {}))
        self._refresh_graph()
        self._started = True
        return self.infos

    @property
    def graph(self) -> DependencyGraph:
        """The current round's graph, restricted to the active agents."""
        self._require_started()
        assert self._graph is not None
        return self._graph

    def ready_agents(self) -> list[str]:
        """Active agents that have not acted this round and whose parents all have (``possible_agents`` order)."""
        if not self._started or not self.agents:
            return []
        g = self.graph
        return [a for a in self.agents if a not in self.round_actions and all(p in self.round_actions for p in g.parents(a))]

    def observe(self, agent: str) -> dict[str, str]:
        """``agent``'s observation: ``{"instructions": role prompt, "text": what it sees now}``, as valid text."""
        self._require_started()
        if agent not in self.possible_agents:
            raise EnvUsageError(f"unknown agent {agent!r}; agents are {self.possible_agents}")
        return {"instructions": valid_text(self.instructions(agent)), "text": valid_text(self.observe_text(agent))}

    def state(self) -> str:
        """The global state (the task's ``state_text()``) as valid text, for centralised critics."""
        self._require_started()
        return valid_text(self.state_text())

    def info(self, agent: str) -> dict[str, Any]:
        """A fresh info dict: ``round``, ``parents`` this round (none once finished), and last round's info."""
        self._require_started()
        active = agent in self.agents and self._graph is not None
        parents = list(self._graph.parents(agent)) if active else []
        return {**copy.deepcopy(self._last_infos.get(agent, {})), "round": self.round, "parents": parents}

    @property
    def infos(self) -> dict[str, dict[str, Any]]:
        """Fresh info dicts for the active agents (see :meth:`info`)."""
        return {a: self.info(a) for a in self.agents} if self._started else {}

    def step(self, actions: Mapping[str, str | None]) -> RoundResult | None:
        """Act for some ready agents; returns the round's result when it completes, else ``None``.

        ``actions`` maps ready agents to strings (any string up to the action space's ``max_length``
        characters is valid; the task grades it, with any lone surrogate replaced by U+FFFD; a longer
        one is refused). Finished agents may be passed with ``None`` and are ignored.
        """
        self._require_started()
        acting = checked_actions(self, actions)
        try:
            return self._apply(acting)
        except BaseException as err:
            # The task's state may be half-updated: end the episode rather than let a retry run on it.
            self._abandoned = str(err) if isinstance(err, TaskError) else f"{type(err).__name__}: {err}"
            self.agents = []
            raise

    def render(self) -> str | None:
        """The transcript so far (:meth:`render_text`): returned with ``render_mode="ansi"``, printed with
        ``"human"`` (returning None, as Gymnasium and PettingZoo expect); None without a render mode."""
        if self.render_mode is None:
            return None
        text = valid_text(self.render_text())
        if self.render_mode == "human":
            print(terminal_text(text), flush=True)  # the agents' text, not the terminal's commands
            return None
        return text

    def close(self) -> None:
        """Release resources (nothing by default)."""

    # -- internals ----------------------------------------------------------------------------

    def _apply(self, acting: dict[str, str]) -> RoundResult | None:
        for agent in self.possible_agents:  # acting order: within one step, possible_agents order
            if agent in acting:
                self._acted_parents[agent] = self._graph.parents(agent)
                self.round_actions[agent] = acting[agent]
                self._task("on_action", agent, acting[agent])
        if len(self.round_actions) < len(self.agents):
            self._refresh_graph()
            return None
        return self._finish_round()

    def _task(self, method: str, *args: Any) -> Any:
        """Call a task method; an exception comes back as a TaskError naming it (chained to the original)."""
        try:
            return getattr(self, method)(*args)
        except Exception as err:
            raise TaskError(f"{type(self).__name__}.{method} raised {type(err).__name__}: {err}") from err

    def _finish_round(self) -> RoundResult:
        actions = dict(self.round_actions)
        raw = self._task("end_round", actions)
        if not isinstance(raw, RoundResult):
            raise TypeError(f"{type(self).__name__}.end_round must return a RoundResult, got {type(raw).__name__}")
        acted = list(actions)
        shared = raw.shared_reward if raw.shared_reward is not None else getattr(raw.rewards, "shared", 0.0)
        result = RoundResult(
            rewards={a: float(raw.rewards.get(a, 0.0)) for a in acted},
            terminations={a: bool(raw.terminations.get(a, False)) for a in acted},
            truncations={a: bool(raw.truncations.get(a, False)) for a in acted},
            infos={a: dict(raw.infos.get(a, {})) for a in acted},
            shared_reward=float(shared),
        )
        if shared:  # declared through assign_credit or shared_reward=: every agent's info says it, as the shipped envs do
            for a in acted:
                result.infos[a].setdefault(SHARED_REWARD, float(shared))
        self.history.append(actions)
        self._last_infos = {a: result.infos[a] for a in acted}
        self.terminations.update(result.terminations)
        self.truncations.update(result.truncations)
        self.agents = [a for a in self.agents if not (result.terminations[a] or result.truncations[a])]
        self.round += 1
        self.round_actions = {}
        self._acted_parents = {}
        if self.agents:
            self._refresh_graph()
        return result

    def _refresh_graph(self) -> None:
        full = self._task("round_graph")
        if not isinstance(full, DependencyGraph):
            raise TypeError(f"{type(self).__name__}.round_graph must return a DependencyGraph, got {type(full).__name__}")
        missing = [a for a in self.agents if a not in full.agents]
        if missing:
            raise ValueError(f"{type(self).__name__}.round_graph() left out active agents {missing}")
        graph = full.subgraph(self.agents)
        for agent, before in self._acted_parents.items():
            if graph.parents(agent) != before:
                raise ValueError(
                    f"{type(self).__name__}: agent {agent!r} already acted this round with parents {list(before)}, "
                    f"but the graph now gives it {list(graph.parents(agent))}; an agent that acted cannot gain parents"
                )
        self._graph = graph

    def _why_not_ready(self, agent: str) -> str:
        if agent in self.round_actions:
            return f"agent {agent!r} already acted in round {self.round}; ready now: {self.ready_agents()}"
        waiting = [p for p in self._graph.parents(agent) if p not in self.round_actions]
        return f"agent {agent!r} cannot act yet: it waits for {waiting} in round {self.round}"

    def _require_started(self) -> None:
        if not self._started:
            raise EnvUsageError(f"{self.name}: call reset() before using the env")

    # -- branching (tree sampling) --------------------------------------------------------------

    headline_metric: str = "accuracy"
    """What ``marft train`` reports first: "accuracy" (episodes solved) or "mean_return" (partial credit)."""
    branchable: bool = True
    """Whether :meth:`branch` can copy this env; a task whose state cannot be copied sets False."""
    branch_shared: tuple[str, ...] = ("_observation_spaces", "_action_spaces")
    """Attributes a branch shares with its original instead of copying: objects never changed in place
    (a problem source, role prompts, the spaces). The names add up along the class hierarchy."""

    def branch(self) -> FlexEnv:
        """An independent env in this env's exact state (mid-round included), its random generator copied.

        Given the same actions, the branch and this env produce the same observations, rewards and
        infos; acting on one never changes the other. A deep copy except ``branch_shared``; a task
        holding more than Python objects copies it in its ``__deepcopy__`` (the booking database).
        ``close()`` a branch you no longer need. See :mod:`marft_envs.branching`.
        """
        from marft_envs.branching import branch_copy

        return branch_copy(self)
