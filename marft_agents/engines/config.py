"""Sections of a run's config about drawing tokens: ``generation.*`` (which engine samples the rollouts, and its
settings) and ``eval.*`` (how evaluation draws: :func:`marft_agents.rollout.evaluation.evaluate`)."""

from __future__ import annotations

from dataclasses import dataclass

from marft_agents.engines import ENGINES
from marft_agents.settings.fields import (
    AT_LEAST_ONE,
    EVAL_TEMPERATURE,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    TOP_P,
    choice,
    ranged,
)

VLLM_DTYPES = ("float32", "bfloat16", "float16")
"""Values of ``generation.dtype``: the dtypes vLLM serves the base in."""


@dataclass
class EngineConfig:
    """How rollouts are generated: the engine and its settings (``generation.*`` keys; docs/engines.md)."""

    engine: str = choice("hf", ENGINES)
    """"hf" (transformers' generate on the trained model) or "vllm" (one vLLM engine serving every agent's adapter; `make test-vllm` installs it)."""
    dtype: str = choice("float32", VLLM_DTYPES)
    """vllm: the engine's dtype; float32 keeps behaviour log-probs within 1e-4 of the trainer's, bfloat16 is faster but off by up to ~0.2."""
    kv_cache_gb: float = ranged(1.0, POSITIVE)
    """vllm on CPU: memory for the KV cache, in whole GB (VLLM_CPU_KVCACHE_SPACE; vLLM reads an integer)."""
    threads: int = ranged(0, NON_NEGATIVE)
    """vllm on CPU: cores its OpenMP threads bind to, 0-(N-1) (VLLM_CPU_OMP_THREADS_BIND; 0: every core)."""
    max_loras: int = ranged(0, NON_NEGATIVE)
    """vllm: adapters one generate call may mix (0: the policy's number of adapters, the least that works)."""
    merge_lora: bool = False
    """hf: generate with the adapter merged into a copy of the base's weights (one matmul per layer instead of three; the base comes back bit-identical); samples move by float rounding, so off by default."""
    lean_decode: bool = True
    """hf: decode Llama-family models (llama, qwen2) with marft's lean step (models/decode.py: the model's computation as plain tensor code, q/k/v and gate/up fused); false: the model's forward at every step."""
    tis_cap: float | None = ranged(None, AT_LEAST_ONE)
    """Truncated importance sampling for engine/trainer numeric mismatch: the trainer recomputes behaviour log-probs and weights each term by min(pi_trainer/pi_engine, tis_cap) (>= 1; None: off; docs/engines.md)."""


@dataclass
class EvalSampling:
    """How an evaluation draws the agents' actions: greedy (the default), or sampled with settings of its own."""

    temperature: float = ranged(0.0, EVAL_TEMPERATURE)
    """Evaluation's sampling temperature: 0 is greedy decoding (the default: every evaluation of the weights alike),
    else >= 0.001."""
    top_k: int = ranged(0, NON_NEGATIVE)
    """When evaluation samples: draw among the ``top_k`` likeliest tokens only (0: all)."""
    top_p: float = ranged(1.0, TOP_P)
    """When evaluation samples: draw among the likeliest tokens whose probability reaches ``top_p``, in (0, 1] (1.0:
    all)."""
    seed: int = ranged(0, SEED)
    """When evaluation samples: the seed of its draws (an evaluation draws the same tokens from the same weights)."""
