"""Each adapter's optimizer and its learning rate over a run: one AdamW per adapter, its own rate, its schedule.

A learner makes one optimizer per trainable adapter (:func:`adapter_optimizers`, at the algorithm's ``<algo>.lr``).

``lr_schedule`` (``constant``, ``linear``, ``cosine``) and ``warmup_updates`` shape every trainable adapter's learning
rate over the run's ``updates``: update ``t`` (from 0) steps at ``lr * lr_factor(t)``, ``lr`` the adapter's own
(``agents.<agent_id>.lr``) or else the algorithm's (``<algo>.lr``). The unit is the update, not the optimizer step:
the steps an update takes vary (its minibatches, the KL gate, an agent whose returns are all equal, the round-robin),
so a run's length is known in updates only, and every update of a run sits at one point of its schedule.

- warm-up: update ``t < W`` steps at ``(t + 1) / W`` of the rate: linear from 0, the first update already learns, and
  update ``W - 1`` reaches the full rate;
- then, with ``T`` updates and ``p = (t - W) / (T - W)`` the share of the decay done: ``constant`` 1, ``linear``
  ``1 - p``, ``cosine`` ``(1 + cos(pi p)) / 2``; the last update (``t = T - 1``) still learns a little (``p < 1``).

:func:`attach` sets each adapter's own rate on its optimizer and puts a :class:`torch.optim.lr_scheduler.LambdaLR`
over :func:`lr_factor` on it; the trainer logs each adapter's rate as ``<adapter>/lr`` (:func:`rates`) and steps the
schedulers once after every update (:func:`advance`). Their state is in every checkpoint (``Learner.state_dict``): a
resumed run steps at the rates the uninterrupted one would. A checkpoint written before schedules existed resumes at
the rate its optimizers hold. Value heads keep their constant ``critic_lr``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import torch
from torch.optim.lr_scheduler import LambdaLR

from marft_agents.models.protocol import Policy

SCHEDULES = ("constant", "linear", "cosine")
"""The values of ``lr_schedule``."""


def adapter_optimizers(
    policy: Policy, lr: float, adapters: list[str] | None = None
) -> dict[str, torch.optim.Optimizer]:
    """One AdamW (no weight decay) per adapter of ``adapters`` (default: all; a learner passes its
    :attr:`~marft_agents.algorithms.base.Learner.trainable`), at ``lr``: a run then gives each agent's its own rate and
    schedule (:func:`attach`)."""
    chosen = policy.adapters if adapters is None else adapters
    return {a: torch.optim.AdamW(policy.parameters(a), lr=lr, weight_decay=0.0) for a in chosen}


def lr_factor(update: int, *, schedule: str, warmup: int, updates: int) -> float:
    """The share of its learning rate an adapter steps at in update ``update`` (from 0) of a run of ``updates``.

    Linear warm-up over the first ``warmup`` updates (``(update + 1) / warmup``), then ``schedule``: ``constant`` 1,
    ``linear`` from 1 down towards 0, ``cosine`` half a cosine from 1 down towards 0, reaching 0 at ``update ==
    updates`` (after the last update; an update past it stays at 0).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown lr_schedule {schedule!r}: use one of {list(SCHEDULES)}")
    if update < warmup:
        return (update + 1) / warmup
    if schedule == "constant":
        return 1.0
    done = min((update - warmup) / max(updates - warmup, 1), 1.0)  # p: the share of the decay behind this update
    if schedule == "linear":
        return 1.0 - done
    return 0.5 * (1.0 + math.cos(math.pi * done))


def attach(
    optimizers: Mapping[str, torch.optim.Optimizer],
    lrs: Mapping[str, float],
    *,
    schedule: str,
    warmup: int,
    updates: int,
) -> dict[str, LambdaLR]:
    """Set each adapter's own learning rate ``lrs[adapter]`` on its optimizer (one absent from ``lrs`` keeps its own),
    then give every optimizer a ``LambdaLR`` over :func:`lr_factor`; returns the schedulers by adapter.

    Every parameter group of an optimizer takes the adapter's rate (a learner with one optimizer over several adapters
    would give each its own group, and its own rate through it).
    """
    for adapter, optimizer in optimizers.items():
        if adapter in lrs:
            for group in optimizer.param_groups:
                group["lr"] = group["initial_lr"] = float(lrs[adapter])  # the rate the schedule scales

    def factor(update: int) -> float:  # a function, not an object: the checkpoint keeps no code (LambdaLR.state_dict)
        return lr_factor(update, schedule=schedule, warmup=warmup, updates=updates)

    return {adapter: LambdaLR(optimizer, factor) for adapter, optimizer in optimizers.items()}


def rates(optimizers: Mapping[str, torch.optim.Optimizer]) -> dict[str, float]:
    """``<adapter>/lr``: the learning rate each adapter's optimizer steps at now (its first parameter group's)."""
    return {f"{adapter}/lr": float(optimizer.param_groups[0]["lr"]) for adapter, optimizer in optimizers.items()}


def advance(schedulers: Mapping[str, LambdaLR]) -> None:
    """Move every schedule on by one update (after the update: the next one steps at the next rate)."""
    with warnings.catch_warnings():
        # an adapter may take no optimizer step in an update (its returns all equal, the round-robin's turn elsewhere);
        # its schedule still moves on with the run's updates, which LambdaLR warns about
        warnings.filterwarnings(
            "ignore", message=r"Detected call of `lr_scheduler.step\(\)` before", category=UserWarning
        )
        for scheduler in schedulers.values():
            scheduler.step()
