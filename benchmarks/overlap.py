"""Collection overlapped with the update (``distributed.overlap``): episodes per second and a short learning curve.

    .venv/bin/python benchmarks/overlap.py [--model embedded] [--updates 30] [--episodes 16] [--eval-episodes 200] [--repeats 1]

Three ways to run the same training (``marft_agents.training.trainer.train``: MARFT on ``marft/MathChain-v0``,
the ``TrainConfig`` defaults otherwise, seed 0), one after another on this machine:

- ``in-process``: ``distributed.workers=0``, the trainer with this machine's cores as threads (the default);
- ``workers``: one rollout worker (1 thread) and the trainer (1 thread), collection then update;
- ``overlap``: the same two processes, ``distributed.overlap=true``: the worker plays update k+1's
  episodes while the trainer learns from update k's, which are one update stale
  (``generation.tis_cap=2`` corrects for it; no batch is played across a checkpoint, and there is
  none here but the last).

Per variant: episodes per second over updates 2..N (``episodes_per_update * (N-1) / sum(time/update_s)``),
the whole command's wall and CPU seconds (the machine's, from /proc/stat: the trainer and the Ray
worker together; run it alone), ``train/solved`` per update (the curve), and greedy held-out accuracy
before and after. ``--repeats R`` plays the variants R times, in reverse order every other time.
Prints a table and writes ``benchmarks/results/overlap[-MODEL].json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

sys.path.insert(0, str(Path(__file__).resolve().parent))
RESULTS = Path(__file__).parent / "results"
VARIANTS = {
    "in-process": {"threads": 0},
    "workers": {"distributed.workers": 1, "threads": 1},
    "overlap": {"distributed.workers": 1, "threads": 1, "distributed.overlap": True, "generation.tis_cap": 2.0},
}


def machine_cpu_s() -> float:
    """CPU seconds every core of this machine has spent busy since boot (/proc/stat: user, nice, system)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:4]
    return sum(int(x) for x in fields) / os.sysconf("SC_CLK_TCK")


def run(variant: str, args, out: Path) -> dict:
    import torch

    from marft_agents import load, train

    overrides = {
        "model": args.model,
        "updates": args.updates,
        "episodes_per_update": args.episodes,
        "eval_episodes": args.eval_episodes,
        "eval_rounds": 0,
        "eval_every": 0,
        "checkpoint_every": 0,
        "seed": 0,
        "run_dir": str(out / variant),
        **VARIANTS[variant],
    }
    torch.set_num_threads(overrides["threads"] or os.cpu_count() or 1)
    config = load(None, [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in overrides.items()])
    wall, cpu = time.perf_counter(), machine_cpu_s()
    summary = train(config, progress=False, quiet=True)
    wall, cpu = time.perf_counter() - wall, machine_cpu_s() - cpu
    rows = [json.loads(line) for line in (out / variant / "metrics.jsonl").read_text().splitlines()]
    steady = rows[1:] or rows
    return {
        "episodes_per_s": args.episodes * len(steady) / sum(r["time/update_s"] for r in steady),
        "update_s": statistics.median(r["time/update_s"] for r in steady),
        "training_s": statistics.median(r["time/training_s"] for r in steady),
        "waited_s": statistics.median(r.get("time/waited_s", 0.0) for r in steady),
        "command_wall_s": wall,
        "command_cpu_s": cpu,
        "solved": [r["train/solved"] for r in rows],
        "eval_before": summary["eval_before"]["accuracy"],
        "eval_after": summary["eval_after"]["accuracy"],
    }


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from marft_agents.runs.plots import SMOOTH, trailing_mean

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for variant, runs in record["runs"].items():
        for k, r in enumerate(runs):
            smooth = trailing_mean(r["solved"], min(SMOOTH, len(r["solved"])))
            ax.plot(range(1, len(smooth) + 1), smooth, label=variant if k == 0 else None, alpha=0.8)
    ax.set_xlabel("update")
    ax.set_ylabel(f"train/solved, trailing mean of {SMOOTH}")
    ax.set_title(f"distributed.overlap, {record['args']['model']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=16, help="episodes_per_update")
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"unknown variant(s) {unknown}: pick from {', '.join(VARIANTS)}")
    if args.updates < 2:
        parser.error("--updates must be at least 2: the first update is not overlapped")

    from marft_agents.distributed.cluster import connect, disconnect
    from marft_agents.distributed.config import DistributedConfig

    runs: dict[str, list[dict]] = {v: [] for v in variants}
    connection = connect(DistributedConfig(), cpus=os.cpu_count() or 1)  # loopback only, a private token
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(args.repeats):
                for v in variants if k % 2 == 0 else variants[::-1]:
                    runs[v].append(run(v, args, Path(tmp) / str(k)))
                    print(f"{v} (repeat {k}) done", file=sys.stderr)
    finally:
        disconnect(connection)

    from roofline import cpu  # the CPU's model and flags, beside the figures

    machine = cpu()
    print(
        f"{args.model}, {args.episodes} episodes per update, {args.updates} updates; {machine['model']}, {machine['cores']} cores, {' '.join(machine['flags'])}"
    )
    print(f"{'variant':>11} {'episodes/s':>11} {'update s':>9} {'learner s':>10} {'waited s':>9} {'wall s':>8} {'CPU s':>8} {'eval':>13}")
    for v, rs in runs.items():
        for r in rs:
            print(
                f"{v:>11} {r['episodes_per_s']:>11.3f} {r['update_s']:>9.2f} {r['training_s']:>10.2f} {r['waited_s']:>9.2f} "
                f"{r['command_wall_s']:>8.1f} {r['command_cpu_s']:>8.1f} {r['eval_before']:>6.3f}->{r['eval_after']:.3f}"
            )
    record = {"args": vars(args), "cpu": machine, "runs": runs}
    RESULTS.mkdir(exist_ok=True)
    name = "overlap" if args.model == "embedded" else f"overlap-{Path(args.model).name}"
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2))
    plot(record, RESULTS / f"{name}.png")
    return record


if __name__ == "__main__":
    main()
