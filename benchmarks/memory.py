"""Peak memory of a LaMAS policy at a training step: 1 vs 4 agents on one shared base with LoRA, against full copies.

    .venv/bin/python benchmarks/memory.py [--model embedded|PATH|random|smollm2-135m-instruct] [--repeats 3]
        [--dtype float32|bfloat16] [--generate-only] [--threads 1]

Each configuration runs in a fresh subprocess (so peaks do not leak between them). The model:

- ``--model`` a named model (``marft models list``, e.g. ``smollm2-135m-instruct``): its own weights and
  tokenizer, loaded with ``load_base`` (fetched and converted on first use);
- otherwise (``embedded``, a tokenizer ``PATH``, ``random``): a randomly initialised Llama big enough for
  the weights to dominate (hidden 768, 12 layers, 12 heads, FF 3072, that tokenizer; ~114 M parameters,
  ~455 MB in fp32).

The child wraps the model in ``LaMASPolicy`` (``mode="lora"``: one LoRA adapter per agent, r 8 on the
trainer's default targets, every linear layer, on one base; ``mode="copies"``: a full trainable copy per
agent), plays ``--episodes`` ``marft/MathChain-v0`` episodes with ``n_agents`` agents through the
``RolloutEngine`` (``--max-new-tokens`` new tokens, T 1), then runs one MARFT update on them (one
minibatch of all episodes, one epoch: every adapter's forward, backward and AdamW step, the critic's
too; AdamW's state is allocated on that first step, so this is a training peak). It reports its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) plus the current RSS after each stage. Torch's CPU
allocations do not go through Python's allocator, so ``tracemalloc`` would not see them: RSS is the
measure. A ``baseline`` child only imports torch, transformers, peft and the policy module: subtract it
to read the increments. ``--generate-only`` stops after one ``policy.generate`` per agent (the earlier
version of this benchmark). Configurations are interleaved (the order rotates each repeat); medians.

Each child keeps glibc's dynamic mmap threshold, as a run does; ``--hold-mmap-threshold`` holds it
at 128 KiB (``marft_agents/training/allocator.py``), the lower peak that costs ~1.4x CPU time per update
(docs/real-models.md, "Memory at a training peak").

Goal: 4 agents with LoRA peak at most 1.3x one agent. Results go to ``benchmarks/results/memory.json``
(``memory-<model>.json`` for a named model).
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


def child(
    config: str,
    model_name: str,
    tokenizer_dir: str,
    *,
    dtype: str,
    update: bool,
    episodes: int,
    max_new_tokens: int,
    threads: int,
    allocator_setting: bool = False,
) -> dict:
    """Run one configuration in this (fresh) process and return its measurements."""
    import torch

    from marft_agents.training import allocator

    if allocator_setting:  # --hold-mmap-threshold: glibc's mmap threshold held fixed (runs do not)
        allocator.hold_mmap_threshold()

    torch.set_num_threads(threads)
    import peft  # noqa: F401  (the baseline pays for every import the others pay for)
    import transformers  # noqa: F401

    import marft_envs
    from marft_agents import LaMASPolicy, RolloutEngine, Sampling, TrainConfig, algorithms, load_base

    MARFTConfig, MARFT = algorithms.lookup("marft")  # imported with the rest, before the "imports" stage is measured

    stages = {"imports": _rss_mb()}
    out = {"config": config}
    if CONFIGS[config] is not None:
        mode, n_agents = CONFIGS[config]
        if model_name:  # a named model: its own weights
            model, tokenizer = load_base(model_name, dtype=getattr(torch, dtype))
        else:
            from transformers import AutoTokenizer

            from marft_agents.models.tiny import build_model

            tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
            model = build_model(tokenizer, seed=0, **SHAPE).to(getattr(torch, dtype))
        out["parameters"] = sum(p.numel() for p in model.parameters())
        stages["model"] = _rss_mb()
        envs = [marft_envs.make("marft/MathChain-v0", n_agents=n_agents) for _ in range(episodes)]
        policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents, mode=mode, lora_targets=tuple(TrainConfig().lora_targets))
        stages["policy"] = _rss_mb()
        out["trainable_parameters"] = sum(p.numel() for a in policy.adapters for p in policy.parameters(a))
        torch.manual_seed(0)
        if update:
            episodes_ = RolloutEngine(policy, Sampling(temperature=1.0, max_new_tokens=max_new_tokens)).collect(envs, range(episodes))
            stages["rollout"] = _rss_mb()
            out["tokens"] = sum(len(s.prompt) + len(s.response) for e in episodes_ for s in e.steps)
            algo = MARFT(policy, MARFTConfig(ppo_epochs=1, minibatch_size=episodes), temperature=1.0)
            import numpy as np

            algo.update(episodes_, 0, np.random.default_rng(0))
            stages["update"] = _rss_mb()
        else:
            envs[0].reset(seed=0)
            prompts = [policy.prompt(envs[0].observe(envs[0].possible_agents[0]))] * 2
            for adapter in policy.adapters:
                policy.generate(prompts, adapter, Sampling(temperature=1.0, max_new_tokens=max_new_tokens))
            stages["generate"] = _rss_mb()
        out["agents"] = len(policy.agents)
        out["adapters"] = len(policy.adapters)
    out["rss_mb"] = stages
    out["peak_mb"] = _peak_mb()
    return out


def run_child(config: str, model_name: str, tokenizer_dir: str, args) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        config,
        "--tokenizer",
        tokenizer_dir,
        "--dtype",
        args.dtype,
        "--episodes",
        str(args.episodes),
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--threads",
        str(args.threads),
    ]
    cmd += ["--model", model_name] if model_name else []
    cmd += ["--generate-only"] if args.generate_only else []
    cmd += ["--hold-mmap-threshold"] if args.hold_mmap_threshold else []
    env = dict(os.environ)
    if args.mmap_threshold:  # a fixed threshold: glibc returns every freed block above it to the system at once
        env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child {config} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - t0
    return result


def med(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default=None,
        help="a named model (its own weights), or whose tokenizer the random Llama uses: embedded | "
        "PATH | random (default: embedded if present, else random)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the base's dtype")
    parser.add_argument("--episodes", type=int, default=4, help="episodes collected and trained on per child")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch threads in each child")
    parser.add_argument("--generate-only", action="store_true", help="stop after one generate per agent, no update")
    parser.add_argument(
        "--mmap-threshold",
        type=int,
        default=0,
        help="MALLOC_MMAP_THRESHOLD_ for the children, in bytes (0: none set, so the children keep glibc's "
        "dynamic threshold as a run does, or hold 128 KiB with --hold-mmap-threshold)",
    )
    parser.add_argument(
        "--hold-mmap-threshold",
        action="store_true",
        help="hold glibc's mmap threshold at 128 KiB in the children (marft_agents/training/allocator.py; runs keep glibc's dynamic threshold)",
    )
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"a subset of {','.join(CONFIGS)}")
    parser.add_argument("--out", default=None, help="default: benchmarks/results/memory[-<named model>].json")
    parser.add_argument("--child", choices=list(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from marft_agents.models import named

    model_name = args.model if args.model in named.REGISTRY else ""
    if args.child:
        print(
            json.dumps(
                child(
                    args.child,
                    model_name,
                    args.tokenizer,
                    dtype=args.dtype,
                    update=not args.generate_only,
                    episodes=args.episodes,
                    max_new_tokens=args.max_new_tokens,
                    threads=args.threads,
                    allocator_setting=args.hold_mmap_threshold,
                )
            )
        )
        return {}

    sys.path.insert(0, str(Path(__file__).parent))
    from rollout_throughput import resolve_model

    from marft_agents import embedded_model_path
    from marft_agents.models.policy import EMBEDDED

    out_path = Path(args.out or RESULTS / (f"memory-{model_name}.json" if model_name else "memory.json"))
    started = time.perf_counter()
    names = [n for n in CONFIGS if n in args.configs.split(",")]
    if not {"baseline", "lora-1"} <= set(names):
        raise SystemExit("--configs must include baseline and lora-1 (the ratios are taken against them)")
    runs: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="marft-bench-") as tmp:
        if model_name:
            named.resolve(model_name)  # fetch once here, not in every child
            tokenizer_dir, label = "", f"{model_name} (its own weights, {args.dtype})"
        else:
            path, label = resolve_model(args.model, Path(tmp))
            tokenizer_dir = str(embedded_model_path()) if path == EMBEDDED else path
            label = (
                f"random Llama d{SHAPE['hidden_size']}, {SHAPE['num_layers']} layers, {SHAPE['num_heads']} heads, "
                f"FF {SHAPE['intermediate_size']} ({args.dtype}); tokenizer: {label}"
            )
        what = (
            "one generate per agent"
            if args.generate_only
            else f"{args.episodes} episodes x {args.max_new_tokens} new tokens, then one MARFT update"
        )
        print(f"model: {label}; {what}; {args.threads} thread(s)", flush=True)
        for r in range(args.repeats):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                res = run_child(name, model_name, tokenizer_dir, args)
                runs[name].append(res)
                print(
                    f"  rep {r} {name:<9} peak {res['peak_mb']:7.0f} MB  stages "
                    + ", ".join(f"{k} {v:.0f}" for k, v in res["rss_mb"].items())
                    + f"  ({res['wall_s']:.0f} s)",
                    flush=True,
                )

    peak = {n: med([x["peak_mb"] for x in runs[n]]) for n in names}
    base = peak["baseline"]["median"]
    params = next(x["parameters"] for x in runs["lora-1"])
    rows = []
    for n in names:
        inc = peak[n]["median"] - base
        ratio = peak[n]["median"] / peak["lora-1"]["median"]
        inc_ratio = inc / (peak["lora-1"]["median"] - base) if n != "baseline" else float("nan")
        trainable = runs[n][0].get("trainable_parameters")
        rows.append(
            {
                "config": n,
                "peak_mb": peak[n],
                "increment_mb": inc,
                "peak_over_lora1": ratio,
                "increment_over_lora1": inc_ratio,
                "trainable_parameters": trainable,
            }
        )
    head = f"{'config':<9} {'peak MB (min-max)':>22} {'over baseline':>14} {'peak/lora-1':>12} {'incr/lora-1':>12} {'trainable':>13}"
    lines = [f"model: {label}: {params:,} parameters ({params * 4 / 2**20:.0f} MiB in fp32); {what}", head, "-" * len(head)]
    for row in rows:
        p = row["peak_mb"]
        lines.append(
            f"{row['config']:<9} {p['median']:>8.0f} ({p['min']:.0f}-{p['max']:.0f}) {row['increment_mb']:>14.0f} "
            f"{row['peak_over_lora1']:>12.2f} {row['increment_over_lora1']:>12.2f} "
            f"{row['trainable_parameters'] if row['trainable_parameters'] is not None else '':>13}"
        )
    # the same ratios within each repeat (the children of one repeat ran back to back): their spread
    per_rep = {
        k: med([runs[k][r]["peak_mb"] / runs["lora-1"][r]["peak_mb"] for r in range(args.repeats)]) for k in names if k != "baseline"
    }
    for k, what_ in (("lora-4", "4 agents with LoRA"), ("copies-4", "4 full copies"), ("copies-1", "1 full copy")):
        if k in per_rep:
            ratio = peak[k]["median"] / peak["lora-1"]["median"]
            goal = f"; goal <= {GOAL}x: {'met' if ratio <= GOAL else 'MISSED'}" if k == "lora-4" else ""
            lines.append(
                f"{what_} / 1 agent with LoRA: {ratio:.3f}x peak (per repeat {per_rep[k]['min']:.3f}-{per_rep[k]['max']:.3f}{goal})"
            )
    print()
    print("\n".join(lines))
    result = {
        "benchmark": "memory",
        "model": label,
        "model_shape": None if model_name else SHAPE,
        "parameters": params,
        "dtype": args.dtype,
        "measured_at": what,
        "threads": args.threads,
        "repeats": args.repeats,
        "goal_lora4_over_lora1": GOAL,
        "lora4_over_lora1": peak["lora-4"]["median"] / peak["lora-1"]["median"] if "lora-4" in peak else None,
        "copies4_over_lora1": peak["copies-4"]["median"] / peak["lora-1"]["median"] if "copies-4" in peak else None,
        "mmap_threshold": args.mmap_threshold
        or ("held (marft_agents/training/allocator.py)" if args.hold_mmap_threshold else "glibc's dynamic default"),
        "per_repeat_over_lora1": per_rep,
        "rows": rows,
        "runs": runs,
        "wall_s": time.perf_counter() - started,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2))
    print(f"written to {out_path} ({result['wall_s']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
