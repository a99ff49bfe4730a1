"""Speed of a real-model update with glibc's mmap threshold held (``marft_agents/training/allocator.py``) or dynamic.

    .venv/bin/python benchmarks/allocator_speed.py held 8      # one process per variant: the setting is process-wide
    .venv/bin/python benchmarks/allocator_speed.py dynamic 8

Each process: SmolLM2-135M-Instruct in float32 with the trainer's LoRA (r 8, every linear layer), 2
torch threads, ``marft/MathChain-v0`` (``synthetic:0``, ``general-v0``); twice: a collection of N
episodes (T 0.7, 48 new tokens) and one MARFT update on them (library defaults). Prints one JSON line:
seconds of generation and of the update, and the process's CPU seconds, per repetition. Run the two
variants interleaved (held, dynamic, dynamic, held), alone on the machine.
"""

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from roofline import ENV, KWARGS, MODEL  # noqa: E402  (the same setting)

import marft_envs  # noqa: E402
from marft_agents import RolloutEngine, Sampling, TrainConfig, algorithms, build_policy  # noqa: E402
from marft_agents.training import allocator  # noqa: E402  (internal: what this benchmark measures)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("held", "dynamic") or not argv[1].isdigit():
        raise SystemExit("usage: allocator_speed.py held|dynamic EPISODES (e.g. allocator_speed.py dynamic 8)")
    variant, episodes = argv[0], int(argv[1])
    if variant == "held":
        allocator.hold_mmap_threshold()
    torch.set_num_threads(2)
    envs = [marft_envs.make(ENV, **KWARGS) for _ in range(episodes)]
    config = TrainConfig(model=MODEL, env=ENV, env_kwargs=KWARGS, threads=2)
    policy = build_policy(config, envs[0].possible_agents)
    MARFTConfig, MARFT = algorithms.lookup("marft")
    algo = MARFT(policy, MARFTConfig(), temperature=0.7)
    out = []
    for k in range(2):
        torch.manual_seed(k)
        t, c = time.perf_counter(), time.process_time()
        with torch.no_grad():
            eps = RolloutEngine(policy, Sampling(0.7, 48)).collect(
                envs, range(k * episodes, (k + 1) * episodes), seed_of=lambda i: 1000 + i
            )
        gen = time.perf_counter() - t
        algo.update(eps, k, np.random.default_rng(0))
        out.append(
            {
                "gen_s": gen,
                "update_s": time.perf_counter() - t - gen,
                "cpu_s": time.process_time() - c,
                "tokens": sum(len(s.response) for e in eps for s in e.steps),
            }
        )
    print(json.dumps({"variant": variant, "runs": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
