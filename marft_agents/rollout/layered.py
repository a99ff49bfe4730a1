"""The rollout engine: play many envs at once through the layered interface.

Each step of the engine takes every ready agent across all live envs (one *layer* per env) and hands
them, each with its agent's adapter and its agent's own sampling where it has one
(``agents.<agent_id>.temperature`` / ``.max_new_tokens``: :func:`~marft_agents.models.sampling.agent_sampling`),
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

from marft_agents.engines.base import Engine, Request
from marft_agents.models.policy import LaMASPolicy, Sampling
from marft_envs.core import FlexEnv
from marft_envs.outcomes import SHARED_REWARD, SOLVED


@dataclass
class AgentStep:
    """One agent's action in one round of one episode, with everything training needs."""

    episode: int
    """Global episode index (also the seed offset the env was reset with)."""
    round: int
    agent: str
    prompt: list[int]
    """Prompt token ids exactly as generated from."""
    response: list[int]
    """Response token ids exactly as sampled (including the end-of-turn token if produced)."""
    token_logps: torch.Tensor
    """Behaviour log-prob of each response token, ``(len(response),)``."""
    text: str
    """The decoded action the env received."""
    reward: float = 0.0
    round_end: bool = False
    """True for the last agent to act in its round."""
    done: bool = False
    """True for the last agent-step of its episode."""
    info: dict[str, Any] = field(default_factory=dict)
    state: str | None = None
    """The env's global state (``state_text()``) when the agent acted; recorded only on request."""
    version: int = 0
    """Updates applied to the adapter weights that sampled this action (the engine's version)."""
    observation: dict[str, str] | None = None
    """What the env showed the agent (its text fields), for transcripts; the prompt holds it tokenised."""
    engine_logps: torch.Tensor | None = None
    """The engine's own log-probs of the response tokens, once the trainer has recomputed ``token_logps``
    with its model for the truncated importance-sampling correction (``marft_agents/algorithms/tis.py``); else None."""
    group: tuple | None = None
    """Tree sampling (``marft_agents/rollout/tree.py``): the sibling group ``(problem, round, agent, node)``, or
    ``(problem, round, agent, node, k)`` for a continuation of node's candidate k, whose members share this exact
    prompt; None in a plain rollout."""
    score: float | None = None
    """Tree sampling: the value the sibling group compares (its round's team reward, or the mean of its
    continuations'); None in a plain rollout."""
    skipped: bool = False
    """The env said this action would not be read (``FlexEnv.needs_action``): nothing was generated, the
    response is empty, and learners take no policy loss on it (its reward and value still count)."""
    parents: tuple[str, ...] = ()
    """The agents whose same-round actions this agent saw (a FlexEnv's ``info(agent)["parents"]``; empty
    for other envs): the copy-rate diagnostics compare an agent's answer with its parents'."""

    @property
    def shared(self) -> float:
        """The part of ``reward`` that every agent of the round received alike (``info[SHARED_REWARD]``; 0 without one)."""
        return float(self.info.get(SHARED_REWARD) or 0.0)

    @property
    def chain_reward(self) -> float:
        """What this step adds to the team's return: its own part of the reward, plus the round's shared
        reward once, on the round's last agent (every agent holds a copy; summing them counts it twice)."""
        return self.reward if self.round_end else self.reward - self.shared


@dataclass
class Episode:
    """A finished episode: its agent-steps in acting order."""

    index: int
    steps: list[AgentStep]
    solved: bool | None
    """Whether the env reported success (``info[marft_envs.outcomes.SOLVED]``); None when it does not say."""
    branches: list[AgentStep] = field(default_factory=list)
    """Tree sampling: the candidates that were sampled but not continued from (``steps`` is the chosen path), and the
    kept continuation samples."""
    extra_tokens: int = 0
    """Tree sampling: tokens generated for continuations which no agent-step holds (past the continuations' first layer)."""

    @property
    def team_return(self) -> float:
        """The team's return: every reward once (a round's shared reward once, not once per agent)."""
        return float(sum(s.chain_reward for s in self.steps))


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
        while self.env.agents and (self.env.terminations[self.env.agent_selection] or self.env.truncations[self.env.agent_selection]):
            self.env.step(None)


class RolloutEngine:
    """Collect whole episodes from many envs, handing each layer of ready agents to one generation engine."""

    def __init__(
        self,
        policy: LaMASPolicy,
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
        live: dict[int, tuple[int, list[AgentStep], list[AgentStep]]] = {}  # env slot -> (episode, steps, round)
        finished: list[Episode] = []

        def start(slot: int) -> None:
            if queue:
                index = queue.pop(0)
                envs[slot].reset(seed=seed_of(index), options=options_of(index))
                live[slot] = (index, [], [])

        for slot in range(min(len(envs), len(queue))):
            start(slot)
        while live:
            # One layer: every ready agent of every live env, each request with its agent's adapter.
            batch: list[tuple[int, str, Any, tuple[str, ...]]] = []  # (env slot, agent, observation, parents) of each request
            requests: list[Request] = []
            ignored: list[tuple[int, str, Any, list[int]]] = []  # (slot, agent, observation, prompt): not generated
            states: dict[int, str] = {}
            t0 = time.perf_counter()
            for slot in live:
                env = envs[slot]
                if self.record_state:
                    states[slot] = env.state()  # valid text, whatever the task's state_text() holds
                for agent in env.ready_agents():
                    observation = env.observe(agent)
                    prompt = self.policy.prompt(observation, agent)  # kept when skipped too: the critic values it
                    if self.skip_ignored and not _needs_action(env, agent):
                        ignored.append((slot, agent, observation, prompt))
                        continue
                    batch.append((slot, agent, observation, _parents(env, agent)))
                    requests.append(self.request(prompt, agent, episode=live[slot][0]))
            self.timings["prompts"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            calls = self.engine.calls
            gen = self.engine.generate(requests, self.sampling) if requests else None
            self.generate_calls += self.engine.calls - calls
            self.timings["generate"] += time.perf_counter() - t0
            # Envs step in adapter-group order (each adapter's requests, adapters in order of first
            # appearance), the order rollouts used before engines existed: another order hands episodes
            # to other env slots, hence other generate batches and other samples.
            rank: dict[str, int] = {}
            order = sorted(range(len(requests)), key=lambda i: rank.setdefault(requests[i].adapter, len(rank)))
            layer: dict[int, list[AgentStep]] = defaultdict(list)
            for i in order:
                slot, agent, observation, parents = batch[i]
                layer[slot].append(
                    AgentStep(
                        episode=live[slot][0],
                        round=envs[slot].round,
                        agent=agent,
                        prompt=requests[i].prompt,
                        response=gen.responses[i],
                        token_logps=gen.token_logps[i],
                        text=gen.texts[i],
                        state=states.get(slot),
                        version=self.engine.version,
                        observation=_text_fields(observation),
                        parents=parents,
                    )
                )
            for slot, agent, observation, prompt in ignored:
                layer[slot].append(
                    AgentStep(
                        episode=live[slot][0],
                        round=envs[slot].round,
                        agent=agent,
                        prompt=prompt,
                        response=[],
                        token_logps=torch.zeros(0, device=self.policy.device),
                        text="",
                        state=states.get(slot),
                        version=self.engine.version,
                        observation=_text_fields(observation),
                        skipped=True,
                    )
                )
            t0 = time.perf_counter()
            for slot, new_steps in layer.items():
                env = envs[slot]
                # Inside a layer, the acting order is the env's agent order (ties in the topological order).
                new_steps.sort(key=lambda s: env.possible_agents.index(s.agent))
                live[slot][2].extend(new_steps)
                result = env.step({s.agent: s.text for s in new_steps})
                if result is None:
                    continue
                index, steps, round_steps = live[slot]
                for s in round_steps:
                    s.reward = result.rewards.get(s.agent, 0.0)
                    s.info = result.infos.get(s.agent, {})
                round_steps[-1].round_end = True
                steps.extend(round_steps)
                round_steps.clear()
                if not env.agents:
                    steps[-1].done = True
                    solved = steps[-1].info.get(SOLVED)
                    finished.append(Episode(index=index, steps=steps, solved=None if solved is None else bool(solved)))
                    del live[slot]
                    if progress:
                        progress(1)
                    start(slot)
            self.timings["env"] += time.perf_counter() - t0
        finished.sort(key=lambda e: e.index)
        return finished


def to_device(episodes: Sequence[Episode], device: torch.device) -> None:
    """Move every agent-step's log-probs to ``device`` (the learner's), in place.

    The hf engine already makes them there; a vllm engine or a rollout worker hands CPU tensors.
    """
    for e in episodes:
        for s in (*e.steps, *e.branches):
            s.token_logps = s.token_logps.to(device)
            if s.engine_logps is not None:
                s.engine_logps = s.engine_logps.to(device)


def _parents(env: Any, agent: str) -> tuple[str, ...]:
    """The agents whose same-round actions ``agent`` sees (a FlexEnv's ``info(agent)["parents"]``); () for other envs."""
    return tuple(env.info(agent).get("parents", ())) if isinstance(env, FlexEnv) else ()


def _needs_action(env: Any, agent: str) -> bool:
    """The env's ``needs_action(agent)``; True for envs without the query (plain AEC envs)."""
    query = getattr(env, "needs_action", None)
    return True if query is None else bool(query(agent))


def check_on_policy(episodes: Sequence[Episode], version: int) -> None:
    """Refuse agent-steps sampled with adapter weights other than ``version``: they are not on-policy."""
    stale = [(s.episode, s.version) for e in episodes for s in (*e.steps, *e.branches) if s.version != version]
    if stale:
        raise RuntimeError(
            f"{len(stale)} agent-steps were sampled with other adapter weights than version {version} "
            f"(episode, version: {stale[:3]}); refusing to train on them as on-policy"
        )


def _text_fields(observation: Any) -> dict[str, str] | None:
    """The text fields of an observation (a dict of strings, or one string)."""
    if isinstance(observation, dict):
        return {k: v for k, v in observation.items() if isinstance(v, str)}
    return {"text": observation} if isinstance(observation, str) else None
