"""Data-parallel test helpers: a learner's updates on this rank's share of fixed batches, and how to launch torchrun.

Run as a script under ``torchrun`` (``python -m torch.distributed.run ... data_parallel_helpers.py ALGO[,ALGO] MODEL OUT``)
each rank learns from its share of the same batches and saves what the tests compare; :func:`learn` called
in the test's own process (rank 0 of 1) gives the single process's numbers on the whole batches. The updates
run under the device trap (``device_trap.py``): the data-parallel code makes no tensor without ``device=`` either.
"""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from agent_helpers import plant_rewards
from device_trap import DeviceTrap

import marft_envs
from marft_agents.algorithms.base import Learner
from marft_agents.algorithms.data_parallel import Ranks
from marft_agents.algorithms.grpo import GRPO, GRPOConfig
from marft_agents.algorithms.ippo_mappo import IPPO, MAPPO
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.algorithms.marft_token import MARFTToken, MARFTTokenConfig
from marft_agents.algorithms.ppo import PPO, PPOConfig
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.signal.collection import rank_share
from marft_agents.training.launch import process_group, ranks_from_env

EPISODES = 8
UPDATES = 3
ALGOS = ("marft", "marft_token", "ppo", "ippo", "mappo", "grpo")
"""Every learner that splits across ranks: each has a test that 2 ranks equal one process."""
ENVS = {
    "ppo": ("marft/MathSolo-v0", {}),  # one agent
    "ippo": ("marft/MathDebate-v0", {"n_agents": 2, "rounds": 2}),  # a Dec-POMDP: the agents act together
    "mappo": ("marft/MathDebate-v0", {"n_agents": 2, "rounds": 2}),  # with state_text() for its critic
}
"""The env each learner trains on, where not MathChain (a sequential team)."""
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def learner(algo: str, model_dir: str) -> tuple[LaMASPolicy, Learner, list]:
    """A tiny policy and its learner, with every loss term on (entropy, KL to the reference) and no clipping of the norm.

    ``marft_frozen``: MARFT with ``reasoner_0`` frozen (``agents.reasoner_0.train=false``); ``<algo>_accumulate``: its
    gradients accumulated over 2 minibatches per step (``grad_accumulation=2``); ``<algo>_micro``: every minibatch in
    micro-batches of one row (``micro_batch_tokens=1``).
    """
    torch.manual_seed(0)
    env_id, options = ENVS.get(algo, ("marft/MathChain-v0", {}))
    envs = [marft_envs.make(env_id, **options) for _ in range(EPISODES)]
    model, tokenizer = load_base(model_dir)
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    terms = dict(minibatch_size=3, ppo_epochs=2, kl_coef=0.1, entropy_coef=0.01, max_grad_norm=1e9)
    if algo.endswith("_accumulate"):
        algo, terms["grad_accumulation"] = algo.removesuffix("_accumulate"), 2
    if algo.endswith("_micro"):
        algo, terms["micro_batch_tokens"] = algo.removesuffix("_micro"), 1
    if algo in ("marft", "marft_frozen"):
        frozen = frozenset({"reasoner_0"}) if algo == "marft_frozen" else frozenset()
        return policy, MARFT(policy, MARFTConfig(**terms), temperature=1.0, frozen=frozen), envs
    if algo == "marft_token":
        return policy, MARFTToken(policy, MARFTTokenConfig(**terms), temperature=1.0), envs
    if algo in ("ppo", "ippo", "mappo"):
        learner_cls = {"ppo": PPO, "ippo": IPPO, "mappo": MAPPO}[algo]
        return policy, learner_cls(policy, PPOConfig(**terms), temperature=1.0), envs
    return policy, GRPO(policy, GRPOConfig(group_size=2, **terms), temperature=1.0), envs


def record_gradients(learner: Learner) -> list[tuple[int, list[torch.Tensor | None]]]:
    """Every optimizer step's gradients from now on (after the sum over ranks, before the step), in order, with the
    optimizer's number; None for a parameter without one (an IPPO head with no row in the minibatch: AdamW skips it)."""
    steps: list[tuple[int, list[torch.Tensor | None]]] = []
    optimizers = [*learner.optimizers.values(), *([learner.critic.optimizer] if learner.critic is not None else [])]
    for k, optimizer in enumerate(optimizers):
        step = optimizer.step

        def recorded(*args, _step=step, _optimizer=optimizer, _k=k, **kwargs):
            grads = [None if p.grad is None else p.grad.detach().clone() for g in _optimizer.param_groups for p in g["params"]]
            steps.append((_k, grads))
            return _step(*args, **kwargs)

        optimizer.step = recorded
    return steps


def learn(algo: str, model_dir: str, ranks: Ranks | None = None) -> dict:
    """``UPDATES`` updates on this rank's share of fixed batches: the first update's gradients, the weights before and after,
    and what became of the frozen adapters (whether any of their parameters was summed over the ranks, and whether they moved)."""
    ranks = ranks_from_env() if ranks is None else ranks  # the process group, when there is one, is open
    reduced: set[int] = set()  # ids of every parameter whose gradient was summed over the ranks
    original = Ranks.reduce_gradients

    def spied(self, params, loss):
        reduced.update(id(p) for p in params)
        return original(self, params, loss)

    Ranks.reduce_gradients = spied
    try:
        return _learn(algo, model_dir, ranks, reduced)
    finally:
        Ranks.reduce_gradients = original


def _learn(algo: str, model_dir: str, ranks: Ranks, reduced: set[int]) -> dict:
    """:func:`learn`'s updates; ``reduced`` collects the ids of the parameters summed over the ranks."""
    policy, learner_, envs = learner(algo, model_dir)
    learner_.ranks = ranks
    ranks.same_weights(learner_.learned())
    start = [p.detach().clone() for p in learner_.learned()]
    frozen = [p for a in sorted(learner_.frozen) for p in policy.parameters(a)]
    frozen_start = [p.detach().clone() for p in frozen]
    rng = np.random.default_rng(0)
    gradients = record_gradients(learner_)
    first: list = []
    for update in range(UPDATES):
        torch.manual_seed(100 + update)  # every rank plays the whole batch alike, then keeps its share
        engine = RolloutEngine(policy, Sampling(1.0, 6), record_state=learner_.needs_state, skip_ignored=learner_.skips_ignored)
        episodes = engine.collect(envs, range(update * EPISODES, (update + 1) * EPISODES))
        episodes = plant_rewards(episodes)
        share = rank_share(range(EPISODES), learner_.group_size, ranks.rank, ranks.world)
        with DeviceTrap():  # every tensor the update makes, collectives included, says where it lives
            learner_.update([episodes[i] for i in share], update, rng)
        first = first or list(gradients)
    return {
        "gradients": first,
        "start": start,
        "weights": [p.detach().clone() for p in learner_.learned()],
        "rank": ranks.rank,
        "frozen_reduced": any(id(p) in reduced for p in frozen),
        "frozen_kept": all(torch.equal(a, b) for a, b in zip(frozen, frozen_start)),
        "n_frozen": len(frozen),
    }


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the rendezvous of one test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args: list[str], *, nproc: int = 2, timeout: float = 240, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``torchrun --nproc_per_node nproc ARGS`` on 127.0.0.1, one thread per rank; its process group is killed on a timeout."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)]),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        *args,
    ]
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # torchrun and every rank: no process left behind
        out, err = process.communicate()
        raise AssertionError(f"torchrun timed out after {timeout} s: {err[-2000:]}") from None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


if __name__ == "__main__":
    algos, model_dir, out = sys.argv[1:4]
    ranks = ranks_from_env()
    with process_group(ranks):  # one process group for every algo: several in one launch start torchrun and torch once
        for algo in algos.split(","):
            result = learn(algo, model_dir, ranks)
            torch.save(result, Path(out) / f"{algo}-rank{result['rank']}.pt")
