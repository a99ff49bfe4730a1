"""Learner time per update on 1 and 2 data-parallel ranks (one thread each): the scaling of the update itself.

    .venv/bin/python benchmarks/data_parallel.py [--model embedded|PATH|random] [--ranks 1,2] [--episodes 32]
        [--max-new-tokens 48] [--minibatch 16] [--updates 3] [--algo marft] [--out benchmarks/results/data_parallel.json]

For each rank count N the script launches ``torchrun --nproc_per_node N`` on 127.0.0.1 with this file as
the program (``--worker``). Every rank loads the model, plays its share of one fixed batch of
``marft/MathChain-v0`` episodes (whole episodes; each sampled from its own seeded generator, so the union
over the ranks is the same batch whatever N), pays every other episode the team reward (a batch whose
returns are all equal takes no policy step, and the embedded model solves few problems), then runs one
untimed update and ``--updates`` timed ones of the learner on that batch: ``Learner.update`` between two
barriers, so a figure is the slowest rank's. Each rank runs one torch thread (``OMP_NUM_THREADS=1``,
``torch.set_num_threads(1)``); collection is not timed.

Prints and saves the median learner time per update for each N, the speed-up ``t_1 / t_N`` and the
scaling efficiency ``t_1 / (N t_N)``, beside the machine's CPU model, core count and instruction-set
flags (``lscpu``). Run it alone on the machine: another job on the cores makes the figures say nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parents[1]


def cpu_info() -> dict:
    """The CPU model, logical CPUs and flags as ``lscpu`` reports them (``/proc/cpuinfo`` where there is no lscpu)."""
    fields: dict[str, str] = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30, check=True).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    except (OSError, subprocess.SubprocessError):
        text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
        for line in text.splitlines():
            key, _, value = line.partition(":")
            fields.setdefault({"model name": "Model name", "flags": "Flags"}.get(key.strip(), key.strip()), value.strip())
    return {
        "model": fields.get("Model name", platform.processor() or "unknown"),
        "cpus": os.cpu_count(),
        "threads_per_core": fields.get("Thread(s) per core", "?"),
        "flags": fields.get("Flags", ""),
    }


# -- one rank (torchrun runs this file with --worker) ---------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist

    import marft_envs
    from marft_agents import LaMASPolicy, RolloutEngine, Sampling, algorithms, load_base
    from marft_agents.engines.seeded import EpisodeSeededEngine, episode_seed
    from marft_agents.signal.collection import rank_share
    from marft_agents.training.launch import process_group, ranks_from_env
    from marft_envs.outcomes import SHARED_REWARD

    torch.set_num_threads(1)
    ranks = ranks_from_env()
    with process_group(ranks):
        torch.manual_seed(0)
        envs = [marft_envs.make("marft/MathChain-v0") for _ in range(args.episodes)]
        model, tokenizer = load_base(args.model)
        policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
        config = algorithms.lookup(args.algo)[0]()
        config.minibatch_size = args.minibatch
        learner = algorithms.build_learner(args.algo, policy, config, 1.0)
        learner.ranks = ranks
        ranks.same_weights(learner.learned())
        mine = rank_share(range(args.episodes), learner.group_size, ranks.rank, ranks.world)
        engine = EpisodeSeededEngine(policy)
        engine.seed_episodes({i: episode_seed(0, 0, i) for i in mine})
        episodes = RolloutEngine(policy, Sampling(1.0, args.max_new_tokens), engine=engine).collect(envs[: len(mine)], mine)
        for e in episodes:  # every other episode's team is paid: the returns differ, so each update steps
            for s in e.steps:
                s.reward, s.info = float(e.index % 2), {**s.info, SHARED_REWARD: float(e.index % 2)}
        rng = np.random.default_rng(0)
        times = []
        for update in range(args.updates + 1):  # the first is a warm-up
            if ranks.parallel:
                dist.barrier()
            t0 = time.perf_counter()
            learner.update(episodes, update, rng)
            if ranks.parallel:
                dist.barrier()
            times.append(time.perf_counter() - t0)
        if ranks.lead:
            steps = sum(len(e.steps) for e in episodes)
            Path(args.worker).write_text(json.dumps({"times": times[1:], "rank0_steps": steps}))


# -- the driver ---------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(n: int, args: argparse.Namespace, out: Path) -> dict:
    """One ``torchrun --nproc_per_node n`` of the worker; its timings."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={n}",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(Path(__file__).resolve()),
        "--worker",
        str(out),
        *(f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k in PASSED),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        process.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # torchrun and its ranks
        raise SystemExit(f"{n} ranks did not finish within --timeout {args.timeout} s") from None
    if process.returncode:
        raise SystemExit(f"torchrun with {n} ranks failed (exit {process.returncode})")
    return json.loads(out.read_text())


PASSED = ("model", "episodes", "max_new_tokens", "minibatch", "updates", "algo")
"""The options every rank gets as given to the driver."""


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="embedded | PATH | random (default: embedded if present, else random)")
    parser.add_argument("--ranks", default="1,2", help="rank counts to time, comma-separated")
    parser.add_argument("--episodes", type=int, default=32, help="episodes per update (the whole batch, split over the ranks)")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--minibatch", type=int, default=16, help="agent-steps per (global) minibatch")
    parser.add_argument("--updates", type=int, default=3, help="timed updates per rank count (after one warm-up)")
    parser.add_argument("--algo", default="marft", help="a learner that splits across ranks: marft, ppo, ippo, mappo, grpo")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one rank count may take")
    parser.add_argument("--out", default=str(RESULTS / "data_parallel.json"))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # a rank: where rank 0 writes its timings
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return None

    sys.path.insert(0, str(Path(__file__).parent))
    from rollout_throughput import resolve_model

    with tempfile.TemporaryDirectory() as tmp:
        args.model, label = resolve_model(args.model, Path(tmp))
        rows = {}
        for n in [int(x) for x in args.ranks.split(",")]:
            timings = run_ranks(n, args, Path(tmp) / f"ranks{n}.json")
            rows[n] = {"median_s": statistics.median(timings["times"]), "times_s": timings["times"], "rank0_steps": timings["rank0_steps"]}
    base = rows[min(rows)]["median_s"] * min(rows)
    for n, row in rows.items():
        row["speedup"] = base / row["median_s"]
        row["efficiency"] = base / (n * row["median_s"])
    cpu = cpu_info()
    result = {"setting": {k: getattr(args, k) for k in PASSED} | {"model": label, "threads_per_rank": 1}, "cpu": cpu, "ranks": rows}
    print(f"CPU: {cpu['model']} ({cpu['cpus']} logical CPUs, {cpu['threads_per_core']} thread(s) per core)")
    print(f"flags: {cpu['flags']}")
    print(f"{args.algo}, {label}, {args.episodes} episodes per update, max_new_tokens {args.max_new_tokens}, minibatch {args.minibatch}")
    print(f"{'ranks':>5}  {'learner s/update':>16}  {'speed-up':>8}  {'efficiency':>10}")
    for n, row in rows.items():
        print(f"{n:>5}  {row['median_s']:>16.2f}  {row['speedup']:>8.2f}  {row['efficiency']:>9.0%}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
