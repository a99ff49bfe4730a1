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

from marft_agents.models.truncation import Truncation


@dataclass(frozen=True)
class Sampling:
    """How actions are drawn; log-probs are always computed under this same distribution."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy (evaluation only: greedy actions have no usable log-prob)."""
    max_new_tokens: int = 48
    """The longest response, in tokens."""
    top_k: int = 0
    """Draw among the ``top_k`` likeliest tokens only (0: all; :mod:`~marft_agents.models.truncation`)."""
    top_p: float = 1.0
    """Draw among the likeliest tokens whose probability reaches ``top_p`` (1.0: all)."""
    stop: tuple[str, ...] = ()
    """Strings that end a response at the token completing one (the end-of-turn token always does)."""

    @property
    def truncated(self) -> bool:
        """Whether draws are restricted by ``top_k`` or ``top_p`` (the learner must then score the same way)."""
        return self.top_k > 0 or self.top_p < 1.0


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
    sampling: Sampling,
    temperature: Mapping[str, float] | None = None,
    max_new_tokens: Mapping[str, int] | None = None,
    *,
    top_k: Mapping[str, int] | None = None,
    top_p: Mapping[str, float] | None = None,
    stop: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Sampling]:
    """Each agent's own :class:`Sampling` (``agents.<agent_id>.*``): ``sampling`` with the agent's temperature, token
    limit, top-k, top-p and stop strings where it has them. Greedy ``sampling`` (evaluation) stays greedy: only the
    token limits and stop strings apply."""
    greedy = sampling.temperature == 0
    own = {
        "temperature": {} if greedy else dict(temperature or {}),
        "max_new_tokens": dict(max_new_tokens or {}),
        "top_k": {} if greedy else dict(top_k or {}),
        "top_p": {} if greedy else dict(top_p or {}),
        "stop": {agent: tuple(strings) for agent, strings in (stop or {}).items()},
    }
    out = {}
    for agent in dict.fromkeys(a for values in own.values() for a in values):
        out[agent] = replace(sampling, **{k: v[agent] for k, v in own.items() if agent in v})
    return out


Temperature = float | Mapping[str, "float | Sampling"]
"""A learner's sampling distribution: one temperature for every agent, or each agent's own (agent id -> T), or each
agent's whole :class:`Sampling` where one truncates its draws (``top_k``/``top_p``: the learner scores the same way)."""


def row_temperatures(
    agents: Sequence[str], temperature: Temperature, device: torch.device | None = None
) -> float | torch.Tensor | Truncation:
    """The distribution to score each of a batch's rows under, the row played by ``agents[b]``: a number when all
    rows share one temperature, else a ``(B,)`` tensor on ``device`` (the policy's; :meth:`LaMASPolicy.score` takes
    either), or a :class:`~marft_agents.models.truncation.Truncation` when an agent's sampling truncates."""
    if not isinstance(temperature, Mapping):
        return temperature
    try:
        rows = [temperature[a] for a in agents]
    except KeyError as err:
        raise KeyError(
            f"no sampling temperature for agent {err.args[0]!r}: the learner has {sorted(temperature)}"
        ) from None
    if any(isinstance(r, Sampling) for r in rows):
        return _truncation(rows, device)
    rows = [float(r) for r in rows]
    if len(set(rows)) <= 1:
        return rows[0] if rows else 1.0
    return torch.tensor(rows, dtype=torch.float32, device=device)  # (B,)


def _truncation(rows: Sequence[float | Sampling], device: torch.device | None) -> Truncation:
    """Each row's temperature, top-k and top-p as ``(B,)`` tensors (a plain temperature truncates nothing)."""
    own = [r if isinstance(r, Sampling) else Sampling(temperature=float(r)) for r in rows]

    def column(values, dtype):
        return torch.tensor(values, dtype=dtype, device=device)  # (B,)

    return Truncation(
        temperature=column([s.temperature for s in own], torch.float32),
        top_k=column([s.top_k for s in own], torch.long) if any(s.top_k for s in own) else None,
        top_p=column([s.top_p for s in own], torch.float32) if any(s.top_p < 1.0 for s in own) else None,
    )
