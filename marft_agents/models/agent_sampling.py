"""Each agent's own sampling: its settings (``agents.<agent_id>.*``) and the temperature each scored row used.

A reasoner may explore at a high temperature while an actor stays near-greedy. The learner must then
score every action at the temperature that sampled it (the PPO ratio is only right under the same
distribution): :func:`row_temperatures` gives it one number, or one per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import torch

from marft_agents.models.policy import Sampling


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


def row_temperatures(agents: Sequence[str], temperature: Temperature) -> float | torch.Tensor:
    """The temperature to score each of a batch's rows at, the row played by ``agents[b]``: a number when all
    rows share one, else a ``(B,)`` tensor (:meth:`LaMASPolicy.score` takes either)."""
    if not isinstance(temperature, Mapping):
        return temperature
    try:
        rows = [float(temperature[a]) for a in agents]
    except KeyError as err:
        raise KeyError(f"no sampling temperature for agent {err.args[0]!r}: the learner has {sorted(temperature)}") from None
    if len(set(rows)) <= 1:
        return rows[0] if rows else 1.0
    return torch.tensor(rows, dtype=torch.float32)  # (B,)
