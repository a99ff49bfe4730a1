"""Peak resident memory of one E2 training update (single-agent PPO, SmolLM2-135M-Instruct), from any checkout.

    .venv/bin/python benchmarks/e2_peak_memory.py [--checkout DIR] [--updates 1] [--out FILE.json]

E2 (``benchmarks/learning.py e2``: ``algo=ppo`` on ``marft/MathSolo-v0``, ``problems=synthetic:0``,
``profile=general-v0``, 32 episodes per update, minibatch 64, 96 new tokens, T 0.7, float32, 2
threads) is the setting docs/real-models.md ("Scoring memory") reports the peak memory of. This
script runs that setting's ``marft train`` for ``--updates`` updates (a small held-out evaluation of
8 episodes before and after, no checkpoints) in a child process with ``PYTHONPATH`` set to
``--checkout`` (default: this one), so the code before a change (a ``git worktree`` of an earlier
commit) and after it run the same work, and reports the child's peak resident set
(``getrusage(RUSAGE_CHILDREN).ru_maxrss``). Memory does not depend on what else the machine runs.
Extra ``key=value`` settings (e.g. ``gradient_checkpointing=true``) go to ``marft train`` as given.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", type=Path, default=HERE, help="the repository whose code runs (default: this one)")
    p.add_argument("--updates", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="append the result as one JSON line")
    p.add_argument("overrides", nargs="*", help="extra key=value settings, e.g. gradient_checkpointing=true")
    args = p.parse_args()
    checkout = args.checkout.resolve()
    with tempfile.TemporaryDirectory(prefix="e2-peak-") as tmp:
        command = [
            sys.executable, "-m", "marft_agents.cli", "train",
            "env=marft/MathSolo-v0", "algo=ppo", "model=smollm2-135m-instruct",
            'env_kwargs={"problems": "synthetic:0", "profile": "general-v0"}',
            f"updates={args.updates}", "episodes_per_update=32", "max_new_tokens=96", "temperature=0.7",
            "dtype=float32", "threads=2", "eval_episodes=8", "eval_transcripts=1", "checkpoint_every=0",
            "seed=0", f"run_dir={tmp}/run", *args.overrides,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        started = time.perf_counter()
        done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
            return done.returncode
        rows = [json.loads(line) for line in Path(tmp, "run", "metrics.jsonl").read_text().splitlines()]
        update_s = [row["time/update_s"] for row in rows if "time/update_s" in row]  # each update's own seconds
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {
        "checkout": str(checkout),
        "commit": commit,
        "overrides": args.overrides,
        "updates": args.updates,
        "peak_rss_mb": round(peak_mb),
        "wall_s": round(wall),
        "update_s": [round(u, 1) for u in update_s],
    }
    result["machine"] = platform.processor() or platform.machine()
    print(json.dumps(result))
    if args.out:
        with args.out.open("a") as f:
            f.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
