"""A zero-sum game that learns: player_0 trained against a frozen copy of itself on ``marft/NumberDuel-v0``.

    .venv/bin/python benchmarks/duel.py [--seeds 0 1 2 3 4] [--algos ippo grpo] [--updates 20] [--out DIR]

Each run is ``marft train env=marft/NumberDuel-v0 algo=ALGO agents.player_1.train=false`` on the embedded
model (16 episodes per update, GRPO in groups of 4) with a greedy evaluation of 64 episodes every 5 updates,
on seeds disjoint from training: the headline accuracy is player_0's win rate (``solved``; a tie is no win).
Prints, per algorithm, the win rate at each evaluation over the seeds (mean and 95 % t-interval) and writes
``results.json`` and ``curve.png`` to ``--out`` (default ``benchmarks/results/duel``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from roofline import cpu  # noqa: E402  (the CPU named beside every figure)


def run(algo: str, seed: int, updates: int, run_dir: str) -> dict:
    """One training run; its win-rate curve ``{update: accuracy}`` (update 0: before training) and timings."""
    from marft_agents import from_dict, train

    overrides = {
        "env": "marft/NumberDuel-v0",
        "algo": algo,
        "agents": {"player_1": {"train": False}},
        "updates": updates,
        "episodes_per_update": 16,
        "eval_episodes": 64,
        "eval_every": 5,
        "seed": seed,
        "threads": 2,
        "run_dir": run_dir,
        **({"grpo": {"group_size": 4}} if algo == "grpo" else {}),
    }
    wall, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    train(from_dict(overrides), progress=False, quiet=True)
    after = resource.getrusage(resource.RUSAGE_SELF)
    summary = json.loads(Path(run_dir, "summary.json").read_text())
    curve = {0: summary["eval_before"]["accuracy"]}
    for line in Path(run_dir, "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "eval/accuracy" in row:
            curve[row["update"] + 1] = row["eval/accuracy"]
    curve[updates] = summary["eval_after"]["accuracy"]
    return {"curve": curve, "wall_s": time.perf_counter() - wall, "cpu_s": after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime}


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t-interval (0 for one value)."""
    from marft_agents.runs.stats import t_interval

    i = t_interval(values)
    return i.estimate, (0.0 if i.n < 2 else i.high - i.estimate)


def plot(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for algo, runs in results["runs"].items():
        points = sorted(int(u) for u in next(iter(runs.values()))["curve"])
        stats = [interval([r["curve"][str(u)] * 100 for r in runs.values()]) for u in points]
        means = [m for m, _ in stats]
        ax.plot(points, means, marker="o", label=f"{algo} ({len(runs)} seeds)")
        ax.fill_between(points, [m - h for m, h in stats], [m + h for m, h in stats], alpha=0.2)
    ax.set_xlabel("updates (16 episodes each)")
    ax.set_ylabel("player_0 win rate, greedy (%)")
    ax.set_title("NumberDuel-v0: player_0 against a frozen copy (mean, 95 % CI)")
    ax.set_ylim(-5, 105)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--algos", nargs="+", default=["ippo", "grpo"])
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "duel"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"cpu": cpu(), "updates": args.updates, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for algo in args.algos:
            results["runs"][algo] = {}
            for seed in args.seeds:
                done = run(algo, seed, args.updates, f"{tmp}/{algo}_s{seed}")
                results["runs"][algo][str(seed)] = {**done, "curve": {str(u): a for u, a in done["curve"].items()}}
                curve = " ".join(f"{u}:{a * 100:.0f}" for u, a in done["curve"].items())
                print(f"{algo} seed {seed}: win rate {curve}  ({done['wall_s']:.0f} s wall, {done['cpu_s']:.0f} s CPU)")
    print("\n| algo | " + " | ".join(f"update {u}" for u in sorted(int(u) for u in done["curve"])) + " |")
    for algo, runs in results["runs"].items():
        points = sorted(int(u) for u in next(iter(runs.values()))["curve"])
        cells = [interval([r["curve"][str(u)] * 100 for r in runs.values()]) for u in points]
        print(f"| {algo} | " + " | ".join(f"{m:.1f} ± {h:.1f}" for m, h in cells) + " |")
    (out / "results.json").write_text(json.dumps(results, indent=1))
    plot(results, out / "curve.png")
    print(f"wrote {out / 'results.json'} and {out / 'curve.png'}")


if __name__ == "__main__":
    main()
