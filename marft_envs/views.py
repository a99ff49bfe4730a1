"""The ecosystem's faces of one :class:`~marft_envs.core.FlexEnv`.

- :class:`AECView` — PettingZoo ``AECEnv``: agents act one at a time, in a topological order of the
  round's graph (ties by ``possible_agents`` order). Always available.
- :class:`ParallelView` — PettingZoo ``ParallelEnv``: all agents act at once. Only for envs whose
  graph is always empty (a Dec-POMDP); otherwise a clear error names the dependencies.
- :class:`GymView` — Gymnasium ``Env`` for one-agent configurations.

The layered interface (``ready_agents``/``observe``/``step``) is the FlexEnv itself. Every view
raises :class:`~marft_envs.errors.EnvUsageError` on misuse, with the same messages as the FlexEnv.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
from pettingzoo import AECEnv, ParallelEnv

from marft_envs.core import FlexEnv
from marft_envs.errors import EnvUsageError


class _Delegating:
    """What the PettingZoo views delegate to the FlexEnv: identity, spaces, render, state, close."""

    def _attach(self, env: FlexEnv) -> None:
        self.env = env
        self.metadata = env.metadata
        self.possible_agents = list(env.possible_agents)
        self.render_mode = env.render_mode
        self.agents: list[str] = []

    def observation_space(self, agent: str):
        return self.env.observation_space(agent)

    def action_space(self, agent: str):
        return self.env.action_space(agent)

    def render(self) -> str | None:
        return self.env.render()

    def state(self) -> str:
        return self.env.state()

    def close(self) -> None:
        self.env.close()


class AECView(_Delegating, AECEnv):
    """A FlexEnv as a PettingZoo ``AECEnv``: one agent at a time, dependencies respected."""

    def __init__(self, env: FlexEnv):
        super().__init__()
        self._attach(env)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = self.env.infos
        self._skip_agent_selection = None
        self.agent_selection = self.env.ready_agents()[0]

    def observe(self, agent: str) -> dict[str, str]:
        return self.env.observe(agent)

    def last(self, observe: bool = True):
        self.env._require_started()  # PettingZoo's own `last` fails on a missing attribute
        return super().last(observe)

    def step(self, action: str | None) -> None:
        self.env._require_started()
        if not self.agents:
            raise EnvUsageError(f"{self.env.name}: the episode is over; call reset() to start a new one")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            if action is not None:
                raise EnvUsageError(f"agent {agent!r} has finished its episode: its only valid action is None")
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        result = self.env.step({agent: action})
        if result is None:
            self._clear_rewards()
        else:
            self.rewards = {a: result.rewards.get(a, 0.0) for a in self.agents}
            for a in self.agents:
                self.terminations[a] = result.terminations.get(a, False)
                self.truncations[a] = result.truncations.get(a, False)
        self._accumulate_rewards()
        self.infos = {a: self.env.info(a) for a in self.agents}
        ready = self.env.ready_agents()
        if ready:
            self.agent_selection = ready[0]
        self._deads_step_first()


class ParallelView(_Delegating, ParallelEnv):
    """A Dec-POMDP FlexEnv as a PettingZoo ``ParallelEnv``: every active agent acts at once."""

    def __init__(self, env: FlexEnv):
        if not env.metadata.get("is_parallelizable", False):
            raise EnvUsageError(_dependency_message(env))
        self._attach(env)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        infos = self.env.reset(seed=seed, options=options)
        self._require_empty_graph()
        self.agents = list(self.env.agents)
        return {a: self.env.observe(a) for a in self.agents}, infos

    def step(self, actions: dict[str, str]):
        self.env._require_started()
        if not self.agents:
            raise EnvUsageError(f"{self.env.name}: the episode is over; call reset() to start a new one")
        if not isinstance(actions, Mapping):
            raise EnvUsageError(
                f"ParallelEnv.step takes a dict of actions by agent, got {type(actions).__name__}: "
                f"pass one action for each of {self.agents}"
            )
        unknown = [a for a in actions if a not in self.possible_agents]
        if unknown:
            raise EnvUsageError(
                f"ParallelEnv.step got actions for unknown agents {unknown}: pass one action for each active agent, {self.agents}"
            )
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise EnvUsageError(f"ParallelEnv.step needs an action for every active agent; missing {missing}")
        acting = self.agents
        result = self.env.step({a: actions[a] for a in acting})
        assert result is not None, "an empty graph lets every agent act in one step"
        observations = {a: self.env.observe(a) for a in acting}
        infos = {a: self.env.info(a) for a in acting}
        self.agents = list(self.env.agents)
        if self.agents:
            self._require_empty_graph()
        return observations, dict(result.rewards), dict(result.terminations), dict(result.truncations), infos

    def _require_empty_graph(self) -> None:
        if not self.env.graph.is_empty():
            edges = ", ".join(f"{p} -> {c}" for p, c in self.env.graph.edges())
            raise ValueError(
                f"{self.env.name} has agent dependencies this round ({edges}); "
                "the Parallel view needs an always-empty graph: use the AEC view or the layered interface"
            )


class GymView(gymnasium.Env):
    """A one-agent FlexEnv as a Gymnasium ``Env``."""

    def __init__(self, env: FlexEnv):
        if len(env.possible_agents) != 1:
            raise EnvUsageError(
                f"{env.name} has {len(env.possible_agents)} agents {env.possible_agents}; "
                "the Gymnasium view needs exactly one: use the AEC or Parallel view"
            )
        self.env = env
        self.agent = env.possible_agents[0]
        self.metadata = env.metadata
        self.render_mode = env.render_mode
        self.observation_space = env.observation_space(self.agent)
        self.action_space = env.action_space(self.agent)
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        infos = self.env.reset(seed=seed, options=options)
        self._done = False
        return self.env.observe(self.agent), infos[self.agent]

    def step(self, action: str):
        self.env._require_started()
        if self._done:
            raise EnvUsageError(f"{self.env.name}: the episode is over; call reset() to start a new one")
        result = self.env.step({self.agent: action})
        assert result is not None, "a one-agent round ends when its agent acts"
        terminated = result.terminations[self.agent]
        truncated = result.truncations[self.agent]
        self._done = terminated or truncated
        return self.env.observe(self.agent), result.rewards[self.agent], terminated, truncated, self.env.info(self.agent)

    def render(self) -> str | None:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def _dependency_message(env: FlexEnv) -> str:
    try:
        edges = ", ".join(f"{p} -> {c}" for p, c in env.round_graph().edges())
    except Exception:  # the graph may need a reset first; the generic message still says what to do
        edges = ""
    deps = f" ({edges})" if edges else ""
    return (
        f"{env.name} has agent dependencies{deps}; the Parallel view needs an always-empty graph "
        "(a Dec-POMDP): use the AEC view or the layered interface"
    )
