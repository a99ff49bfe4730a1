"""Env rounds per second with scripted policies, through the layered interface and the AEC view.

    .venv/bin/python benchmarks/env_throughput.py [--episodes 2000]

The main figure is ``MathChain-v0`` (2 agents, synthetic problems, single pass): how many rounds
per second the env side (problem sampling, observations, grading, credit) can serve a trainer.
Scripted policies cost next to nothing, so this is the env's own cost. Results are also written
to ``benchmarks/results/env_throughput.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import marft_envs
from marft_envs.tasks.math.scripted import chain_policy, solver_policy

CASES = [
    ("MathChain-v0, 2 agents, single pass", "marft/MathChain-v0", {}, chain_policy),
    ("MathChain-v0, 2 agents, 3 attempts", "marft/MathChain-v0", {"rounds": 3}, chain_policy),
    ("MathDebate-v0, 3 solvers x 2 rounds", "marft/MathDebate-v0", {}, solver_policy),
    ("MathSolo-v0, single pass", "marft/MathSolo-v0", {}, solver_policy),
]


def layered(env_id: str, kwargs: dict, make_policy, episodes: int, seed: int = 0) -> dict:
    env = marft_envs.make(env_id, **kwargs)
    policy = make_policy(env, 0.3)
    rng = np.random.default_rng(seed)
    rounds = 0
    start = time.perf_counter()
    for k in range(episodes):
        env.reset(seed=seed + k)
        while env.agents:
            if env.step({a: policy(a, env.observe(a), rng) for a in env.ready_agents()}) is not None:
                rounds += 1
    elapsed = time.perf_counter() - start
    return {"rounds_per_s": rounds / elapsed, "episodes_per_s": episodes / elapsed, "rounds": rounds}


def aec(env_id: str, kwargs: dict, make_policy, episodes: int, seed: int = 0) -> dict:
    env = marft_envs.make(env_id, view="aec", **kwargs)
    policy = make_policy(env.env, 0.3)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    rounds = 0
    for k in range(episodes):
        env.reset(seed=seed + k)
        for agent in env.agent_iter():
            obs, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else policy(agent, obs, rng))
        rounds += env.env.round
    elapsed = time.perf_counter() - start
    return {"rounds_per_s": rounds / elapsed, "episodes_per_s": episodes / elapsed, "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description="Env rounds per second with scripted policies.")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="report the median of this many runs")
    args = parser.parse_args()
    results = []
    print(f"{'case':40} {'view':8} {'rounds/s (median)':>18} {'min-max':>13}")
    for label, env_id, kwargs, make_policy in CASES:
        for view, run in (("layered", layered), ("aec", aec)):
            run(env_id, kwargs, make_policy, 50)  # warm-up: imports, grader caches, allocator
            runs = sorted((run(env_id, kwargs, make_policy, args.episodes) for _ in range(args.repeats)), key=lambda r: r["rounds_per_s"])
            r = runs[len(runs) // 2]
            spread = f"{runs[0]['rounds_per_s']:.0f}-{runs[-1]['rounds_per_s']:.0f}"
            results.append({"case": label, "view": view, **r, "runs": runs})
            print(f"{label:40} {view:8} {r['rounds_per_s']:>18.0f} {spread:>13}")
    out = Path(__file__).parent / "results" / "env_throughput.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
