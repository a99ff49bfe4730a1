"""Sandbox throughput: runs per second, a warm worker pool against one fresh worker process per run.

    .venv/bin/python benchmarks/sandbox.py [--runs 200] [--fresh-runs 40] [--workers 2]

Two programs: a trivial one (``print(1)``, the sandbox's own cost) and a test run (the test harness
with a corpus task's program and its tests, what grading a patch costs). Three ways to run them:

* ``fresh``: ``run_python`` without a pool — a new worker process (a Python interpreter) per run;
* ``pool x1``: one warm worker, runs one after another (each run still forks a fresh process into
  fresh namespaces: only the interpreter start-up is saved);
* ``pool xN``: N warm workers, runs in parallel (``SandboxPool.map``).

Also, for scale, ``python -c`` started with ``subprocess.run`` and no sandbox at all. Every figure is
the median of ``--repeats`` runs; results also go to ``benchmarks/results/sandbox.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from marft_envs.sandbox import Limits, SandboxPool, detect_isolation, run_python
from marft_envs.tasks.code.harness import judge_run
from marft_envs.tasks.code.tasks import corpus_tasks

LIMITS = Limits(timeout_s=10.0, memory_mb=512)


def programs() -> dict[str, dict]:
    task = next(t for t in corpus_tasks("all").tasks if t.entry_point == "binary_search")
    run, _ = judge_run(task.solution, task.tests, task.entry_point, task.setup)
    return {"trivial program": {"source": "print(1)"}, f"test run ({len(task.tests)} tests of {task.entry_point})": run}


def check(result) -> None:
    if not result.ok:
        raise RuntimeError(f"a benchmark run failed: {result}")


def fresh(program: dict, runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        check(run_python(**program, limits=LIMITS))
    return runs / (time.perf_counter() - start)


def pooled(program: dict, runs: int, workers: int) -> float:
    with SandboxPool(workers=workers, limits=LIMITS) as pool:
        pool.map([program] * workers)  # start the workers
        start = time.perf_counter()
        if workers == 1:
            for _ in range(runs):
                check(pool.run(**program))
        else:
            for result in pool.map([program] * runs):
                check(result)
        return runs / (time.perf_counter() - start)


def unsandboxed(runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        subprocess.run([sys.executable, "-S", "-c", "print(1)"], check=True, capture_output=True)
    return runs / (time.perf_counter() - start)


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description="Sandbox runs per second: worker pool vs a fresh process per run.")
    parser.add_argument("--runs", type=int, default=200, help="runs per pool measurement")
    parser.add_argument("--fresh-runs", type=int, default=40, help="runs per fresh-process measurement")
    parser.add_argument("--workers", type=int, default=2, help="workers of the parallel pool")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    isolation = detect_isolation()
    print(isolation.describe().splitlines()[0])
    results = {"tier": isolation.tier, "workers": args.workers, "cases": []}
    print(f"{'program':36} {'mode':10} {'runs/s (median)':>16} {'all':>22}")
    for name, program in programs().items():
        modes = [
            ("fresh", lambda: fresh(program, args.fresh_runs)),
            ("pool x1", lambda: pooled(program, args.runs, 1)),
            (f"pool x{args.workers}", lambda: pooled(program, args.runs, args.workers)),
        ]
        for mode, measure in modes:
            rates = [measure() for _ in range(args.repeats)]
            results["cases"].append({"program": name, "mode": mode, "runs_per_s": median(rates), "all": rates})
            print(f"{name:36} {mode:10} {median(rates):>16.1f} {' '.join(f'{r:.1f}' for r in rates):>22}")
    rates = [unsandboxed(args.fresh_runs) for _ in range(args.repeats)]
    results["cases"].append({"program": "trivial program", "mode": "python -c, no sandbox", "runs_per_s": median(rates), "all": rates})
    print(f"{'trivial program':36} {'no sandbox':10} {median(rates):>16.1f} {' '.join(f'{r:.1f}' for r in rates):>22}")
    out = Path(__file__).parent / "results" / "sandbox.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
