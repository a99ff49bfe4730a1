"""Data-parallel runs under ``torchrun``: this process's rank, the process group, what is refused, one verdict for all.

``torchrun --nproc_per_node N -m marft_agents.cli train ...`` starts N copies of ``marft train`` with
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set (several machines:
torchrun's rendezvous sets them the same way). :func:`ranks_from_env` reads them; :func:`check` refuses
what a data-parallel run cannot do, in one line, before any process group exists (every rank reads
the same config, so every rank refuses alike and none waits for another); :func:`process_group` opens
the group; :func:`agreed` turns each rank's checks of the run into one outcome: where any rank
failed, every rank raises that error. How the update itself is split: ``algorithms/data_parallel.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
import torch.distributed as dist

from marft_agents.algorithms import lookup
from marft_agents.algorithms.data_parallel import SINGLE, Ranks
from marft_agents.models.device import resolve_device
from marft_agents.training.config import ConfigError, TrainConfig


def ranks_from_env(environ: Mapping[str, str] = os.environ, device: str = "cpu") -> Ranks:
    """This process's rank and the number of ranks, as torchrun sets them (``RANK``, ``WORLD_SIZE``); rank 0 of 1
    without.

    ``device``: the run's ``device`` setting; the rank's learner lives on :func:`rank_device`.
    """
    if "WORLD_SIZE" not in environ:
        return SINGLE
    try:
        world, rank = int(environ["WORLD_SIZE"]), int(environ.get("RANK", "0"))
    except ValueError:
        raise ConfigError(
            f"WORLD_SIZE={environ['WORLD_SIZE']!r} and RANK={environ.get('RANK')!r} must be integers: launch with "
            "torchrun"
        ) from None
    if world < 1 or not 0 <= rank < world:
        raise ConfigError(f"RANK={rank} must lie in [0, WORLD_SIZE={world}): launch with torchrun")
    return Ranks(rank=rank, world=world, device=str(rank_device(device, environ)))


def rank_device(name: str, environ: Mapping[str, str] = os.environ) -> torch.device:
    """Where this rank's learner lives: the ``device`` setting's device, and on CUDA the rank's own GPU,
    ``cuda:LOCAL_RANK``."""
    try:
        device = resolve_device(name)
        if device.type == "cuda":
            return resolve_device(
                f"cuda:{int(environ.get('LOCAL_RANK', '0'))}"
            )  # refused when this machine has fewer GPUs
    except ValueError as err:
        raise ConfigError(f"{err} (data-parallel rank {environ.get('RANK')} of {environ.get('WORLD_SIZE')})") from None
    return device


def backend_for(device: torch.device) -> str:
    """The torch.distributed backend for a learner on ``device``: nccl for CUDA tensors, gloo for CPU ones."""
    return "nccl" if device.type == "cuda" else "gloo"


def check(config: TrainConfig, ranks: Ranks) -> None:
    """Refuse, in one line, a config a run of ``ranks.world`` data-parallel ranks cannot train (nothing with one
    rank)."""
    if not ranks.parallel:
        return
    where = f"a data-parallel run ({ranks.world} ranks under torchrun)"
    if config.device.startswith("cuda:"):
        raise ConfigError(
            f"{where} gives each rank its own GPU (cuda:LOCAL_RANK), not device={config.device}: use device=cuda or "
            "auto"
        )
    if config.distributed.workers:
        raise ConfigError(
            f"{where} plays its episodes in its ranks, not on Ray rollout workers: set distributed.workers=0"
        )
    if config.generation.engine != "hf":
        raise ConfigError(
            f"{where} samples each episode from its own seeded generator, which "
            f"generation.engine={config.generation.engine} does not do: use generation.engine=hf"
        )
    if config.signal.dynamic_sampling or config.signal.curriculum:
        raise ConfigError(
            f"{where} cannot draw signal.dynamic_sampling or signal.curriculum across ranks yet: turn them off"
        )
    try:
        lookup(config.algo)[1].check_data_parallel(config.algo_args)
    except ValueError as err:
        raise ConfigError(f"algo={config.algo} cannot run as {where}: {err}") from None
    group = getattr(config.algo_args, "group_size", 1)
    if config.episodes_per_update // group < ranks.world:
        raise ConfigError(
            f"{where} gives each rank whole groups of {group} episodes, but "
            f"episodes_per_update={config.episodes_per_update} holds {config.episodes_per_update // group}: set "
            f"episodes_per_update to at least {ranks.world * group}"
        )


@contextmanager
def process_group(ranks: Ranks) -> Iterator[None]:
    """The process group of a data-parallel run (nothing for one rank), destroyed on the way out.

    Rendezvous through ``MASTER_ADDR``/``MASTER_PORT`` as torchrun sets them (``env://``).
    """
    if not ranks.parallel:
        yield
        return
    if torch.device(ranks.device).type == "cuda":
        torch.cuda.set_device(torch.device(ranks.device))  # nccl's collectives run on the rank's own GPU
    dist.init_process_group(backend_for(torch.device(ranks.device)), rank=ranks.rank, world_size=ranks.world)
    try:
        yield
    finally:
        dist.destroy_process_group()


@contextmanager
def agreed(ranks: Ranks) -> Iterator[None]:
    """Run a block of checks on every rank, then leave it with one outcome: the first error any rank met, raised on all.

    A rank that fails alone would otherwise leave the others waiting in their first collective.
    """
    try:
        yield
    except Exception as err:
        shared = ranks.share_error(err)
        if shared is err:
            raise
        raise shared from None
    shared = ranks.share_error(None)
    if shared is not None:
        raise shared from None
