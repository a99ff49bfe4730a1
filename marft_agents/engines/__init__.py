"""Generation engines: what samples the agents' actions during rollouts (``generation.engine``).

- ``hf`` (:mod:`.hf`, the default): transformers' ``generate`` on the policy's own model;
- ``vllm`` (:mod:`.vllm`): one vLLM engine for the base model serving every agent's LoRA adapter, a
  whole layer of requests in one call (its own venv: ``make test-vllm``; docs/engines.md).

Every sampler of the package goes through an :class:`Engine`; beside these two, the rollout workers'
per-episode sampler (:mod:`.seeded`) and the TRL rollout's engine over a ``GRPOTrainer``'s model
(:mod:`.trl`). Only the engines and the model layer's helper (:func:`marft_agents.models.lm.generate`)
call a model's ``generate`` (``tests/agents/test_generation_path.py``).
"""

from __future__ import annotations

from typing import Any

from marft_agents.engines.base import Engine
from marft_agents.models.policy import LaMASPolicy

ENGINES = ("hf", "vllm")

__all__ = ["ENGINES", "Engine", "make_engine"]


def make_engine(name: str, policy: LaMASPolicy, *, merge_lora: bool = False, **vllm_options: Any) -> Engine:
    """The engine ``name`` for ``policy``: ``hf`` (``merge_lora``: generate from merged weights) or ``vllm``, which
    takes ``vllm_options``, :class:`~marft_agents.engines.vllm.VLLMEngine`'s keywords (``model``, ``work_dir``,
    ``dtype``, ``kv_cache_gb``, ``threads``, ``max_loras``, ``seed``, ``max_new_tokens``; see ``EngineConfig``);
    the hf engine has no use for them."""
    if name == "hf":
        from marft_agents.engines.hf import HFEngine

        return HFEngine(policy, merge_lora=merge_lora)
    if name == "vllm":
        from marft_agents.engines.vllm import VLLMEngine

        return VLLMEngine(policy, **vllm_options)
    raise ValueError(f"unknown generation engine {name!r}: use one of {list(ENGINES)}")
