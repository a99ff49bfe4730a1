"""What an engine is asked and what it answers: :class:`Request`, :class:`Sampling`, :class:`Generation`.

A rollout hands an engine (:mod:`marft_agents.engines`) a layer of requests, one per agent that acts,
and the layer's sampling; the engine answers with one generation. They live in the model layer, below
the engines, because a policy's own ``generate`` takes a :class:`Sampling` and answers a :class:`Generation`.

The policy (:mod:`marft_agents.models.policy`) samples with a :class:`Sampling` and scores a response at
the temperature that sampled it; with per-agent temperatures (``agents.<agent_id>.temperature``) one
scoring batch may hold rows of several temperatures (:func:`row_temperatures`: a ``(B,)`` tensor on the
policy's device).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class Sampling:
    """How actions are drawn; log-probs are always computed under this same distribution."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy (evaluation only: greedy actions have no usable log-prob)."""
    max_new_tokens: int = 48
    """The longest response, in tokens."""


@dataclass(frozen=True)
class Request:
    """One agent's prompt in a layer, with the adapter that must answer it."""

    prompt: list[int]
    """Prompt token ids, exactly as the response will be scored after them."""
    adapter: str
    """The policy's adapter name for the agent (``LaMASPolicy.adapter_of[agent]``)."""
    episode: int | None = None
    """The episode the request belongs to (an engine that samples each episode with its own generator reads it)."""
    sampling: Sampling | None = None
    """This request's own sampling (its agent's temperature and token limit); None: the layer's."""


@dataclass
class Generation:
    """A batch of generated responses with their exact tokens and behaviour log-probs."""

    responses: list[list[int]]
    """Response token ids, up to and including the end-of-turn token when one was produced."""
    token_logps: list[torch.Tensor]
    """Per-token log-probs under the sampling distribution (empty tensors when greedy)."""
    texts: list[str]
    """The responses decoded without special tokens: what the env receives."""


def agent_sampling(
    sampling: Sampling, temperature: Mapping[str, float] | None = None, max_new_tokens: Mapping[str, int] | None = None
) -> dict[str, Sampling]:
    """Each agent's own :class:`Sampling` (``agents.<agent_id>.*``): ``sampling`` with the agent's temperature and
    token limit where it has one. Greedy ``sampling`` (evaluation) stays greedy: only the token limits apply."""
    temperature = {} if sampling.temperature == 0 else dict(temperature or {})
    max_new_tokens = dict(max_new_tokens or {})
    out = {}
    for agent in dict.fromkeys([*temperature, *max_new_tokens]):
        out[agent] = replace(
            sampling,
            temperature=temperature.get(agent, sampling.temperature),
            max_new_tokens=max_new_tokens.get(agent, sampling.max_new_tokens),
        )
    return out


Temperature = float | Mapping[str, float]
"""A learner's sampling temperature: one for every agent, or each agent's own (agent id -> T)."""


def row_temperatures(
    agents: Sequence[str], temperature: Temperature, device: torch.device | None = None
) -> float | torch.Tensor:
    """The temperature to score each of a batch's rows at, the row played by ``agents[b]``: a number when all
    rows share one, else a ``(B,)`` tensor on ``device`` (the policy's; :meth:`LaMASPolicy.score` takes either)."""
    if not isinstance(temperature, Mapping):
        return temperature
    try:
        rows = [float(temperature[a]) for a in agents]
    except KeyError as err:
        raise KeyError(
            f"no sampling temperature for agent {err.args[0]!r}: the learner has {sorted(temperature)}"
        ) from None
    if len(set(rows)) <= 1:
        return rows[0] if rows else 1.0
    return torch.tensor(rows, dtype=torch.float32, device=device)  # (B,)
