"""Training algorithms: one module per algorithm, each a config dataclass plus a learner class.

The trainer builds the learner named by ``TrainConfig.algo`` as
``Learner(policy, config_section, temperature=...)``, where ``config_section`` is the
``TrainConfig`` field of the same name (``TrainConfig.marft`` for ``"marft"``). A learner offers:

- ``group_size`` (int): consecutive episodes that share one problem (1: every episode its own;
  group-relative methods such as GRPO play each problem ``G`` times);
- ``update(episodes, update, rng) -> dict[str, float]``: learn from one batch of whole episodes and
  return metrics;
- ``state_dict()`` / ``load_state_dict(state)``: everything a checkpoint needs (adapters, heads,
  optimizers) for ``--resume`` to continue exactly;
- optionally ``before_collect(envs, update)``: called before each collection (e.g. a role swap).

Adding an algorithm: write its module, add it to ``ALGORITHMS`` and its config to ``TrainConfig``.
"""

from __future__ import annotations

import importlib
from typing import Any

ALGORITHMS: dict[str, tuple[str, str]] = {
    "marft": ("marft_agents.algorithms.marft", "MARFT"),
    "marft_token": ("marft_agents.algorithms.marft_token", "MARFTToken"),
    "cory": ("marft_agents.algorithms.cory", "CORY"),
    "grpo": ("marft_agents.algorithms.grpo", "GRPO"),
    "ppo": ("marft_agents.algorithms.ppo", "PPO"),
    "ippo": ("marft_agents.algorithms.ippo_mappo", "IPPO"),
    "mappo": ("marft_agents.algorithms.ippo_mappo", "MAPPO"),
}
"""Algorithm name -> (module, learner class)."""


def build_learner(name: str, policy: Any, config: Any, temperature: float) -> Any:
    """The learner for ``name``, importing its module on first use."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}: use one of {sorted(ALGORITHMS)}")
    module, cls = ALGORITHMS[name]
    return getattr(importlib.import_module(module), cls)(policy, config, temperature=temperature)
