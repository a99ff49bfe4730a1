"""The untuned team's greedy held-out behaviour under two role-prompt profiles, side by side (issue 35, D7).

    .venv/bin/python benchmarks/profile_copy_rate.py OUT.json [--model smollm2-135m-instruct] [--episodes 112]
        [--profiles general-v0,general-v1] [--problems synthetic:0] [--threads 2]

For each profile, on the 2-agent ``marft/MathChain-v0`` (reasoner -> actor), with the untuned model:
team accuracy; the reasoner's own accuracy; the actor's *copy rate* (its answer right when the reasoner's
was right: ``answer_accuracy_when_right``); the share of the actor's answers that are boxed; the share
that begin by continuing the transcript (``Reasoner``/``reasoner_0:``...). The setting is fixed before
it runs: the defaults above, the env's held-out split, greedy decoding, 48 new tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

CONTINUES = re.compile(r"^\s*(reasoner|actor|teammate)[_ ]?\d*\s*:", re.IGNORECASE)


def cpu_name() -> str:
    """The CPU's model name and its bf16/AVX flags (``lscpu``), for the record."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor()
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    flags = [f for f in fields.get("Flags", "").split() if f.startswith(("avx512_bf16", "amx", "avx2", "avx512f"))]
    return f"{fields.get('Model name', '?').strip()} ({' '.join(flags)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--episodes", type=int, default=112)  # synthetic:0 has 112 distinct test problems
    parser.add_argument("--profiles", default="general-v0,general-v1")
    parser.add_argument("--problems", default="synthetic:0")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from marft_agents import TrainConfig, build_policy, evaluate

    torch.set_num_threads(args.threads)
    results = {"model": args.model, "episodes": args.episodes, "problems": args.problems, "cpu": cpu_name(), "profiles": {}}
    policy = build_policy(TrainConfig(model=args.model), ["reasoner_0", "actor_0"])
    for profile in args.profiles.split(","):
        t0, c0 = time.perf_counter(), time.process_time()
        kwargs = {"profile": profile, "problems": args.problems}
        result = evaluate(policy, "marft/MathChain-v0", kwargs, args.episodes, samples=args.episodes)
        actions = [s["action"] for t in result.pop("samples") for s in t["steps"] if s["agent"] == "actor_0"]
        roles = result["roles"]
        results["profiles"][profile] = {
            "team_accuracy": result["accuracy"],
            "reasoner_own_accuracy": roles["reasoner_0"].get("own_accuracy"),
            "actor_copy_rate": roles["reasoner_0"].get("answer_accuracy_when_right"),
            "n_reasoner_right": roles["reasoner_0"].get("n_right"),
            "actor_boxed": sum("\\boxed{" in a for a in actions) / max(len(actions), 1),
            "actor_continues_transcript": sum(bool(CONTINUES.match(a)) for a in actions) / max(len(actions), 1),
            "wall_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0,
        }
        print(profile, json.dumps(results["profiles"][profile]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
