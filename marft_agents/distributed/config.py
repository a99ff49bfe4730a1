"""The ``distributed.*`` section of a run's config: how many rollout workers, where, and their resources."""

from __future__ import annotations

import os
from dataclasses import dataclass

from marft_agents.settings.fields import NON_NEGATIVE, POSITIVE, ranged
from marft_agents.settings.text import shown

RAY_TEMP_MAX_CHARS = 40
"""Ray puts AF_UNIX sockets at ``<temp_dir>/session_<date>_<pid>/sockets/plasma_store`` (about 62 more
characters), and a socket path must fit in 107 bytes."""


@dataclass
class DistributedConfig:
    """Rollout workers on Ray (``distributed.*`` keys; docs/scaling-out.md)."""

    workers: int = ranged(0, NON_NEGATIVE)
    """Ray actors that play the episodes (0: in the trainer's process); a local cluster has this machine's CPUs for them."""
    address: str = ""
    """A running Ray cluster to join ("host:port" of `ray start --head`, or "auto"); empty: start a local one."""
    cpus_per_worker: float = ranged(1.0, POSITIVE)
    """CPUs each worker reserves on its node (also its torch threads, at least 1)."""
    gpus_per_worker: float = ranged(0.0, NON_NEGATIVE)
    """GPUs each worker reserves (Ray sets its CUDA_VISIBLE_DEVICES for a CUDA vllm engine; 0: CPU workers)."""
    timeout_s: float = ranged(600.0, POSITIVE)
    """A worker whose batch of episodes is not back within this many seconds is restarted and the batch played again."""
    start_timeout_s: float = ranged(300.0, POSITIVE)
    """Seconds the workers may take to start (load the model) before the run stops with an error."""
    max_restarts: int = ranged(3, NON_NEGATIVE)
    """Times Ray restarts a worker that died or hung (each time its episodes are played again)."""
    temp_dir: str = ""
    """Ray's session folder for a local cluster, at most 40 characters (empty: a fresh /tmp/marft-ray-* removed at the end)."""
    overlap: bool = False
    """Play update k+1's episodes on the workers while the trainer learns from update k's (one update stale; needs generation.tis_cap)."""
    episode_seeds: bool = False
    """workers=0: sample each episode from its own seeded generator as workers do, so the run equals a workers>0 run (off: torch's one generator)."""


def check(settings: DistributedConfig, engine: str = "hf") -> None:
    """Refuse settings Ray cannot use, in one line naming the key (the ranges travel with the fields: ``settings.fields.ranged``)."""
    if settings.episode_seeds and engine != "hf":
        raise ValueError(
            f"distributed.episode_seeds=true samples with the hf engine's per-episode generators; "
            f"generation.engine={engine} seeds its own requests: drop one of the two"
        )
    if settings.overlap and not settings.workers:
        raise ValueError(
            "distributed.overlap=true plays the next batch on rollout workers while this process trains: "
            "set distributed.workers (e.g. 1), or distributed.overlap=false"
        )
    if settings.address and settings.address != "auto" and ":" not in settings.address:
        raise ValueError(
            f"distributed.address={shown(settings.address)} must be host:port (the head's `ray start "
            "--head --port PORT`), ray://host:port, or auto"
        )
    need = settings.workers * settings.cpus_per_worker
    cores = os.cpu_count() or 1
    if settings.workers and not settings.address and need > cores:  # Ray would promise CPUs that are not there
        raise ValueError(
            f"distributed.workers={settings.workers} x distributed.cpus_per_worker="
            f"{settings.cpus_per_worker:g} needs {need:g} CPUs, but this machine has {cores} for the "
            f"local cluster: use at most {int(cores // settings.cpus_per_worker)} workers, or join a "
            "larger cluster with distributed.address"
        )
    if settings.temp_dir:
        path = os.path.abspath(settings.temp_dir)
        if len(path) > RAY_TEMP_MAX_CHARS:
            raise ValueError(
                f"distributed.temp_dir={shown(path)} is {len(path)} characters: Ray's socket paths under "
                f"it must fit in 107 bytes; use at most {RAY_TEMP_MAX_CHARS} (e.g. /tmp/marft-ray)"
            )
