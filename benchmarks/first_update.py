"""First-update metrics of every run in ``compare.py``: a refactoring check, not a benchmark of speed.

    .venv/bin/python benchmarks/first_update.py OUT.json [--updates 1] [--only marft/s0,grpo]

Trains every run of :func:`compare.run_specs` (seed 0) for ``--updates`` updates with a small
held-out evaluation and writes each run's ``metrics.jsonl`` rows (timings and ``signal/*`` diagnostics
dropped) to ``OUT.json``.
Run it on two commits and compare the files: a change that keeps the algorithms' behaviour gives the
same numbers, bit for bit (``cmp a.json b.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--updates", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated run names (default: every run)")
    args = parser.parse_args()

    import torch
    from compare import run_specs

    from marft_agents import from_dict, train

    torch.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        only = set(filter(None, args.only.split(",")))
        for spec in run_specs([0], args.updates):
            if only and spec["name"] not in only:
                continue
            overrides = {**spec["overrides"], "eval_episodes": 8, "eval_every": 0, "run_dir": f"{tmp}/{spec['name']}"}
            train(from_dict(overrides), progress=False, quiet=True)
            rows = [json.loads(line) for line in Path(overrides["run_dir"], "metrics.jsonl").read_text().splitlines()]
            # timings vary run to run; the signal/ diagnostics are read-only views of the batch, added later
            results[spec["name"]] = [{k: v for k, v in r.items() if not k.startswith(("time/", "signal/"))} for r in rows]
            print(spec["name"], json.dumps(results[spec["name"]][0])[:120], flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
