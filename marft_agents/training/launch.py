"""Data-parallel runs under ``torchrun``: this process's rank, the process group, what is refused, one verdict for all.

``torchrun --nproc_per_node N -m marft_agents.cli train ...`` starts N copies of ``marft train`` with
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set (several machines:
torchrun's rendezvous sets them the same way). :func:`ranks_from_env` reads them; :func:`check` refuses
what a data-parallel run cannot do, in one line, before any process group exists (every rank reads
the same config, so every rank refuses alike and none waits for another); :func:`process_group` opens
the group (rendezvous bounded by ``MARFT_RENDEZVOUS_TIMEOUT_S``, collectives by ``MARFT_COLLECTIVE_TIMEOUT_S``);
:func:`same_config` stops every rank in one line when their configs differ; :func:`agreed` turns each rank's
checks of the run into one outcome: where any rank failed, every rank raises that error; :func:`check_world`
refuses a resume whose ranks would sample otherwise than the run did. How the update itself is split:
``algorithms/data_parallel.py``.

``python -m marft_agents.training.launch [torchrun options] -m marft_agents.cli train ...`` is torchrun with
a shutdown grace long enough for a signalled update to finish and write its checkpoint
(``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``, :data:`SHUTDOWN_GRACE_S` unless set; torchrun's own default is 30 s).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist

from marft_agents.algorithms import lookup
from marft_agents.algorithms.data_parallel import SINGLE, Ranks
from marft_agents.models.device import resolve_device
from marft_agents.training.config import ConfigError, TrainConfig, to_dict

SHUTDOWN_GRACE_S = 3600
"""Seconds ``python -m marft_agents.training.launch`` lets the ranks finish their update after a signal."""
RENDEZVOUS_TIMEOUT_S = 300.0
"""Default seconds the ranks wait for each other to meet (``MARFT_RENDEZVOUS_TIMEOUT_S``)."""
COLLECTIVE_TIMEOUT_S = 6 * 3600.0
"""Default seconds a collective waits for the slowest rank, rank 0's evaluations and checkpoints included
(``MARFT_COLLECTIVE_TIMEOUT_S``)."""
PER_RANK_KEYS = ("device", "threads")
"""Config keys that may differ between ranks (``device``: each rank's own ``cuda:LOCAL_RANK``)."""


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
    The ranks meet within ``MARFT_RENDEZVOUS_TIMEOUT_S`` (else one line: a stray ``WORLD_SIZE`` waits for
    ranks that never come), a SIGINT/SIGTERM while they wait stops at once, and every collective then waits
    up to ``MARFT_COLLECTIVE_TIMEOUT_S`` for the slowest rank (rank 0 evaluates and checkpoints alone).
    """
    if not ranks.parallel:
        yield
        return
    meet, wait = seconds_from_env("MARFT_RENDEZVOUS_TIMEOUT_S", RENDEZVOUS_TIMEOUT_S), collective_timeout()
    if torch.device(ranks.device).type == "cuda":
        torch.cuda.set_device(torch.device(ranks.device))  # nccl's collectives run on the rank's own GPU
    store = _rendezvous(ranks, meet)
    store.set_timeout(timedelta(seconds=wait))
    dist.init_process_group(
        backend_for(torch.device(ranks.device)),
        store=store,
        rank=ranks.rank,
        world_size=ranks.world,
        timeout=timedelta(seconds=wait),
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def seconds_from_env(name: str, default: float, environ: Mapping[str, str] = os.environ) -> float:
    """A positive number of seconds from the environment variable ``name``, else ``default``; one line if malformed."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise ConfigError(f"{name}={raw!r} must be a positive number of seconds")
    return value


def collective_timeout(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds a collective of a data-parallel run waits for the slowest rank (``MARFT_COLLECTIVE_TIMEOUT_S``)."""
    return seconds_from_env("MARFT_COLLECTIVE_TIMEOUT_S", COLLECTIVE_TIMEOUT_S, environ)


def _rendezvous(ranks: Ranks, seconds: float) -> dist.Store:
    """The ``env://`` store every rank meets at, within ``seconds``; waited for in a thread so that signals still land.

    Torch waits in C++ and would run no Python signal handler until every rank came.
    """
    found: list = []

    def meet() -> None:
        try:
            found.append(
                next(dist.rendezvous("env://", ranks.rank, ranks.world, timeout=timedelta(seconds=seconds)))[0]
            )
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            found.append(err)

    thread = threading.Thread(target=meet, name="marft-rendezvous", daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds + 5
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.2)  # SIGINT/SIGTERM handlers run between waits
    where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    if not found or isinstance(found[0], BaseException):
        raise ConfigError(
            f"rank {ranks.rank} of WORLD_SIZE={ranks.world} met no other rank at {where} within {seconds:g} s "
            "(MARFT_RENDEZVOUS_TIMEOUT_S): launch every rank with torchrun, or unset WORLD_SIZE to run alone"
        )
    return found[0]


def _comparable(config: TrainConfig, resume: bool, overwrite: bool) -> dict:
    """What every rank's config must agree on: the config, less :data:`PER_RANK_KEYS`, with the run's mode."""
    flat: dict = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}{k}.", v)
        else:
            flat[prefix[:-1]] = value

    walk("", to_dict(config))
    flat = {k: v for k, v in flat.items() if k not in PER_RANK_KEYS}
    return {**flat, "--resume": resume, "--overwrite": overwrite}


def same_config(config: TrainConfig, ranks: Ranks, *, resume: bool = False, overwrite: bool = False) -> None:
    """Stop every rank in one line, before the first update, when the ranks' configs (or modes) differ.

    One gather of each rank's config digest, then (only when they differ) of the configs, to name the keys.
    """
    if not ranks.parallel:
        return
    mine = _comparable(config, resume, overwrite)
    digest = hashlib.sha256(json.dumps(mine, sort_keys=True, default=str).encode()).hexdigest()
    digests = ranks.gather(digest)
    if len(set(digests)) == 1:
        return
    other = next(r for r, d in enumerate(digests) if d != digests[0])
    theirs = ranks.gather(mine)
    lead, odd = theirs[0], theirs[other]
    keys = sorted({k for k in lead.keys() | odd.keys() if lead.get(k) != odd.get(k)}, key=str)
    shown = ", ".join(f"{k} ({odd.get(k)!r} against {lead.get(k)!r})" for k in keys[:3])
    raise ConfigError(
        f"rank {other}'s config differs from rank 0's in {shown}{' and more' if len(keys) > 3 else ''}: give every "
        "rank the same config and flags"
    )


def check_world(state: Mapping, config: TrainConfig, ranks: Ranks) -> None:
    """Refuse a resume whose episodes would sample otherwise than the run's did: one process with torch's global
    generator against seeded episodes on several ranks (``distributed.episode_seeds`` decides it in one process)."""
    then = state.get("world")
    if then is None or config.distributed.episode_seeds:
        return
    if (int(then) > 1) != ranks.parallel:
        raise ConfigError(
            f"--resume: the run trained on {then} data-parallel rank(s) and this launch has {ranks.world}, which "
            "would change how its episodes are sampled: resume on "
            f"{'torchrun ranks' if int(then) > 1 else 'one process'} as it ran"
        )


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


def main(argv: list[str] | None = None) -> int:
    """torchrun (``torch.distributed.run``) with :data:`SHUTDOWN_GRACE_S` seconds for the ranks to finish a
    signalled update, unless ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` or ``--shutdown-timeout`` says otherwise."""
    from torch.distributed import run

    os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(SHUTDOWN_GRACE_S))  # the ranks read it too
    try:
        run.main(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as err:
        return int(err.code or 0) if not isinstance(err.code, str) else 1
    except Exception as err:  # noqa: BLE001 - torchrun's ChildFailedError: the ranks said why already
        print(
            f"marft launch: {type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
