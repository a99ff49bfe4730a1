"""Generation engines side by side: rollout tokens/s of ``vllm`` (with adapters) vs ``hf``, and adapter sync.

    .venv-vllm/bin/python benchmarks/engines.py [--model embedded|PATH] [--episodes 32] [--repeats 2]
        [--max-new-tokens 48] [--threads 2] [--dtype float32]

Runs in the vLLM venv (``make test-vllm`` builds it), where both engines work. For each engine:
``RolloutEngine.collect`` of ``--episodes`` ``marft/MathChain-v0`` episodes (2 agents, 2 layers, one
LoRA adapter each, both moved off their zero init so the adapters do something) at temperature 0.7,
after one warm-up collect; throughput is real response tokens / wall seconds of the collect (prompt
building and env steps included), median over ``--repeats``. The hf engine makes one ``generate`` per
adapter per layer, the vllm engine one per layer. Then, with the vllm engine, the seconds of
``engine.sync`` (write both adapters, register them under new names, drop the old ones), median of
5, and the share of an update it takes next to that update's collect (a MARFT update's training on
the same batch is timed too, with the hf engine's episodes). Results go to
``benchmarks/results/engines.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import marft_envs  # noqa: E402
from marft_agents import LaMASPolicy, RolloutEngine, Sampling, algorithms, load_base  # noqa: E402
from marft_agents.engines import make_engine  # noqa: E402

ENV = "marft/MathChain-v0"


def build_policy(model: str) -> LaMASPolicy:
    base, tokenizer = load_base(model)
    policy = LaMASPolicy(
        base,
        tokenizer,
        marft_envs.make(ENV).possible_agents,
        lora_targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    )
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for adapter in policy.adapters:
            for p in policy.parameters(adapter):
                p.add_(0.02 * torch.randn(p.shape, generator=generator))
    return policy


def throughput(policy, engine, episodes: int, repeats: int, max_new_tokens: int) -> dict:
    envs = [marft_envs.make(ENV) for _ in range(episodes)]
    rollout = RolloutEngine(policy, Sampling(0.7, max_new_tokens), engine=engine)
    rollout.collect(envs, range(min(episodes, 4)))  # warm-up
    runs, batch = [], []
    for r in range(repeats):
        calls = rollout.generate_calls
        t0 = time.perf_counter()
        batch = rollout.collect(envs, range(1000 * (r + 1), 1000 * (r + 1) + episodes))
        wall = time.perf_counter() - t0
        tokens = sum(len(s.response) for e in batch for s in e.steps)
        runs.append({"wall_s": wall, "tokens": tokens, "tok_per_s": tokens / wall, "generate_calls": rollout.generate_calls - calls})
    return {"runs": runs, "tok_per_s": statistics.median(r["tok_per_s"] for r in runs)}, batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "engines.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    policy = build_policy(args.model)
    result: dict = {
        "model": args.model,
        "env": ENV,
        "episodes": args.episodes,
        "max_new_tokens": args.max_new_tokens,
        "threads": args.threads,
        "vllm_dtype": args.dtype,
    }
    hf, batch = throughput(policy, make_engine("hf", policy), args.episodes, args.repeats, args.max_new_tokens)
    result["hf"] = hf
    print(f"hf:   {hf['tok_per_s']:7.1f} tok/s  ({hf['runs'][0]['generate_calls']} generate calls per collect)", flush=True)

    learner = algorithms.build_learner("marft", policy, algorithms.config_class("marft")(), 0.7)
    t0 = time.perf_counter()
    learner.update(batch, 0, np.random.default_rng(0))
    result["marft_update_training_s"] = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as work:
        t0 = time.perf_counter()
        engine = make_engine(
            "vllm", policy, model=args.model, work_dir=work, dtype=args.dtype, threads=args.threads, max_new_tokens=args.max_new_tokens
        )
        result["vllm_start_s"] = time.perf_counter() - t0
        try:
            vllm, _ = throughput(policy, engine, args.episodes, args.repeats, args.max_new_tokens)
            syncs = []
            for v in range(1, 6):
                t0 = time.perf_counter()
                engine.sync(v)
                syncs.append(time.perf_counter() - t0)
        finally:
            engine.close()
    result["vllm"] = vllm
    result["vllm_sync_s"] = statistics.median(syncs)
    collect_s = statistics.median(r["wall_s"] for r in vllm["runs"])
    update_s = collect_s + result["marft_update_training_s"] + result["vllm_sync_s"]
    result["sync_share_of_update"] = result["vllm_sync_s"] / update_s
    result["vllm_over_hf"] = vllm["tok_per_s"] / hf["tok_per_s"]
    print(
        f"vllm: {vllm['tok_per_s']:7.1f} tok/s  ({vllm['runs'][0]['generate_calls']} generate calls per collect), "
        f"{result['vllm_over_hf']:.2f}x hf; start {result['vllm_start_s']:.1f} s",
        flush=True,
    )
    print(
        f"sync: {1000 * result['vllm_sync_s']:.1f} ms = {100 * result['sync_share_of_update']:.2f}% of an update "
        f"(collect {collect_s:.1f} s + training {result['marft_update_training_s']:.1f} s)"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
