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

from pathlib import Path

from marft_agents.engines.base import Engine, Request
from marft_agents.models.policy import LaMASPolicy

ENGINES = ("hf", "vllm")

__all__ = ["ENGINES", "Engine", "Request", "make_engine"]


def make_engine(
    name: str,
    policy: LaMASPolicy,
    *,
    model: str = "embedded",
    work_dir: str | Path | None = None,
    dtype: str = "float32",
    kv_cache_gb: float = 1.0,
    threads: int = 0,
    max_loras: int = 0,
    seed: int = 0,
    max_new_tokens: int = 48,
    merge_lora: bool = False,
) -> Engine:
    """The engine ``name`` for ``policy``; the other arguments are the vllm engine's (see ``EngineConfig``)."""
    if name == "hf":
        from marft_agents.engines.hf import HFEngine

        return HFEngine(policy, merge_lora=merge_lora)
    if name == "vllm":
        from marft_agents.engines.vllm import VLLMEngine

        return VLLMEngine(
            policy,
            model,
            work_dir=work_dir,
            dtype=dtype,
            kv_cache_gb=kv_cache_gb,
            threads=threads,
            max_loras=max_loras,
            seed=seed,
            max_new_tokens=max_new_tokens,
        )
    raise ValueError(f"unknown generation engine {name!r}: use one of {list(ENGINES)}")
