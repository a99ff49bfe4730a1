"""Where one MARFT update's time goes: generation, prompt building, env + reward, training.

    .venv/bin/python benchmarks/update_split.py [--model embedded|PATH|random] [--updates 5] [--threads 1]

Runs the real training loop, ``marft_agents.training.trainer.train``, in the demo-like setting
(``marft/MathChain-v0``, 2 agents, one LoRA adapter each, 64 episodes per update,
``max_new_tokens`` 48, the default temperature, LoRA targets and MARFT hyper-parameters of
``TrainConfig``) for a few updates into a temporary run folder (held-out evaluation cut to a few
problems, ``eval_rounds`` 0, no intermediate checkpoints), then reads ``time/generation_s``,
``time/prompts_s`` (chat template + tokenisation, policy work), ``time/env_s`` (env steps and
rewards), ``time/training_s`` (the update, critic features included) and ``time/update_s`` from
``metrics.jsonl``. "other" is the rest of ``update_s``.

Reports per-update medians (and min–max) in seconds and as a share of the update. Goal: env + reward
at most 5 % of an update. With ``--model random`` every response runs to ``max_new_tokens`` and
nothing is solved, so generation and training are longer than with the embedded model. Threads: 1
by default (the demo leaves torch's default, 2 here): on a 2-core machine shared with another job,
2-thread torch stalls in OpenMP barriers whenever the other job takes a core, which would inflate
generation and training, not the env; ``--threads 0`` for
torch's default. Results go to ``benchmarks/results/update_split.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402

from marft_agents import TrainConfig, train  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from rollout_throughput import resolve_model  # noqa: E402

RESULTS = Path(__file__).parent / "results"
GOAL_ENV_SHARE = 0.05


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="embedded | PATH | random (default: embedded if present, else random)")
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=64, help="episodes per update")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default, as the demo)")
    parser.add_argument("--out", default=str(RESULTS / "update_split.json"))
    args = parser.parse_args(argv)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="marft-bench-") as tmp:
        path, label = resolve_model(args.model, Path(tmp))
        config = TrainConfig(
            model=path,
            updates=args.updates,
            episodes_per_update=args.episodes,
            max_new_tokens=args.max_new_tokens,
            eval_episodes=16,
            eval_rounds=0,
            eval_every=0,
            checkpoint_every=0,
            threads=args.threads,
            run_dir=str(Path(tmp) / "run"),
            seed=0,
        )
        load_before = os.getloadavg()
        cpu0, wall0 = cpu_s(), time.perf_counter()
        train(config, progress=False, quiet=True)
        train_wall, train_cpu = time.perf_counter() - wall0, cpu_s() - cpu0
        load_after = os.getloadavg()
        metrics = [json.loads(line) for line in (Path(config.run_dir) / "metrics.jsonl").read_text().splitlines()]

    rows = []
    for m in metrics:
        rows.append(
            {
                "update": m["update"],
                "generation_s": m["time/generation_s"],
                "prompts_s": m["time/prompts_s"],
                "env_s": m["time/env_s"],
                "training_s": m["time/training_s"],
                "update_s": m["time/update_s"],
                "other_s": m["time/update_s"] - m["time/generation_s"] - m["time/prompts_s"] - m["time/env_s"] - m["time/training_s"],
                "response_tokens": m["train/response_tokens"],
                "solved": m["train/solved"],
            }
        )
    keys = ["generation_s", "prompts_s", "env_s", "training_s", "other_s", "update_s"]
    med = {k: spread([r[k] for r in rows]) for k in keys}
    share = {k: spread([r[k] / r["update_s"] for r in rows]) for k in keys[:-1]}
    env_share = share["env_s"]["median"]

    threads = torch.get_num_threads()
    lines = [
        f"model: {label}; MathChain-v0, 2 agents (LoRA), {args.episodes} episodes/update, max_new_tokens "
        f"{args.max_new_tokens}, {args.updates} updates, torch threads {threads}",
        f"{'part':<34} {'median s':>9} {'min-max s':>15} {'share':>7} {'share min-max':>15}",
        "-" * 84,
    ]
    names = {
        "generation_s": "generation",
        "prompts_s": "prompt building (chat template)",
        "env_s": "env + reward",
        "training_s": "training (MARFT update)",
        "other_s": "other",
        "update_s": "whole update",
    }
    for k in keys:
        s = share.get(k)
        lines.append(
            f"{names[k]:<34} {med[k]['median']:>9.3f} {med[k]['min']:>7.3f}-{med[k]['max']:<7.3f} "
            + (f"{s['median']:>7.1%} {s['min']:>7.1%}-{s['max']:<7.1%}" if s else f"{'100%':>7}")
        )
    lines.append(
        f"mean response tokens per action {statistics.median(r['response_tokens'] for r in rows):.1f}; "
        f"train solved {statistics.median(r['solved'] for r in rows):.1%}"
    )
    lines.append(
        f"env + reward share: {env_share:.1%} (goal <= {GOAL_ENV_SHARE:.0%}: {'met' if env_share <= GOAL_ENV_SHARE else 'MISSED'})"
    )
    lines.append(
        f"load average before/after: {load_before[0]:.2f}/{load_after[0]:.2f}; process CPU/wall during "
        f"train(): {train_cpu / train_wall:.2f} (threads {threads})"
    )
    print("\n".join(lines))
    result = {
        "benchmark": "update_split",
        "model": label,
        "config": {
            "env": "marft/MathChain-v0",
            "episodes_per_update": args.episodes,
            "max_new_tokens": args.max_new_tokens,
            "updates": args.updates,
            "torch_threads": threads,
        },
        "median_s": med,
        "share_of_update": share,
        "env_share": env_share,
        "goal_env_share": GOAL_ENV_SHARE,
        "per_update": rows,
        "load_average_before_after": [load_before, load_after],
        "cpu_over_wall": train_cpu / train_wall,
        "wall_s": time.perf_counter() - started,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"written to {args.out} ({result['wall_s']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
