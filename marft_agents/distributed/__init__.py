"""Distributed rollouts on Ray (``distributed.*`` keys; docs/scaling-out.md).

``distributed.workers = N > 0`` plays each update's episodes on N Ray actors
(:class:`~marft_agents.distributed.worker.RolloutWorker`: envs, a generation engine, the base model
and every agent's adapter each), while the trainer process keeps the learner
(:class:`~marft_agents.distributed.pool.WorkerPool` splits, gathers and publishes the weights).
``workers = 0`` is the in-process path. Importing this package does not import Ray.
"""

from __future__ import annotations


class ClusterError(ValueError):
    """The Ray cluster cannot be reached or the workers cannot start (a config or cluster to fix)."""


class WorkerError(RuntimeError):
    """A batch of episodes could not be played: workers kept failing past ``distributed.max_restarts``."""
