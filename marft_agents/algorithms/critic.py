"""The shared critic: ``V(o^i)``, a small MLP on frozen base features of an agent's observation.

Because agent ``i``'s observation contains its predecessors' same-round actions, one value function
shared by all agents estimates MARFT's sequential value ``V(o, a^{1:i-1})``. The features are the
base model's final hidden state at the last prompt token with adapters disabled (the original code
used a frozen copy of the base; ours needs no copy). Since the base is frozen the learner computes
the features once per update (:func:`features`, or :func:`token_features` before every response
token) and the critic trains on them alone; :func:`fit_critic` is that training loop, shared by
every learner with a value head.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from marft_agents.algorithms.losses import clipped_value_loss, ensure_finite, masked_mean

if TYPE_CHECKING:
    from marft_agents.models.policy import LaMASPolicy
    from marft_agents.rollout.layered import AgentStep


class ValueHead(nn.Module):
    """An MLP from base features to a scalar value: ``d -> hidden -> hidden -> 1`` with ReLU."""

    def __init__(self, in_features: int, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)  # (B, d) -> (B,)


def features(policy: LaMASPolicy, steps: list[AgentStep], minibatch_size: int) -> torch.Tensor:
    """Frozen base features of every step's prompt, ``(N, d)``, computed in minibatches."""
    # Chunks of one agent's steps share its role prompt, which the policy then runs only once.
    order = sorted(range(len(steps)), key=lambda i: steps[i].agent)
    out = torch.empty(len(steps), policy.hidden_size, device=policy.device)
    for start in range(0, len(order), minibatch_size):
        chunk = order[start : start + minibatch_size]
        out[chunk] = policy.features([steps[i].prompt for i in chunk])
    return out


def token_features(policy: LaMASPolicy, steps: list[AgentStep], minibatch_size: int) -> torch.Tensor:
    """Frozen base features before every response token, padded to ``(N, R, d)`` (zeros on padding)."""
    width = max((len(s.response) for s in steps), default=0)
    out = torch.zeros(len(steps), width, policy.hidden_size, device=policy.device)
    order = sorted(range(len(steps)), key=lambda i: steps[i].agent)  # chunks share a role prompt
    for start in range(0, len(order), minibatch_size):
        chunk = order[start : start + minibatch_size]
        feats = policy.token_features([steps[i].prompt for i in chunk], [steps[i].response for i in chunk])
        out[chunk, : feats.shape[1]] = feats
    return out


def fit_critic(
    critic: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: tuple[torch.Tensor, ...],
    values_old: torch.Tensor,
    returns: torch.Tensor,
    rng: np.random.Generator,
    *,
    epochs: int,
    minibatch_size: int,
    value_clip: float | None,
    max_grad_norm: float,
    mask: torch.Tensor | None = None,
    prefix: str = "critic",
) -> dict[str, float]:
    """Fit ``critic(*inputs)`` to ``returns`` with the clipped value loss, in shuffled minibatches.

    ``values_old``/``returns`` are ``(N,)`` (one value per step) or ``(N, R)`` with ``mask`` marking
    the real entries (one value per token); every tensor of ``inputs`` has ``N`` rows.
    """
    losses = []
    n = len(values_old)
    for _ in range(epochs):
        order = torch.as_tensor(rng.permutation(n), device=values_old.device)
        for start in range(0, n, minibatch_size):
            mb = order[start : start + minibatch_size]
            values = critic(*(x[mb] for x in inputs))
            loss = clipped_value_loss(values, values_old[mb], returns[mb], value_clip, None if mask is None else mask[mb])
            ensure_finite(loss, f"{prefix}/value_loss")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            ensure_finite(torch.nn.utils.clip_grad_norm_(critic.parameters(), max_grad_norm), f"{prefix}/grad_norm")
            optimizer.step()
            losses.append(loss.item())
    return {f"{prefix}/value_loss": float(np.mean(losses)) if losses else 0.0, f"{prefix}/value_mean": float(masked_mean(values_old, mask))}
