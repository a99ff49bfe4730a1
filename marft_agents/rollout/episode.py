"""What a rollout returns: whole episodes (:class:`Episode`) of agent-steps (:class:`AgentStep`), and the checks on
them.

Every player of episodes (the rollout engine, tree sampling, the rollout workers, the evaluation)
hands back whole episodes in this shape, and every learner, diagnostic and report reads it; the
rollout engine that makes them lives in :mod:`marft_agents.rollout.layered`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from marft_envs.outcomes import SHARED_REWARD


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
        """The part of ``reward`` that every agent of the round received alike (``info[SHARED_REWARD]``; 0 without
        one)."""
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
    """Tree sampling: tokens generated for continuations which no agent-step holds (past the continuations' first
    layer)."""

    @property
    def team_return(self) -> float:
        """The team's return: every reward once (a round's shared reward once, not once per agent)."""
        return float(sum(s.chain_reward for s in self.steps))


def text_fields(observation: Any) -> dict[str, str] | None:
    """The text fields of an observation (a dict of strings, or one string): what :attr:`AgentStep.observation`
    keeps."""
    if isinstance(observation, dict):
        return {k: v for k, v in observation.items() if isinstance(v, str)}
    return {"text": observation} if isinstance(observation, str) else None


def to_device(episodes: Sequence[Episode], device: torch.device) -> None:
    """Move every agent-step's log-probs to ``device`` (the learner's), in place.

    The hf engine already makes them there; a vllm engine or a rollout worker hands CPU tensors.
    """
    for e in episodes:
        for s in (*e.steps, *e.branches):
            s.token_logps = s.token_logps.to(device)
            if s.engine_logps is not None:
                s.engine_logps = s.engine_logps.to(device)


def check_on_policy(episodes: Sequence[Episode], version: int) -> None:
    """Refuse agent-steps sampled with adapter weights other than ``version``: they are not on-policy."""
    stale = [(s.episode, s.version) for e in episodes for s in (*e.steps, *e.branches) if s.version != version]
    if stale:
        raise RuntimeError(
            f"{len(stale)} agent-steps were sampled with other adapter weights than version {version} "
            f"(episode, version: {stale[:3]}); refusing to train on them as on-policy"
        )
