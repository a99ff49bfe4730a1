"""The trainer's side of distributed rollouts: a Ray cluster, N rollout workers, and the weights they use.

:class:`WorkerPool` is what the trainer drives in place of its in-process rollout engine and
generation engine (the same calls: ``collect``, ``sync``, ``close``, ``timings``), plus an
``evaluate`` with :func:`marft_agents.rollout.evaluation.evaluate`'s signature and result.

- **Split by episode index.** An update's episodes are cut into ``workers`` contiguous blocks of
  indices; block ``k`` always goes to worker ``k`` and is played the same way wherever it runs (env
  seeds from the trainer, sampling seeds from ``(seed, update, index)``). Results come back in
  episode order.
- **Weights.** :meth:`WorkerPool.sync` puts the adapter weights in Ray's object store once per update
  under a version (``ray.put``) and has every worker load them; every batch is played under the
  version it names, and every agent-step records that version.
- **Faults.** A block whose worker died, or that is not back within ``timeout_s`` (its worker is then
  killed), is played again from its seeds on the restarted worker (``max_restarts``); after that many
  failures the update stops with :class:`~marft_agents.distributed.WorkerError`, never with a partial
  batch.
"""

from __future__ import annotations

import atexit
import os
import time
from typing import Any

import marft_envs
from marft_agents.distributed import ClusterError, WorkerError
from marft_agents.distributed.cluster import connect, disconnect, first_line
from marft_agents.distributed.config import DistributedConfig
from marft_agents.distributed.environment import worker_env_vars
from marft_agents.distributed.worker import RolloutWorker, WorkerSpec
from marft_agents.engines.config import EvalSampling
from marft_agents.models.policy import LaMASPolicy
from marft_agents.rollout.episode import Episode
from marft_agents.rollout.evaluation import (
    HELDOUT_SEED,
    decoding_of,
    episode_options,
    eval_plan,
    eval_result,
    eval_sampling,
)

_open_pools: list[WorkerPool] = []


def _resources(free: dict) -> str:
    """``CPU=0, GPU=1``: Ray's free resources without its per-node and memory entries."""
    shown = {k: v for k, v in free.items() if k in ("CPU", "GPU")}
    return ", ".join(f"{k}={v:g}" for k, v in sorted(shown.items())) or "none"


def _cause(err: BaseException) -> str:
    """The original error in a Ray error's traceback text: its last ``Name: message`` line."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in reversed(lines):
        if ":" in line and line.split(":", 1)[0].replace(".", "").isidentifier() and not line.startswith("File"):
            return line
    return first_line(err)


def close_open_pools() -> None:
    """Close every pool of this process still open (what runs that failed midway left)."""
    for pool in list(_open_pools):
        pool.close()


def split(indices: list[int], parts: int) -> list[list[int]]:
    """``indices`` in ``parts`` contiguous blocks, in order, sizes differing by at most one."""
    cuts = [len(indices) * k // parts for k in range(parts + 1)]
    return [list(indices[cuts[k] : cuts[k + 1]]) for k in range(parts)]


class WorkerPool:
    """N rollout workers on a Ray cluster, driven like the trainer's in-process rollout and generation engines."""

    def __init__(self, spec: WorkerSpec, settings: DistributedConfig, policy: LaMASPolicy, version: int = 0):
        import ray

        self.settings = settings
        self.policy = policy
        self.version = version
        """The version of the weights the workers play with (the trainer's updates applied)."""
        self.timings: dict[str, float] = {}
        self.reset_timings()
        self._connection = connect(settings)
        self._weights: Any = None
        self.failures = [0] * settings.workers
        """Batches each worker failed (died or hung) so far in this run; more than ``max_restarts`` stops it."""
        total = ray.cluster_resources()
        for name, per in (("CPU", settings.cpus_per_worker), ("GPU", settings.gpus_per_worker)):
            if per and total.get(name, 0) < settings.workers * per:
                self.close()
                raise ClusterError(
                    f"{settings.workers} workers need {settings.workers * per:g} {name}s "
                    f"({name.lower()}s_per_worker={per:g}) but the cluster has {total.get(name, 0):g}: "
                    f"lower distributed.workers or distributed.{name.lower()}s_per_worker, or add nodes"
                )
        env_vars = worker_env_vars(os.environ)  # Ray logs them: settings only, never a secret (environment.py)
        actor = ray.remote(RolloutWorker).options(
            num_cpus=settings.cpus_per_worker,
            num_gpus=settings.gpus_per_worker,
            max_restarts=settings.max_restarts,
            max_task_retries=0,
            runtime_env={"env_vars": env_vars},
        )
        self.workers = [actor.remote(spec) for _ in range(settings.workers)]
        _open_pools.append(self)
        atexit.register(self.close)  # a run that fails midway leaves its workers and temp dir to this
        self._wait_ready()
        try:
            self.sync(version)  # the workers build their engines on these first weights
        except ray.exceptions.RayError as err:
            self.close()
            raise ClusterError(f"a rollout worker could not start its engine: {_cause(err)}") from None

    def _wait_ready(self) -> None:
        import ray

        pending = {w.ready.remote(): k for k, w in enumerate(self.workers)}
        ready, waiting = ray.wait(list(pending), num_returns=len(pending), timeout=self.settings.start_timeout_s)
        try:
            ray.get(ready)
        except ray.exceptions.RayError as err:
            self.close()
            raise ClusterError(f"a rollout worker could not start: {_cause(err)}") from None
        if waiting:  # the message first: close() ends the workers, and a cluster this pool started
            message = (
                f"{len(waiting)} of {len(self.workers)} rollout workers did not start within "
                f"distributed.start_timeout_s={self.settings.start_timeout_s:g} "
                f"(the cluster's free resources: {_resources(ray.available_resources())})"
            )
            self.close()
            raise ClusterError(message)

    def reset_timings(self) -> None:
        """Zero the seconds of the parts of a collection (the in-process keys summed over workers, and ours)."""
        self.timings = {"generate": 0.0, "prompts": 0.0, "env": 0.0, "collect": 0.0, "gather": 0.0}

    def sync(self, version: int, *, wait: bool = True) -> None:
        """Publish the policy's adapter weights as ``version``: one ``ray.put``, then every worker loads them.

        ``wait=False`` returns at once: a worker still playing a batch loads them after it.
        """
        import ray

        self.version = version
        # on the CPU: the workers run there, whatever the learner's device
        states = {a: {k: v.cpu() for k, v in self.policy.adapter_state(a).items()} for a in self.policy.adapters}
        self._weights = ray.put(states)
        loads = [w.load.remote(version, [self._weights]) for w in self.workers]
        if not wait:
            return
        done, _ = ray.wait(loads, num_returns=len(loads), timeout=self.settings.timeout_s)
        for ref in done:
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:
                pass  # a worker that died loads the weights with its next batch, after its restart

    def collect(self, envs: Any, episodes: range | list[int], *, seed_of=lambda e: e) -> list[Episode]:
        """Play training episodes ``episodes`` (env seeds ``seed_of(index)``) on the workers, in index order.

        ``envs`` (the trainer's own) are not used: every worker has its own.
        """
        return self.start_collect(envs, episodes, seed_of=seed_of).result()

    def start_collect(self, envs: Any, episodes: range | list[int], *, seed_of=lambda e: e) -> PendingBatch:
        """Start playing training episodes now, under the weights published last; ``.result()`` waits for them.

        A :meth:`sync` meanwhile does not change them: they were started with (and record) the earlier
        version, and a block played again after a failure is played with it too (``distributed.overlap``).
        """
        indices = list(episodes)
        return PendingBatch(self, indices, [seed_of(i) for i in indices], None, None)

    def evaluate(
        self,
        policy: Any = None,
        env_id: str = "",
        env_kwargs: dict | None = None,
        n: int = 1,
        *,
        rounds: int = 1,
        max_new_tokens: int = 48,
        samples: int = 0,
        engine: Any = None,
        agent_max_new_tokens: dict[str, int] | None = None,
        sampling: EvalSampling | None = None,
        stop: tuple[str, ...] = (),
        agent_stop: dict[str, list[str]] | None = None,
        split: str = "test",
        outcomes: bool = False,
    ) -> dict:
        """Held-out evaluation through the workers; :func:`~marft_agents.rollout.evaluation.evaluate`'s arguments and
        result (a sampled one draws each episode from its own generator, as an episode-seeded engine in one process).

        ``policy`` and ``engine`` (the trainer's) are not used: the workers have their own.
        """
        plan = eval_plan(env_id, env_kwargs or {}, rounds, split)
        options = episode_options(plan, marft_envs.make(env_id, **plan.env_kwargs), n)
        indices = list(range(len(options)))
        seeds = [HELDOUT_SEED + i for i in indices]
        run, own = eval_sampling(sampling, max_new_tokens, agent_max_new_tokens, stop, agent_stop)
        evaluation = (run, own, (sampling or EvalSampling()).seed)
        episodes = PendingBatch(self, indices, seeds, options, plan.env_kwargs, evaluation).result()
        return eval_result(episodes, plan, samples, decoding_of(run), options if outcomes else None)

    def _retry(self, k: int, submit, why: str):
        """Submit block ``k`` again once worker ``k`` is restarted (it plays the block from its seeds), or stop."""
        import ray

        self.failures[k] += 1
        deadline = time.monotonic() + self.settings.start_timeout_s
        while self.failures[k] <= self.settings.max_restarts:
            try:  # the restart (the model loads again) is not the batch's time
                ray.get(self.workers[k].ready.remote(), timeout=max(1.0, deadline - time.monotonic()))
                return submit(k), time.monotonic()
            except ray.exceptions.ActorUnavailableError:  # still restarting
                if time.monotonic() > deadline:
                    why = f"{why}, then did not restart within distributed.start_timeout_s"
                    break
                time.sleep(0.2)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
                why = f"{why}, then could not restart ({first_line(err)[:160]})"
                break
        raise WorkerError(
            f"rollout worker {k} {why}; it failed {self.failures[k]} times (distributed.max_restarts="
            f"{self.settings.max_restarts}): the update was not trained on; resume from the last "
            "checkpoint once the cluster is healthy"
        )

    def pids(self) -> list[int]:
        """The process id of each worker (tests kill them)."""
        import ray

        return ray.get([w.ready.remote() for w in self.workers])

    def close(self) -> None:
        """End the workers; a cluster this pool started is shut down and its temp dir removed. Idempotent."""
        import ray

        atexit.unregister(self.close)
        if ray.is_initialized():
            for w in getattr(self, "workers", []):
                ray.kill(w, no_restart=True)
        self.workers = []
        if self in _open_pools:
            _open_pools.remove(self)
        if getattr(self, "_connection", None) is not None:
            disconnect(self._connection)


class PendingBatch:
    """A batch of episodes the workers are playing, under the weights it was started with; ``result()`` gathers it."""

    def __init__(
        self,
        pool: WorkerPool,
        indices: list[int],
        seeds: list[int],
        options: list | None,
        env_kwargs: dict | None,
        evaluation: tuple | None = None,
    ):
        self.pool = pool
        self.indices = indices
        self.version = pool.version
        """The weights' version every episode of the batch is played with (and records)."""
        self._weights = pool._weights  # held here: a later sync must not change a block played again
        self._blocks = split(indices, len(pool.workers))
        position = {i: k for k, i in enumerate(indices)}
        self._args = [
            (
                block,
                [seeds[position[i]] for i in block],
                None if options is None else [options[position[i]] for i in block],
            )
            for block in self._blocks
        ]
        self._env_kwargs = env_kwargs
        self._evaluation = evaluation
        """None (training episodes), or an evaluation's sampling, each agent's own and its seed
        (``RolloutWorker.collect``)."""
        self._t0 = time.perf_counter()
        self._running = {k: (self._submit(k), time.monotonic()) for k, block in enumerate(self._blocks) if block}

    def _submit(self, k: int):
        block, seeds, options = self._args[k]
        return self.pool.workers[k].collect.remote(
            self.version, [self._weights], block, seeds, options, self._env_kwargs, self._evaluation
        )

    def result(self) -> list[Episode]:
        """Every block played to the end (again, where a worker failed), gathered in index order."""
        import ray

        pool, running, fetching = self.pool, self._running, 0.0
        results: dict[int, Any] = {}
        while running:
            refs = {ref: k for k, (ref, _) in running.items()}
            deadline = min(started for _, started in running.values()) + pool.settings.timeout_s
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            for ref in ready:
                k = refs[ref]
                t = time.perf_counter()
                try:
                    results[k] = ray.get(ref)  # the episodes' transfer and unpickling: the gather
                    fetching += time.perf_counter() - t
                    del running[k]
                except ray.exceptions.RayActorError as err:
                    running[k] = pool._retry(k, self._submit, f"died ({first_line(err)[:160]})")
            now = time.monotonic()
            for k, (ref, started) in list(running.items()):
                if ref not in ready and now - started >= pool.settings.timeout_s:
                    ray.kill(pool.workers[k], no_restart=False)  # Ray restarts it; the late result is dropped
                    running[k] = pool._retry(
                        k, self._submit, f"did not finish within distributed.timeout_s={pool.settings.timeout_s:g}"
                    )
        t1 = time.perf_counter()
        out: list[Episode] = []
        for k in sorted(results):
            episodes, timings = results[k]
            out.extend(episodes)
            for name, seconds in timings.items():
                pool.timings[name] = pool.timings.get(name, 0.0) + seconds
        out.sort(key=lambda e: e.index)
        if [e.index for e in out] != sorted(self.indices):
            raise WorkerError(
                f"the workers returned episodes {[e.index for e in out][:8]}..., not {self.indices[:8]}..."
            )
        pool.timings["collect"] += t1 - self._t0 - fetching
        pool.timings["gather"] += fetching + time.perf_counter() - t1
        return out
