"""The sequential trust-region update (HAPPO-style), usable by action- and token-level MARFT.

Per update, draw an order of the learning agents (a random permutation, or the fixed adapter order).
The ``k``-th agent in it optimises its clipped PPO surrogate with its advantage weighted by the
ratio of the agents updated before it, on the same joint sample (a round of an episode):

    M_k(e, t) = prod_{j before k} pi_j^new(a_t^j | o_t^j) / pi_j^old(a_t^j | o_t^j)
    log M_k   = sum_{j before k} (log pi_j^new - log pi_j^old)          (a sum of action log-ratios)
    M_k       = exp(clip(log M_k, log(1 - eps_M), log(1 + eps_M)))

so agent ``k``'s step accounts for how its predecessors already changed the joint action's
probability. Over responses of hundreds of tokens a raw product of ratios explodes or vanishes,
hence the log space and the clip. An agent's ``log pi(a|o)`` is whatever its learner uses in its
own ratio (the sum of token log-probs by default). After an agent's step its new log-probs are
recomputed (no gradient) and added to ``log M`` of the rounds it acted in. Rounds where a
predecessor did not act keep factor 1 for it. Adapters shared by several agents (``"shared"`` mode)
are one learner here: their log-ratios are summed over the agents they play.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class SequentialConfig:
    """Options of the sequential trust-region update."""

    enabled: bool = False
    """Update agents one after another, each weighted by its predecessors' ratios (off: simultaneous)."""
    order: str = "random"
    """"random" (a fresh permutation every update, as in HAPPO) or "fixed" (the adapters' order)."""
    weight_clip: float = 0.2
    """Clip the predecessors' product ratio M to [1 - weight_clip, 1 + weight_clip] (in log space)."""


ORDERS = ("random", "fixed")


def agent_order(adapters: Sequence[str], order: str, rng: np.random.Generator) -> list[str]:
    """The order in which the adapters learn this update."""
    if order not in ORDERS:
        raise ValueError(f"sequential order must be one of {list(ORDERS)}, got {order!r}")
    if order == "fixed":
        return list(adapters)
    return [adapters[i] for i in rng.permutation(len(adapters))]


def round_index(keys: Sequence[tuple[int, int]]) -> tuple[torch.Tensor, int]:
    """Map each step's ``(episode, round)`` to a dense joint-sample id; returns ``(ids, n_samples)``."""
    ids: dict[tuple[int, int], int] = {}
    out = [ids.setdefault(k, len(ids)) for k in keys]
    return torch.tensor(out, dtype=torch.long), len(ids)


def clipped_weight(log_m: torch.Tensor, clip: float) -> torch.Tensor:
    """``exp(clip(log M, log(1 - clip), log(1 + clip)))``: the clipped product ratio."""
    return torch.exp(torch.clamp(log_m, math.log1p(-clip), math.log1p(clip)))


def accumulate(log_m: torch.Tensor, sample_ids: torch.Tensor, log_ratios: torch.Tensor) -> torch.Tensor:
    """``log M`` plus one agent's action log-ratios, added to the joint samples they belong to."""
    return log_m.index_add(0, sample_ids, log_ratios.to(log_m.dtype))


def sequential_update(
    order: Sequence[str],
    sample_ids: torch.Tensor,
    steps_of: Callable[[str], torch.Tensor],
    train: Callable[[str, torch.Tensor], dict[str, float]],
    log_ratios: Callable[[str], torch.Tensor],
    clip: float,
) -> dict[str, float]:
    """Run each adapter's step in ``order``, passing the weight ``M`` of every step of the batch.

    ``sample_ids`` ``(N,)`` gives each step's joint sample; ``steps_of(adapter)`` the indices of the
    adapter's steps; ``train(adapter, weights)`` does its PPO step with advantages times ``weights``
    ``(N,)``; ``log_ratios(adapter)`` returns, after that step, ``log pi_new - log pi_old`` of its
    steps (no gradient). Returns the merged metrics plus each adapter's mean weight.
    """
    n_samples = int(sample_ids.max()) + 1 if sample_ids.numel() else 0
    log_m = torch.zeros(n_samples, dtype=torch.float64)  # (n_samples,) log of the product so far
    metrics: dict[str, float] = {}
    for k, adapter in enumerate(order):
        weights = clipped_weight(log_m, clip)[sample_ids].float()  # (N,)
        idx = steps_of(adapter)
        if len(idx) == 0:
            continue
        metrics.update(train(adapter, weights))
        metrics[f"{adapter}/sequential_weight"] = float(weights[idx].mean())
        metrics[f"{adapter}/sequential_position"] = float(k)
        if k + 1 < len(order):  # the last agent's new ratio is not needed by anyone
            log_m = accumulate(log_m, sample_ids[idx], log_ratios(adapter))
    return metrics
