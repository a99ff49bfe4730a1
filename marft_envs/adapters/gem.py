"""GEM both ways (gem-llm==0.1.0): marft envs as GEM ``MultiAgentEnv``s, GEM's envs as FlexEnvs.

**Outward** — :func:`gem_multiagent_env` wraps any FlexEnv (or registered id) as a
``gem.multiagent.MultiAgentEnv``: ``reset(seed=)`` returns ``(observations, infos)`` keyed by agent,
``step({agent: text})`` returns GEM's five dicts. Who may act is the round graph's ready agents:

- ``mode="sequential"``: one agent per step, the first ready one (``possible_agents`` order); an
  AEC-style round is as many steps as agents.
- ``mode="parallel"``: every ready agent per step, i.e. one layer of the round graph (a whole round
  on a Dec-POMDP round with no dependencies).

An action for an agent that may not act now, or a missing action for one that may, is GEM's
``ValueError`` (its ``_validate_actions``). An observation is the agent's instructions, a blank
line, and what it sees now (``infos[agent]`` keeps both apart, as ``instructions`` and ``text``).
Rewards are the FlexEnv's, given when a round ends (0 on the steps before); an agent leaves
``agents`` when it is terminated or truncated. ``spawn(same_state=True)`` is the FlexEnv's
``branch()``: an independent env in the same state.

**Inward** — ``marft/GEM-v0`` (:class:`GemTask`) plays one of GEM's single-agent envs (``gem_id=``,
e.g. ``"game:GuessTheNumber-v0-easy"``) as a one-agent FlexEnv, ``player_0``: the instructions are
GEM's first observation, each round is one GEM step (the text is GEM's latest observation and its
``suffix``), the reward is GEM's for that step, and the episode ends when GEM's does (or after
``max_rounds``). GEM's envs draw from the global ``random`` and NumPy generators; each GemTask swaps
its own states in around every GEM call (:mod:`marft_envs.adapters.isolated_random`).

``gem`` is imported when an env is built, never by ``import marft_envs``; install it with the
``adapters`` extra (``gem-llm`` goes in ``--no-deps``: its own pins would downgrade reasoning-gym).

Version history:
    v0: first release (gem-llm 0.1.0).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from marft_envs.adapters.isolated_random import IsolatedRandom
from marft_envs.core import FlexEnv, RoundResult
from marft_envs.graph import DependencyGraph
from marft_envs.registration import make, register

MODES = ("sequential", "parallel")
"""Who acts in one GEM step: the first ready agent, or every ready agent (one layer of the round graph)."""


def _require_gem() -> None:
    if importlib.util.find_spec("gem") is None:
        raise ImportError("GEM adapters need gem: pip install 'marft[adapters]' and then pip install --no-deps gem-llm==0.1.0")


def _gem_multiagent():
    _require_gem()
    from gem.multiagent import AgentSelector, MultiAgentEnv

    return AgentSelector, MultiAgentEnv


def gem_multiagent_env(env: FlexEnv | str, mode: str = "sequential", **env_kwargs: Any):
    """A ``gem.multiagent.MultiAgentEnv`` playing ``env`` (a FlexEnv, or an id made with ``env_kwargs``).

    A function, not a class: its class subclasses GEM's, so it is built once gem is importable.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    flex = make(env, **env_kwargs) if isinstance(env, str) else env
    if not isinstance(flex, FlexEnv):
        raise TypeError(f"gem_multiagent_env wraps a FlexEnv or a registered id, got {type(flex).__name__}")
    return _classes()[1](flex, mode)


_CLASSES: tuple | None = None


def _prompt(seen: dict[str, Any]) -> str:
    """A GEM observation: the agent's instructions, a blank line, and what it sees now."""
    return f"{seen['instructions']}\n\n{seen['text']}"


def _classes() -> tuple:
    """Build the GEM subclasses once gem is importable (subclassing needs gem's base classes)."""
    global _CLASSES
    if _CLASSES is not None:
        return _CLASSES
    AgentSelector, MultiAgentEnv = _gem_multiagent()

    class GraphSelector(AgentSelector):
        """GEM's agent selector, reading who may act from the FlexEnv's round graph."""

        def __init__(self, flex: FlexEnv, mode: str):
            super().__init__(list(flex.possible_agents), mode=mode)
            self.flex = flex

        def get_active_agents(self) -> list[str]:
            ready = self.flex.ready_agents()
            return ready[:1] if self.mode == "sequential" else ready

        def next(self) -> None:
            pass  # the round graph says who is next, not a rotation

    class _GemMultiAgentEnv(MultiAgentEnv):
        """A FlexEnv behind GEM's multi-agent API (see the module docstring)."""

        def __init__(self, flex: FlexEnv, mode: str):
            super().__init__()
            self.flex, self.mode = flex, mode
            self.possible_agents = list(flex.possible_agents)
            self.agent_selector = GraphSelector(flex, mode)

        def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
            self.flex.reset(seed=seed, options=options)
            self.agents = list(self.flex.agents)
            self.terminations = dict.fromkeys(self.agents, False)
            self.truncations = dict.fromkeys(self.agents, False)
            self.rewards = dict.fromkeys(self.agents, 0.0)
            self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
            self.infos = {a: self._info(a) for a in self.agents}
            return self._observations(), dict(self.infos)

        def observe(self, agent: str) -> str:
            return _prompt(self.flex.observe(agent))

        def _observations(self) -> dict[str, str]:
            # from self.infos, which hold each agent's view already: the FlexEnv is asked once per step
            return {a: _prompt(self.infos[a]) for a in self.agents}

        def _info(self, agent: str) -> dict[str, Any]:
            seen = self.flex.observe(agent)
            return {**self.flex.info(agent), "instructions": seen["instructions"], "text": seen["text"]}

        def _process_actions(self, actions: dict[str, str]):
            result = self.flex.step(actions)
            if result is None:  # inside a round: the agents that acted get 0 until it ends
                rewards = dict.fromkeys(actions, 0.0)
            else:  # the round's rewards, for every agent still in GEM's list (possible_agents order)
                rewards = {a: float(result.rewards.get(a, 0.0)) for a in self.agents}
            self.rewards = dict(rewards)  # GEM deletes finished agents from self.rewards after this returns
            self.terminations = {a: bool(self.flex.terminations.get(a, False)) for a in self.agents}
            self.truncations = {a: bool(self.flex.truncations.get(a, False)) for a in self.agents}
            self.infos = {a: self._info(a) for a in self.agents}
            return (self._observations(), rewards, dict(self.terminations), dict(self.truncations), dict(self.infos))

        def spawn(self, same_state: bool = False, **kwargs: Any):
            """An independent env; with ``same_state`` in this one's exact state (the FlexEnv's ``branch()``),
            else to be ``reset`` before use."""
            if kwargs:
                raise ValueError(f"spawn takes no env overrides here (got {sorted(kwargs)}): build a new env instead")
            twin = _GemMultiAgentEnv(self.flex.branch(), self.mode)
            if not same_state:
                return twin
            twin.agents = list(self.agents)
            for name in ("terminations", "truncations", "rewards", "_cumulative_rewards"):
                setattr(twin, name, dict(getattr(self, name)))
            twin.infos = {a: dict(i) for a, i in self.infos.items()}
            return twin

        def close(self) -> None:
            self.flex.close()

    _CLASSES = (GraphSelector, _GemMultiAgentEnv)
    return _CLASSES


class GemTask(FlexEnv):
    """One of GEM's single-agent envs as a one-agent FlexEnv, one GEM step per round."""

    metadata = {"name": "marft/GEM-v0", "is_parallelizable": True, "render_modes": ["human", "ansi"]}
    reset_options = ()

    def __init__(self, gem_id: str = "game:GuessTheNumber-v0-easy", max_rounds: int = 50, render_mode: str | None = None):
        _require_gem()
        import gem

        if not isinstance(max_rounds, int) or isinstance(max_rounds, bool) or max_rounds < 1:
            raise ValueError(f"max_rounds must be a positive int, got {max_rounds!r}")
        self.library_random = IsolatedRandom(numpy_too=True)
        try:
            self.gem_env = self.library_random.run(lambda: gem.make(gem_id))
        except Exception as err:  # GEM raises a bare error for an unknown id
            raise ValueError(f"GEM could not make {gem_id!r} ({type(err).__name__}: {err}); ids: gem.print_envs()") from None
        super().__init__(["player_0"], render_mode=render_mode)
        self.metadata = {**type(self).metadata, "name": f"marft/GEM-{gem_id}"}
        self.gem_id, self.max_rounds = gem_id, max_rounds

    def reset_task(self, options: dict[str, Any]) -> None:
        seed = int(self.np_random.integers(2**31 - 1))
        self.library_random.forget()  # GEM's reset seeds the global generators itself
        first, info = self.library_random.run(lambda: self.gem_env.reset(seed=seed))
        self.first = str(first)
        self.latest, self.suffix = "", str(info.get("suffix", ""))
        self.log: list[str] = [self.first]

    def instructions(self, agent: str) -> str:
        return self.first

    def observe_text(self, agent: str) -> str:
        return "\n".join(part for part in (self.latest, self.suffix) if part)

    def round_graph(self) -> DependencyGraph:
        return DependencyGraph.empty(self.possible_agents)

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        action = actions["player_0"]
        obs, reward, terminated, truncated, info = self.library_random.run(lambda: self.gem_env.step(action))
        self.latest, self.suffix = str(obs), str(info.get("suffix", ""))
        self.log += [f"> {action}", self.latest]
        cut = not terminated and (truncated or self.round + 1 >= self.max_rounds)
        return RoundResult(
            rewards={"player_0": float(reward)},
            terminations={"player_0": bool(terminated)},
            truncations={"player_0": bool(cut)},
            infos={"player_0": {"reward_components": {"gem": float(reward)}}},
        )

    def state_text(self) -> str:
        return "\n".join(self.log)

    def render_text(self) -> str:
        return self.state_text()


def register_envs() -> list[str]:
    """Register ``marft/GEM-v0`` if gem is importable (``marft`` calls this through the ``marft.envs`` entry point)."""
    if importlib.util.find_spec("gem") is None:
        return []
    register("marft/GEM-v0", GemTask, gym=True)
    return ["marft/GEM-v0"]


register_envs()
