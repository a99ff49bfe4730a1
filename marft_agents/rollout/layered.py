"""The rollout engine: play many envs at once through the layered interface.

Each step of the engine takes every ready agent across all live envs (one *layer* per env) and hands
them, each with its agent's adapter and its agent's own sampling where it has one
(``agents.<agent_id>.temperature`` / ``.max_new_tokens`` / ``.top_k`` / ``.top_p`` / ``.stop``:
:func:`~marft_agents.models.sampling.agent_sampling`),
to a generation engine (:mod:`marft_agents.engines`: the hf engine makes one batched ``generate``
call per adapter and sampling, the vllm engine one call for the whole layer).
Each agent-step keeps its exact prompt and response token ids (never re-tokenised), its behaviour
log-probs and the version of the adapter weights that sampled it. When a round ends
its rewards are attached to that round's agent-steps. (The critic's features are computed by the
learner, not here: the engine only generates.)

An agent whose action the env will ignore this round (``env.needs_action(agent)`` False, e.g. a
Booking-v0 worker the coordinator left out) gets no request: its agent-step has an empty response and
``skipped=True``, and the env receives ``""``. ``skip_ignored=False`` generates for it anyway (the
token-level learners do: their per-token backup needs a token on every step).

Plain PettingZoo AEC envs work too (``AECAsLayered``): one agent at a time, each step its own round.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from marft_agents.engines.base import Engine
from marft_agents.models.protocol import RolloutPolicy
from marft_agents.models.sampling import Generation, Request, Sampling
from marft_agents.rollout.episode import AgentStep, Episode, text_fields
from marft_envs.core import FlexEnv
from marft_envs.outcomes import SOLVED

Playing = tuple[int, list[AgentStep], list[AgentStep]]
"""An env slot's episode in play: its index, its finished rounds' agent-steps, and the current round's."""


class AECAsLayered:
    """Drive a plain PettingZoo ``AECEnv`` through the layered calls (one agent at a time)."""

    def __init__(self, env):
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.round = 0

    @property
    def agents(self) -> list[str]:
        return [a for a in self.env.agents if not (self.env.terminations[a] or self.env.truncations[a])]

    def reset(self, seed=None, options=None):
        self.env.reset(seed=seed, options=options)
        self.round = 0
        self._skip_dead()

    def ready_agents(self) -> list[str]:
        return [self.env.agent_selection] if self.agents else []

    def observe(self, agent: str) -> dict:
        obs = self.env.observe(agent)
        return obs if isinstance(obs, dict) and "text" in obs else {"instructions": "", "text": str(obs)}

    def step(self, actions: dict[str, str]):
        from marft_envs import RoundResult

        ((agent, action),) = actions.items()
        self.env.step(action)
        self.round += 1
        result = RoundResult(
            rewards={agent: float(self.env.rewards.get(agent, 0.0))},
            terminations={agent: bool(self.env.terminations.get(agent, True))},
            truncations={agent: bool(self.env.truncations.get(agent, False))},
            infos={agent: dict(self.env.infos.get(agent, {}))},
        )
        self._skip_dead()
        return result

    def _skip_dead(self):
        while self.env.agents and (
            self.env.terminations[self.env.agent_selection] or self.env.truncations[self.env.agent_selection]
        ):
            self.env.step(None)


@dataclass
class _Layer:
    """One layer of the live envs: a request per agent to generate for, and the agents whose actions the env ignores."""

    asked: list[tuple[int, str, Any, tuple[str, ...]]] = field(default_factory=list)
    """(env slot, agent, observation, parents) of each request."""
    requests: list[Request] = field(default_factory=list)
    ignored: list[tuple[int, str, Any, list[int]]] = field(default_factory=list)
    """(env slot, agent, observation, prompt) of each agent nothing is generated for."""
    states: dict[int, str] = field(default_factory=dict)
    """Env slot -> the env's global state, when the rollout records it."""


class RolloutEngine:
    """Collect whole episodes from many envs, handing each layer of ready agents to one generation engine."""

    def __init__(
        self,
        policy: RolloutPolicy,
        sampling: Sampling,
        record_state: bool = False,
        engine: Engine | None = None,
        skip_ignored: bool = True,
        agent_sampling: Mapping[str, Sampling] | None = None,
    ):
        from marft_agents.engines.hf import HFEngine

        self.policy = policy
        self.sampling = sampling
        """The run's sampling: every agent's but those in ``agent_sampling``."""
        self.agent_sampling = dict(agent_sampling or {})
        """Agent id -> its own sampling (``agents.<agent_id>.*``); agents not in it use ``sampling``."""
        self.record_state = record_state
        """Also keep each env's ``state_text()`` with every agent-step (for centralised critics)."""
        self.skip_ignored = skip_ignored
        """Generate nothing for an agent whose action the env will ignore (``needs_action`` False)."""
        self.engine = engine if engine is not None else HFEngine(policy)
        """What generates (default: the policy's own model through transformers)."""
        self.generate_calls = 0
        """Batched generate calls the engine made for this rollout engine."""
        self.timings: dict[str, float] = {}
        self.reset_timings()

    def reset_timings(self) -> None:
        """Zero the seconds spent generating, building prompts, and stepping the envs."""
        self.timings = {"generate": 0.0, "prompts": 0.0, "env": 0.0}

    def request(self, prompt: list[int], agent: str, episode: int | None = None) -> Request:
        """The generation request for ``agent``'s ``prompt``: its adapter, and its own sampling where it has one."""
        return Request(prompt, self.policy.adapter_of[agent], episode=episode, sampling=self.agent_sampling.get(agent))

    def generate_layer(self, requests: Sequence[Request]) -> Generation:
        """The engine's answer to one layer of ``requests`` under this rollout's sampling, its calls counted and
        timed."""
        t0 = time.perf_counter()
        calls = self.engine.calls
        gen = self.engine.generate(requests, self.sampling)
        self.generate_calls += self.engine.calls - calls
        self.timings["generate"] += time.perf_counter() - t0
        return gen

    def collect(
        self,
        envs: Sequence[Any],
        episodes: Sequence[int],
        *,
        seed_of: Callable[[int], int] = lambda e: e,
        options_of: Callable[[int], dict | None] = lambda e: None,
        progress: Callable[[int], None] | None = None,
    ) -> list[Episode]:
        """Play the episodes with indices ``episodes`` on ``envs`` (reset with ``seed_of(index)``)."""
        queue = list(episodes)
        live: dict[int, Playing] = {}  # env slot -> its episode in play
        finished: list[Episode] = []

        def start(slot: int) -> None:
            if queue:
                index = queue.pop(0)
                envs[slot].reset(seed=seed_of(index), options=options_of(index))
                live[slot] = (index, [], [])

        for slot in range(min(len(envs), len(queue))):
            start(slot)
        while live:
            layer = self._ask(envs, live)
            gen = self.generate_layer(layer.requests) if layer.requests else None
            acted = self._agent_steps(envs, live, layer, gen)
            t0 = time.perf_counter()
            for slot, new_steps in acted.items():
                episode = _step(envs[slot], live[slot], new_steps)
                if episode is not None:
                    finished.append(episode)
                    del live[slot]
                    if progress:
                        progress(1)
                    start(slot)
            self.timings["env"] += time.perf_counter() - t0
        finished.sort(key=lambda e: e.index)
        return finished

    def _ask(self, envs: Sequence[Any], live: dict[int, Playing]) -> _Layer:
        """One layer: every ready agent of every live env, each request with its agent's adapter."""
        layer = _Layer()
        t0 = time.perf_counter()
        for slot in live:
            env = envs[slot]
            if self.record_state:
                layer.states[slot] = env.state()  # valid text, whatever the task's state_text() holds
            for agent in env.ready_agents():
                observation = env.observe(agent)
                prompt = self.policy.prompt(observation, agent)  # kept when skipped too: the critic values it
                if self.skip_ignored and not _needs_action(env, agent):
                    layer.ignored.append((slot, agent, observation, prompt))
                    continue
                layer.asked.append((slot, agent, observation, _parents(env, agent)))
                layer.requests.append(self.request(prompt, agent, episode=live[slot][0]))
        self.timings["prompts"] += time.perf_counter() - t0
        return layer

    def _agent_steps(
        self, envs: Sequence[Any], live: dict[int, Playing], layer: _Layer, gen: Generation | None
    ) -> dict[int, list[AgentStep]]:
        """The layer's agent-steps by env slot: the generated ones, then the skipped ones."""
        # Envs step in adapter-group order (each adapter's requests, adapters in order of first
        # appearance), the order rollouts used before engines existed: another order hands episodes
        # to other env slots, hence other generate batches and other samples.
        requests = layer.requests
        rank: dict[str, int] = {}
        order = sorted(range(len(requests)), key=lambda i: rank.setdefault(requests[i].adapter, len(rank)))
        acted: dict[int, list[AgentStep]] = defaultdict(list)
        for i in order:
            slot, agent, observation, parents = layer.asked[i]
            acted[slot].append(
                AgentStep(
                    episode=live[slot][0],
                    round=envs[slot].round,
                    agent=agent,
                    prompt=requests[i].prompt,
                    response=gen.responses[i],
                    token_logps=gen.token_logps[i],
                    text=gen.texts[i],
                    state=layer.states.get(slot),
                    version=self.engine.version,
                    observation=text_fields(observation),
                    parents=parents,
                )
            )
        for slot, agent, observation, prompt in layer.ignored:
            acted[slot].append(
                AgentStep(
                    episode=live[slot][0],
                    round=envs[slot].round,
                    agent=agent,
                    prompt=prompt,
                    response=[],
                    token_logps=torch.zeros(0, device=self.policy.device),
                    text="",
                    state=layer.states.get(slot),
                    version=self.engine.version,
                    observation=text_fields(observation),
                    skipped=True,
                )
            )
        return acted


def _step(env: Any, playing: Playing, new_steps: list[AgentStep]) -> Episode | None:
    """Step ``env`` with one layer's actions; a finished round gets its rewards, a finished episode is returned."""
    # Inside a layer, the acting order is the env's agent order (ties in the topological order).
    new_steps.sort(key=lambda s: env.possible_agents.index(s.agent))
    index, steps, round_steps = playing
    round_steps.extend(new_steps)
    result = env.step({s.agent: s.text for s in new_steps})
    if result is None:
        return None
    for s in round_steps:
        s.reward = result.rewards.get(s.agent, 0.0)
        s.info = result.infos.get(s.agent, {})
    round_steps[-1].round_end = True
    steps.extend(round_steps)
    round_steps.clear()
    if env.agents:
        return None
    steps[-1].done = True
    solved = steps[-1].info.get(SOLVED)
    return Episode(index=index, steps=steps, solved=None if solved is None else bool(solved))


def _parents(env: Any, agent: str) -> tuple[str, ...]:
    """The agents whose same-round actions ``agent`` sees (a FlexEnv's ``info(agent)["parents"]``); () for other
    envs."""
    return tuple(env.info(agent).get("parents", ())) if isinstance(env, FlexEnv) else ()


def _needs_action(env: Any, agent: str) -> bool:
    """The env's ``needs_action(agent)``; True for envs without the query (plain AEC envs)."""
    query = getattr(env, "needs_action", None)
    return True if query is None else bool(query(agent))
