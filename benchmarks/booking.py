"""Booking envs: scores of the oracle and random policies, and env steps per second with the oracle.

    .venv/bin/python benchmarks/booking.py [--episodes 500] [--repeats 3]

For each booking env id it plays ``--episodes`` seeded tasks (seeds 0..N-1) through the layered
interface — the one trainers use — and through PettingZoo's AEC view, with the scripted oracle
(:func:`marft_envs.tasks.booking.scripted.oracle`), and reports:

- the oracle's mean team reward (it should be 1.0) and the random tool-calling policy's (at most 0.05);
- **steps per second**: agent actions per second, everything included (world and task generation,
  the SQLite database, tools, grading with the gold replay, and the oracle reading its observations);
  and the same without the time spent inside the policy (the env's own cost);
- rounds and episodes per second.

Steps/s is the median of ``--repeats`` runs. Results are also written to
``benchmarks/results/booking.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import marft_envs
from marft_envs.tasks.booking.scripted import oracle, random_tool_policy

IDS = ["marft/Booking-v0", "marft/BookingFixed-v0", "marft/BookingDecPOMDP-v0"]


def layered(env_id: str, policy, episodes: int) -> dict:
    env = marft_envs.make(env_id)
    rng = np.random.default_rng(0)
    steps = rounds = 0
    in_policy = 0.0
    scores = []
    start = time.perf_counter()
    for seed in range(episodes):
        env.reset(seed=seed)
        while env.agents:
            ready = env.ready_agents()
            t0 = time.perf_counter()
            actions = {a: policy(a, env.observe(a), rng) for a in ready}
            in_policy += time.perf_counter() - t0
            steps += len(ready)
            rounds += env.step(actions) is not None
        scores.append(env.last_grade.team)
    elapsed = time.perf_counter() - start
    env.close()
    return {
        "score": float(np.mean(scores)),
        "steps": steps,
        "rounds": rounds,
        "seconds": elapsed,
        "steps_per_s": steps / elapsed,
        "env_only_steps_per_s": steps / (elapsed - in_policy),
        "rounds_per_s": rounds / elapsed,
        "episodes_per_s": episodes / elapsed,
    }


def aec(env_id: str, episodes: int) -> dict:
    env = marft_envs.make(env_id, view="aec")
    steps = 0
    start = time.perf_counter()
    for seed in range(episodes):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            observation, _, termination, truncation, _ = env.last()
            env.step(None if termination or truncation else oracle(agent, observation))
            steps += not (termination or truncation)
    elapsed = time.perf_counter() - start
    env.close()
    return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed}


def median_run(run, repeats: int) -> tuple[dict, list[float]]:
    runs = sorted((run() for _ in range(repeats)), key=lambda r: r["steps_per_s"])
    return runs[len(runs) // 2], [r["steps_per_s"] for r in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description="Booking envs: oracle and random scores, steps per second.")
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3, help="report the median of this many timed runs")
    args = parser.parse_args()
    results = {"machine": platform.processor() or platform.machine(), "episodes": args.episodes, "envs": []}
    print(f"{'env':28} {'oracle':>6} {'random':>6} {'steps/s':>8} {'env-only':>8} {'rounds/s':>8} {'aec steps/s':>11}")
    for env_id in IDS:
        layered(env_id, oracle, 20)  # warm-up: imports, caches, allocator
        best, spread = median_run(lambda: layered(env_id, oracle, args.episodes), args.repeats)
        random = layered(env_id, random_tool_policy, args.episodes)
        view, _ = median_run(lambda: aec(env_id, args.episodes), args.repeats)
        results["envs"].append({"env": env_id, "oracle": best, "oracle_steps_per_s_runs": spread, "random": random, "aec_oracle": view})
        print(
            f"{env_id:28} {best['score']:6.3f} {random['score']:6.3f} {best['steps_per_s']:8.0f} "
            f"{best['env_only_steps_per_s']:8.0f} {best['rounds_per_s']:8.0f} {view['steps_per_s']:11.0f}"
        )
    out = Path(__file__).parent / "results" / "booking.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
