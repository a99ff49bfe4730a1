"""How much of this machine's matmul peak a real-model update reaches: generation and the learner.

    .venv/bin/python benchmarks/roofline.py [--threads 2] [--episodes 16] [--repeats 3]

One process, alone, SmolLM2-135M-Instruct in float32 with one LoRA adapter per agent (r 8 on every
linear layer, the trainer's defaults), ``marft/MathChain-v0`` (``synthetic:0``, ``general-v0``), 48
new tokens at T 0.7: the "16 episodes of the 2-agent chain" of issue 22.

1. **Peak**: the best of ``--repeats`` timed ``torch.mm`` on square 2048 matrices and on the model's
   own shapes (4096 tokens through the 576 -> 1536 MLP, its transpose, and the 576 -> 49152 output
   layer), in float32, and in bfloat16 where the CPU has native bf16 (``marft_agents/models/dtype.py``).
2. **Generation**: ``RolloutEngine.collect`` of the episodes; its FLOPs counted by
   ``torch.utils.flop_counter.FlopCounterMode`` (matmuls and attention) on a copy of the same call,
   its time from a run without the counter.
3. **Learner**: one MARFT update (library defaults: one epoch, minibatches of 64 agent-steps, the
   critic's feature pass included) on those episodes, counted and timed the same way.
4. **Bare forward+backward, packed**: the same real tokens (every step's prompt and response) packed
   end to end into rows of 256 with no padding, one forward and backward through the same LoRA model
   (cross-entropy on every position). Learner tokens/s over this is issue 22's "PPO-step tokens/s
   >= 0.8x of a bare forward+backward of the same tokens, packed".

Each timed figure is the median of ``--repeats``, with CPU seconds (``time.process_time``) beside
wall seconds; "fraction of peak" is counted FLOPs per wall second over the best fp32 matmul rate.
Writes ``benchmarks/results/roofline.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

MODEL, ENV, KWARGS = "smollm2-135m-instruct", "marft/MathChain-v0", {"problems": "synthetic:0", "profile": "general-v0"}
SHAPES = {"square 2048": (2048, 2048, 2048), "MLP up 4096x576x1536": (4096, 576, 1536), "MLP down 4096x1536x576": (4096, 1536, 576)}
SHAPES["output layer 1024x576x49152"] = (1024, 576, 49152)
PACK = 256


def cpu() -> dict:
    """The CPU's model name and the flags that matter for matmuls."""
    from marft_agents.models.dtype import cpu_flags

    name = "unknown"
    try:
        name = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
    return {"model": name, "cores": os.cpu_count(), "flags": [f for f in wanted if f in cpu_flags()]}


def timed(fn, repeats: int) -> dict:
    """Median wall and CPU seconds of ``repeats`` calls (after one warm-up call)."""
    fn()
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "walls": walls}


def rates(measured: dict, tokens: int, peak: float) -> dict:
    """``measured`` (wall seconds, counted FLOPs) with its tokens, GFLOP/s, share of ``peak`` and tokens/s."""
    gflops = measured["flops"] / measured["wall_s"] / 1e9
    return {
        **measured,
        "tokens": tokens,
        "gflops": gflops,
        "fraction_of_fp32_peak": gflops / peak,
        "tokens_per_s": tokens / measured["wall_s"],
    }


def counted(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def matmul_peak(dtype: torch.dtype, repeats: int) -> dict:
    rows = {}
    for name, (m, k, n) in SHAPES.items():
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        t = timed(lambda: torch.mm(a, b), max(repeats, 5))
        rows[name] = 2 * m * k * n / min(t["walls"]) / 1e9
    return {"gflops": rows, "best_gflops": max(rows.values())}


def packed_forward_backward(policy, steps, adapter: str):
    """One forward+backward of every step's tokens, packed into rows of PACK with no padding."""
    flat = [t for s in steps for t in (*s.prompt, *s.response)]
    rows = len(flat) // PACK
    ids = torch.tensor(flat[: rows * PACK]).view(rows, PACK)  # (rows, PACK)

    def run():
        with policy.active(adapter) as model:
            logits = model(input_ids=ids).logits  # (rows, PACK, V)
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
            loss.backward()
        for p in policy.parameters(adapter):
            p.grad = None

    return run, rows * PACK


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "roofline.json")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    import marft_envs
    from marft_agents import RolloutEngine, Sampling, TrainConfig, algorithms, build_policy
    from marft_agents.models.dtype import native_bf16

    result: dict = {"cpu": cpu(), "threads": args.threads, "episodes": args.episodes, "torch": torch.__version__}
    result["peak"] = {"float32": matmul_peak(torch.float32, args.repeats)}
    if native_bf16():
        result["peak"]["bfloat16"] = matmul_peak(torch.bfloat16, args.repeats)
    peak = result["peak"]["float32"]["best_gflops"]
    print(json.dumps(result["peak"], indent=1), flush=True)

    config = TrainConfig(model=MODEL, env=ENV, env_kwargs=KWARGS, threads=args.threads)
    envs = [marft_envs.make(ENV, **KWARGS) for _ in range(args.episodes)]
    policy = build_policy(config, envs[0].possible_agents)
    engine = RolloutEngine(policy, Sampling(temperature=0.7, max_new_tokens=48))

    def collect():
        torch.manual_seed(0)
        with torch.no_grad():
            return engine.collect(envs, range(args.episodes), seed_of=lambda i: 1_000 + i)

    episodes = collect()
    steps = [s for e in episodes for s in e.steps]
    generated = sum(len(s.response) for s in steps)
    gen = rates({**timed(collect, args.repeats), "flops": counted(collect)}, generated, peak)
    result["generation"] = gen
    print("generation", json.dumps({k: v for k, v in gen.items() if k != "walls"}), flush=True)

    MARFTConfig, MARFT = algorithms.lookup("marft")
    algo = MARFT(policy, MARFTConfig(), temperature=0.7)
    rng = np.random.default_rng(0)
    tokens = sum(len(s.prompt) + len(s.response) for s in steps)
    learn = {**timed(lambda: algo.update(episodes, 0, rng), args.repeats), "flops": counted(lambda: algo.update(episodes, 0, rng))}
    learn = rates(learn, tokens, peak)
    result["learner"] = learn
    print("learner", json.dumps({k: v for k, v in learn.items() if k != "walls"}), flush=True)

    run, packed_tokens = packed_forward_backward(policy, steps, policy.adapters[0])
    bare = rates({**timed(run, args.repeats), "flops": counted(run)}, packed_tokens, peak)
    result["bare_forward_backward"] = bare
    result["learner_over_bare_tokens_per_s"] = learn["tokens_per_s"] / bare["tokens_per_s"]
    print("bare", json.dumps({k: v for k, v in bare.items() if k != "walls"}), flush=True)
    print(f"learner / bare tokens per second: {result['learner_over_bare_tokens_per_s']:.2f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
