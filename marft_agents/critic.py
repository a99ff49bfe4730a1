"""The shared critic: ``V(o^i)``, a small MLP on frozen base features of an agent's observation.

Because agent ``i``'s observation contains its predecessors' same-round actions, one value function
shared by all agents estimates MARFT's sequential value ``V(o, a^{1:i-1})``. The features are the
base model's final hidden state at the last prompt token with adapters disabled (the original code
used a frozen copy of the base; ours needs no copy). Since the base is frozen the features are
computed once, at rollout time, and the critic trains on them alone.
"""

from __future__ import annotations

import torch
from torch import nn


class ValueHead(nn.Module):
    """An MLP from base features to a scalar value: ``d -> hidden -> hidden -> 1`` with ReLU."""

    def __init__(self, in_features: int, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)  # (B, d) -> (B,)
