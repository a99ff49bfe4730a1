"""marft_agents: LLM policies and multi-agent RL trainers for marft_envs.

The public API is the few names below, what a user's code calls: ``from marft_agents import train,
TrainConfig``. Everything else (the pieces of a learner, config fields, engines, the TRL helpers, ...)
is imported from the module that defines it, ``from marft_agents.algorithms.base import minibatches``.
Each name is imported on first use (PEP 562), so ``import marft_agents`` loads neither torch nor
transformers. docs/agents.md ("The public API") shows them at work.
"""

from __future__ import annotations

import importlib

_PUBLIC: dict[str, tuple[str, str | None]] = {
    # a run: its config, the run itself, what it wrote
    "train": ("marft_agents.training.trainer", "train"),
    "TrainConfig": ("marft_agents.training.config", "TrainConfig"),
    "load": ("marft_agents.training.config", "load"),
    "from_dict": ("marft_agents.training.config", "from_dict"),
    "validate": ("marft_agents.training.config", "validate"),
    "ConfigError": ("marft_agents.settings.text", "ConfigError"),
    "checkpoint": ("marft_agents.runs.checkpoint", None),
    "export": ("marft_agents.training.export", "export"),
    # a policy: built from a config or a run folder, evaluated, played
    "build_policy": ("marft_agents.training.setup", "build_policy"),
    "policy_from_run": ("marft_agents.training.from_run", "policy_from_run"),
    "LaMASPolicy": ("marft_agents.models.policy", "LaMASPolicy"),
    "load_base": ("marft_agents.models.policy", "load_base"),
    "embedded_model_path": ("marft_agents.models.policy", "embedded_model_path"),
    "evaluate": ("marft_agents.rollout.evaluation", "evaluate"),
    "RolloutEngine": ("marft_agents.rollout.layered", "RolloutEngine"),
    "Sampling": ("marft_agents.models.sampling", "Sampling"),
    # a plug-in algorithm: the registry and the base class of a learner
    "algorithms": ("marft_agents.algorithms", None),
    "Learner": ("marft_agents.algorithms.base", "Learner"),
}
"""Public name -> (the module that defines it, its name there; None: the module itself)."""

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> object:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'marft_agents' has no attribute {name!r}")
    module, attr = _PUBLIC[name]
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
