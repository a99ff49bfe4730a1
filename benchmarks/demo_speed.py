"""What `make demo` spends its time on, and what a setting saves: a few demo updates per variant, interleaved.

    .venv/bin/python benchmarks/demo_speed.py [--updates 12] [--repeats 2] [--variants default,merge,threads1]

Each run is ``marft train --preset demo`` with ``updates=--updates``, no intermediate evaluation, and
evaluations before and after on 16 problems (``--full-eval``: the demo's own, 300 problems greedy and
the 3-attempt protocol), in its own subprocess; the variants' runs alternate (the order rotates each repeat). Per run: the median
update's generation and training seconds (from ``metrics.jsonl``, dropping the first update), the
rest of the process (start-up, the model load, the evaluations before and after: its wall seconds
less its updates'), wall and CPU seconds and peak memory of the process, and the updates' part of a whole demo
(the demo's updates times the median update).

Variants (``marft train`` overrides): ``default`` (none), ``merge`` (``generation.merge_lora=true``),
``threads1`` (``threads=1``), ``merge_threads1``, ``tokens1024``, ``tokens2048`` and ``tokens4096`` (the learner's
micro-batch, ``marft.micro_batch_tokens``; the default sizes it to the model: whole minibatches here),
``threads1_tokens4096``. Writes ``benchmarks/results/demo_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from marft_agents.training.config import PRESETS

VARIANTS = {
    "default": [],
    "merge": ["generation.merge_lora=true"],
    "threads1": ["threads=1"],
    "merge_threads1": ["generation.merge_lora=true", "threads=1"],
    "tokens1024": ["marft.micro_batch_tokens=1024"],
    "tokens2048": ["marft.micro_batch_tokens=2048"],
    "tokens4096": ["marft.micro_batch_tokens=4096"],
    "threads1_tokens4096": ["threads=1", "marft.micro_batch_tokens=4096"],
}
DEMO_UPDATES = PRESETS["demo"]["updates"]


def run(variant: str, updates: int, folder: Path, full_eval: bool) -> dict:
    run_dir = folder / variant
    cmd = [sys.executable, "-m", "marft_agents.cli", "train", "--preset", "demo", "--overwrite", f"run_dir={run_dir}"]
    cmd += [f"updates={updates}", "eval_every=0", "checkpoint_every=0", *VARIANTS[variant]]
    cmd += [] if full_eval else ["eval_episodes=16", "eval_rounds=0"]
    log = folder / f"{variant}.log"
    t0 = time.perf_counter()
    with log.open("w") as out:  # wait4: this process's own CPU seconds and peak memory
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    wall = time.perf_counter() - t0
    if child.returncode != 0:
        raise SystemExit(f"{variant}: marft train failed; its output:\n{log.read_text()[-3000:]}")
    every = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = every[1:]  # the first update warms up
    before_eval = json.loads((run_dir / "eval_before.json").read_text())
    return {
        "variant": variant,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mib": usage.ru_maxrss / 1024,  # Linux: KiB
        "update_s": statistics.median(r["time/update_s"] for r in rows),
        "generation_s": statistics.median(r["time/generation_s"] for r in rows),
        "training_s": statistics.median(r["time/training_s"] for r in rows),
        "rest_s": wall - sum(r["time/update_s"] for r in every),
        "accuracy_before": before_eval.get("accuracy"),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--updates", type=int, default=12)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--variants", default="default,merge,threads1")
    p.add_argument("--full-eval", action="store_true", help="the demo's own evaluations (else 16 problems, no 3-attempt protocol)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "demo_speed.json")
    args = p.parse_args(argv)
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="marft-demo-speed-") as tmp:
        for r in range(args.repeats):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                runs.append(run(name, args.updates, Path(tmp), args.full_eval))
                x = runs[-1]
                print(
                    f"{name:>15}: update {x['update_s']:.2f} s (generation {x['generation_s']:.2f}, training "
                    f"{x['training_s']:.2f}); process {x['wall_s']:.0f} s wall, {x['cpu_s']:.0f} s CPU, peak "
                    f"{x['peak_mib']:.0f} MiB",
                    flush=True,
                )
    summary = {}
    for name in names:
        mine = [x for x in runs if x["variant"] == name]
        update = statistics.median(x["update_s"] for x in mine)
        summary[name] = {
            "update_s": update,
            "generation_s": statistics.median(x["generation_s"] for x in mine),
            "training_s": statistics.median(x["training_s"] for x in mine),
            "rest_s": statistics.median(x["rest_s"] for x in mine),
            "peak_mib": max(x["peak_mib"] for x in mine),
            "updates_part_of_demo_min": DEMO_UPDATES * update / 60,
        }
    base = summary[names[0]]["update_s"]
    for name in names:
        summary[name]["update_over_first"] = summary[name]["update_s"] / base
    print(json.dumps(summary, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": runs, "summary": summary, "updates": args.updates}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
