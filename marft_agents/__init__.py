"""marft_agents: LLM policies and multi-agent RL trainers for marft_envs.

The public API is the names below, ``from marft_agents import train, TrainConfig``; the modules inside
the wings (``training/``, ``algorithms/``, ...) are where they live, not how to import them. Each
name is imported on first use (PEP 562), so ``import marft_agents`` loads neither torch nor
transformers. docs/agents.md ("The public API") shows them at work.
"""

from __future__ import annotations

import importlib

_PUBLIC: dict[str, tuple[str, str | None]] = {
    # run, evaluate, pre-train
    "train": ("marft_agents.training.trainer", "train"),
    "TrainConfig": ("marft_agents.training.config", "TrainConfig"),
    "load": ("marft_agents.training.config", "load"),
    "from_dict": ("marft_agents.training.config", "from_dict"),
    "validate": ("marft_agents.training.config", "validate"),
    "ConfigError": ("marft_agents.settings.text", "ConfigError"),
    "evaluate": ("marft_agents.rollout.evaluation", "evaluate"),
    "HELDOUT_SEED": ("marft_agents.rollout.evaluation", "HELDOUT_SEED"),
    "build_policy": ("marft_agents.training.setup", "build_policy"),
    "policy_from_run": ("marft_agents.cli", "policy_from_run"),
    "save_adapters_run": ("marft_agents.training.init_from", "save_adapters_run"),
    "checkpoint": ("marft_agents.runs.checkpoint", None),
    "pretrain": ("marft_agents.pretraining.pretrain", "train"),
    "PretrainConfig": ("marft_agents.pretraining.pretrain", "PretrainConfig"),
    # a plug-in algorithm: the registry, the learner base and what it hands an update, the loss pieces
    "algorithms": ("marft_agents.algorithms", None),
    "Learner": ("marft_agents.algorithms.base", "Learner"),
    "CriticLearner": ("marft_agents.algorithms.base", "CriticLearner"),
    "Minibatch": ("marft_agents.algorithms.base", "Minibatch"),
    "by_adapter": ("marft_agents.algorithms.base", "by_adapter"),
    "minibatches": ("marft_agents.algorithms.base", "minibatches"),
    "apply": ("marft_agents.algorithms.base", "apply"),
    "adapter_optimizers": ("marft_agents.algorithms.base", "adapter_optimizers"),
    "losses": ("marft_agents.algorithms.losses", None),
    # its config's fields, with their ranges
    "Ranged": ("marft_agents.settings.fields", "Ranged"),
    "ranged": ("marft_agents.settings.fields", "ranged"),
    "POSITIVE": ("marft_agents.settings.fields", "POSITIVE"),
    "NON_NEGATIVE": ("marft_agents.settings.fields", "NON_NEGATIVE"),
    "AT_LEAST_ONE": ("marft_agents.settings.fields", "AT_LEAST_ONE"),
    "UNIT": ("marft_agents.settings.fields", "UNIT"),
    "LR": ("marft_agents.settings.fields", "LR"),
    # the policy, generation and rollouts
    "LaMASPolicy": ("marft_agents.models.policy", "LaMASPolicy"),
    "load_base": ("marft_agents.models.policy", "load_base"),
    "EMBEDDED": ("marft_agents.models.policy", "EMBEDDED"),
    "embedded_model_path": ("marft_agents.models.policy", "embedded_model_path"),
    "Sampling": ("marft_agents.models.policy", "Sampling"),
    "Generation": ("marft_agents.models.policy", "Generation"),
    "Engine": ("marft_agents.engines.base", "Engine"),
    "Request": ("marft_agents.engines.base", "Request"),
    "make_engine": ("marft_agents.engines", "make_engine"),
    "RolloutEngine": ("marft_agents.rollout.layered", "RolloutEngine"),
    "Episode": ("marft_agents.rollout.layered", "Episode"),
    "AgentStep": ("marft_agents.rollout.layered", "AgentStep"),
    # TRL's GRPOTrainer on marft envs (needs the adapters extra)
    "MarftRollout": ("marft_agents.rollout.trl", "MarftRollout"),
    "agent_step_dataset": ("marft_agents.rollout.trl", "agent_step_dataset"),
    "env_reward": ("marft_agents.rollout.trl", "env_reward"),
    "solo_dataset": ("marft_agents.rollout.trl", "solo_dataset"),
    "solo_reward": ("marft_agents.rollout.trl", "solo_reward"),
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
