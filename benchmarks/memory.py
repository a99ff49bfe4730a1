"""Peak memory of a LaMAS policy: 1 vs 4 agents on one shared base with LoRA, against full copies.

    .venv/bin/python benchmarks/memory.py [--model embedded|PATH|random] [--repeats 3]

Each configuration runs in a fresh subprocess (so peaks do not leak between them), on a randomly
initialised Llama big enough for the weights to dominate (hidden 768, 12 layers, 12 heads, FF 3072,
the embedded model's tokenizer; ~114 M parameters, ~455 MB in fp32). The child builds the model,
wraps it in ``LaMASPolicy`` (``mode="lora"``: one LoRA adapter per agent, r 8 on q/v, on one base;
``mode="copies"``: a full trainable copy per agent), then runs one small ``policy.generate`` per
agent (2 prompts from ``marft/MathChain-v0``, 8 new tokens) and reports its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) plus the current RSS after each stage. A
``baseline`` child only imports torch, transformers, peft and the policy module: subtract it to
read the increments. Configurations are interleaved (the order rotates each repeat); medians.

Goal: 4 agents with LoRA peak at most 1.3x one agent. Results go to ``benchmarks/results/memory.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

RESULTS = Path(__file__).parent / "results"
SHAPE = dict(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072)
CONFIGS = {  # name -> (adapter mode, number of agents); None: baseline
    "baseline": None,
    "lora-1": ("lora", 1),
    "lora-4": ("lora", 4),
    "copies-1": ("copies", 1),
    "copies-4": ("copies", 4),
}
GOAL = 1.3


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(config: str, tokenizer_dir: str) -> dict:
    """Run one configuration in this (fresh) process and return its measurements."""
    import torch

    torch.set_num_threads(1)
    import peft  # noqa: F401  (the baseline pays for every import the others pay for)
    import transformers  # noqa: F401

    import marft_envs
    from marft_agents.policy import LaMASPolicy, Sampling

    stages = {"imports": _rss_mb()}
    out = {"config": config}
    if CONFIGS[config] is not None:
        from transformers import AutoTokenizer

        from marft_agents.models.tiny import build_model

        mode, n_agents = CONFIGS[config]
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        model = build_model(tokenizer, seed=0, **SHAPE)
        out["parameters"] = sum(p.numel() for p in model.parameters())
        stages["model"] = _rss_mb()
        env = marft_envs.make("marft/MathChain-v0", n_agents=n_agents)
        policy = LaMASPolicy(model, tokenizer, env.possible_agents, mode=mode)
        stages["policy"] = _rss_mb()
        out["trainable_parameters"] = sum(p.numel() for a in policy.adapters for p in policy.parameters(a))
        env.reset(seed=0)
        prompts = [policy.prompt(env.observe(env.possible_agents[0]))] * 2
        torch.manual_seed(0)
        for adapter in policy.adapters:
            policy.generate(prompts, adapter, Sampling(temperature=1.0, max_new_tokens=8))
        stages["generate"] = _rss_mb()
        out["agents"] = len(policy.agents)
        out["adapters"] = len(policy.adapters)
    out["rss_mb"] = stages
    out["peak_mb"] = _peak_mb()
    return out


def run_child(config: str, tokenizer_dir: str) -> dict:
    cmd = [sys.executable, __file__, "--child", config, "--tokenizer", tokenizer_dir]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {config} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - t0
    return result


def med(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None,
                        help="whose tokenizer to use: embedded | PATH | random (default: embedded if present, else random)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "memory.json"))
    parser.add_argument("--child", choices=list(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.tokenizer)))
        return {}

    sys.path.insert(0, str(Path(__file__).parent))
    from rollout_throughput import resolve_model

    from marft_agents.policy import EMBEDDED, embedded_model_path

    started = time.perf_counter()
    names = list(CONFIGS)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="marft-bench-") as tmp:
        path, label = resolve_model(args.model, Path(tmp))
        tokenizer_dir = str(embedded_model_path()) if path == EMBEDDED else path
        print(f"tokenizer: {label}", flush=True)
        for r in range(args.repeats):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                res = run_child(name, tokenizer_dir)
                runs[name].append(res)
                print(f"  rep {r} {name:<9} peak {res['peak_mb']:7.0f} MB  stages "
                      + ", ".join(f"{k} {v:.0f}" for k, v in res["rss_mb"].items()), flush=True)

    peak = {n: med([x["peak_mb"] for x in runs[n]]) for n in names}
    base = peak["baseline"]["median"]
    params = next(x["parameters"] for x in runs["lora-1"])
    rows = []
    for n in names:
        inc = peak[n]["median"] - base
        ratio = peak[n]["median"] / peak["lora-1"]["median"]
        inc_ratio = inc / (peak["lora-1"]["median"] - base) if n != "baseline" else float("nan")
        trainable = runs[n][0].get("trainable_parameters")
        rows.append({"config": n, "peak_mb": peak[n], "increment_mb": inc, "peak_over_lora1": ratio,
                     "increment_over_lora1": inc_ratio, "trainable_parameters": trainable})
    head = f"{'config':<9} {'peak MB (min-max)':>22} {'over baseline':>14} {'peak/lora-1':>12} {'incr/lora-1':>12} {'trainable':>13}"
    lines = [f"model: random Llama d{SHAPE['hidden_size']}, {SHAPE['num_layers']} layers, {SHAPE['num_heads']} heads, "
             f"FF {SHAPE['intermediate_size']}: {params:,} parameters ({params * 4 / 2**20:.0f} MiB fp32); "
             f"tokenizer: {label}", head, "-" * len(head)]
    for row in rows:
        p = row["peak_mb"]
        lines.append(f"{row['config']:<9} {p['median']:>8.0f} ({p['min']:.0f}-{p['max']:.0f}) {row['increment_mb']:>14.0f} "
                     f"{row['peak_over_lora1']:>12.2f} {row['increment_over_lora1']:>12.2f} "
                     f"{row['trainable_parameters'] if row['trainable_parameters'] is not None else '':>13}")
    lora4 = peak["lora-4"]["median"] / peak["lora-1"]["median"]
    lines.append(f"4 agents with LoRA / 1 agent: {lora4:.3f}x peak (goal <= {GOAL}x: {'met' if lora4 <= GOAL else 'MISSED'}); "
                 f"4 full copies / 1 agent: {peak['copies-4']['median'] / peak['lora-1']['median']:.2f}x")
    print()
    print("\n".join(lines))
    result = {
        "benchmark": "memory",
        "model_shape": SHAPE,
        "parameters": params,
        "tokenizer": label,
        "repeats": args.repeats,
        "goal_lora4_over_lora1": GOAL,
        "lora4_over_lora1": lora4,
        "copies4_over_lora1": peak["copies-4"]["median"] / peak["lora-1"]["median"],
        "rows": rows,
        "runs": runs,
        "wall_s": time.perf_counter() - started,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"written to {args.out} ({result['wall_s']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
