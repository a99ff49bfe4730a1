"""Where an update's time goes with rollout workers on Ray: collection, gather, learner update, weight publish.

    .venv/bin/python benchmarks/distributed.py [--workers 0,1,2] [--updates 3] [--episodes 16] [--model embedded]

Runs the real training loop (``marft_agents.training.trainer.train``, MARFT on ``marft/MathChain-v0``, the
``TrainConfig`` defaults otherwise) for ``--updates`` updates with ``distributed.workers`` = each of
``--workers`` (0: in process), one torch thread in the trainer and in each worker, on one local Ray
cluster started here (in a short temp dir, removed at the end). From ``metrics.jsonl``, per update
(medians over the updates after the first, which warms caches; min-max beside):

- **collection**: workers > 0: ``time/collect_s``, from handing out the episode blocks to the last
  block back (the workers' generate, prompts and env steps, Ray's task dispatch, the weight load of
  a worker that missed the publish); workers = 0: the in-process rollout (``update_s`` - training - sync);
- **gather**: ``time/gather_s``, fetching and unpickling the episodes into the trainer, in order;
- **learner**: ``time/training_s``, the algorithm's update in the trainer;
- **publish**: ``time/sync_s``, one ``ray.put`` of every adapter's weights and every worker loading them.

It prints a table and writes ``benchmarks/results/distributed.json`` (``distributed-MODEL.json`` for
another ``--model``), with the cost model that
docs/scaling-out.md explains: per-episode generation cost ``g`` (worker CPU-seconds per episode,
``time/generation_s`` summed over workers / episodes), a per-batch overhead ``o`` (collection wall
time not explained by generation on ``min(W, cores)`` parallel cores), and the publish cost ``p``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

RESULTS = Path(__file__).parent / "results"
PARTS = ("collection", "gather", "learner", "publish")


def spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def parts_of(row: dict, workers: int) -> dict[str, float]:
    """One metrics.jsonl row as the four parts of an update, in seconds."""
    if workers == 0:
        collection = row["time/update_s"] - row["time/training_s"] - row["time/sync_s"]
        gather = 0.0
    else:
        collection, gather = row["time/collect_s"], row["time/gather_s"]
    return {
        "collection": collection,
        "gather": gather,
        "learner": row["time/training_s"],
        "publish": row["time/sync_s"],
        "generation_cpu": row["time/generation_s"],
        "update": row["time/update_s"],
    }


def run(workers: int, args, out: Path) -> dict:
    import torch

    from marft_agents import TrainConfig, train

    torch.set_num_threads(1)
    config = TrainConfig(
        model=args.model,
        updates=args.updates,
        episodes_per_update=args.episodes,
        eval_episodes=2,
        eval_rounds=0,
        checkpoint_every=0,
        threads=1,
        seed=0,
        run_dir=str(out / f"w{workers}"),
    )
    config.distributed.workers = workers
    train(config, progress=False, quiet=True)
    rows = [json.loads(line) for line in (out / f"w{workers}" / "metrics.jsonl").read_text().splitlines()]
    measured = [parts_of(r, workers) for r in rows[1:] or rows]
    return {k: spread([m[k] for m in measured]) for k in measured[0]}


def cost_model(results: dict[int, dict], episodes: int, cores: int) -> dict:
    """``g`` per episode, the per-batch overhead ``o`` of each W, the publish ``p``, and the predicted collection."""
    model = {}
    for w, r in results.items():
        g = r["generation_cpu"]["median"] / episodes
        parallel = max(1, min(w, cores))
        overhead = r["collection"]["median"] - g * episodes / parallel
        model[w] = {"g_per_episode_s": g, "overhead_s": overhead, "publish_s": r["publish"]["median"], "learner_s": r["learner"]["median"]}
    return model


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="0,1,2", help="comma-separated values of distributed.workers")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=16, help="episodes_per_update")
    parser.add_argument("--model", default="embedded")
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]

    from marft_agents.distributed.cluster import connect, disconnect
    from marft_agents.distributed.config import DistributedConfig

    cores = os.cpu_count() or 1
    results: dict[int, dict] = {}
    connection = connect(DistributedConfig(), cpus=max(cores, max(counts)))  # loopback only, a private token
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for w in counts:
                results[w] = run(w, args, Path(tmp))
                print(f"workers={w} done", file=sys.stderr)
    finally:
        disconnect(connection)

    model = cost_model(results, args.episodes, cores)
    print(
        f"per-update seconds (median of updates 2..{args.updates}; {args.episodes} episodes, model {args.model}, "
        f"{cores} cores, 1 thread per process)"
    )
    print(f"{'workers':>8} " + " ".join(f"{p:>11}" for p in PARTS) + f" {'update':>9} {'gen CPU-s':>10}")
    for w, r in results.items():
        print(
            f"{w:>8} "
            + " ".join(f"{r[p]['median']:>11.3f}" for p in PARTS)
            + f" {r['update']['median']:>9.3f} {r['generation_cpu']['median']:>10.3f}"
        )
    print("cost model: collection(W) ~ g * episodes / min(W, cores) + o(W); publish p; learner L")
    for w, m in model.items():
        print(
            f"  W={w}: g={m['g_per_episode_s'] * 1000:.1f} ms/episode, o={m['overhead_s']:.3f} s, "
            f"p={m['publish_s'] * 1000:.1f} ms, L={m['learner_s']:.3f} s"
        )
    RESULTS.mkdir(exist_ok=True)
    record = {
        "args": vars(args),
        "cores": cores,
        "results": {str(w): r for w, r in results.items()},
        "model": {str(w): m for w, m in model.items()},
    }
    name = "distributed.json" if args.model == "embedded" else f"distributed-{Path(args.model).name}.json"
    (RESULTS / name).write_text(json.dumps(record, indent=2))
    return record


if __name__ == "__main__":
    main()
