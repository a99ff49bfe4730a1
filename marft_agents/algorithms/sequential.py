"""Which agents learn in an update, in what order, and the sequential trust-region weights (HAPPO-style).

Agent-by-agent training (:func:`round_robin`, MARFT's ``agent_iteration_interval``) picks the
adapters that learn; with the sequential update on, action- and token-level MARFT train them one
after another (:func:`agent_order`), weighting each one's advantages by :class:`SequentialWeights`.

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
recomputed (no gradient; the learner does it) and added to ``log M`` of the rounds it acted in
(:meth:`SequentialWeights.record`). Rounds where a predecessor did not act keep factor 1 for it.
Adapters shared by several agents (``"shared"`` mode) are one learner here: their log-ratios are
summed over the agents they play.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from marft_agents.settings.fields import UNIT, Ranged, choice, ranged

ORDERS = ("random", "fixed")
"""Values of ``sequential.order``."""


@dataclass
class SequentialConfig(Ranged):
    """Options of the sequential trust-region update."""

    enabled: bool = False
    """Update agents one after another, each weighted by its predecessors' ratios (off: simultaneous)."""
    order: str = choice("random", ORDERS)
    """"random" (a fresh permutation every update, as in HAPPO) or "fixed" (the adapters' order)."""
    weight_clip: float = ranged(0.2, UNIT)
    """Clip the predecessors' product ratio M to [1 - weight_clip, 1 + weight_clip] (in log space)."""


def round_robin(adapters: Sequence[str], update: int, interval: int) -> list[str]:
    """The adapters that learn in ``update``: all (``interval <= 0``) or one in turn every ``interval`` updates."""
    if interval <= 0:
        return list(adapters)
    return [adapters[(update // interval) % len(adapters)]]


def agent_order(adapters: Sequence[str], order: str, rng: np.random.Generator) -> list[str]:
    """The order in which the adapters learn this update."""
    if order not in ORDERS:
        raise ValueError(f"sequential order must be one of {list(ORDERS)}, got {order!r}")
    if order == "fixed":
        return list(adapters)
    return [adapters[i] for i in rng.permutation(len(adapters))]


def round_index(keys: Sequence[tuple[int, int]], device: torch.device | None = None) -> tuple[torch.Tensor, int]:
    """Map each step's ``(episode, round)`` to a dense joint-sample id; returns ``(ids, n_samples)``, the ids on
    ``device``."""
    ids: dict[tuple[int, int], int] = {}
    out = [ids.setdefault(k, len(ids)) for k in keys]
    return torch.tensor(out, dtype=torch.long, device=device), len(ids)


def clipped_weight(log_m: torch.Tensor, clip: float) -> torch.Tensor:
    """``exp(clip(log M, log(1 - clip), log(1 + clip)))``: the clipped product ratio."""
    return torch.exp(torch.clamp(log_m, math.log1p(-clip), math.log1p(clip)))


def accumulate(log_m: torch.Tensor, sample_ids: torch.Tensor, log_ratios: torch.Tensor) -> torch.Tensor:
    """``log M`` plus one agent's action log-ratios, added to the joint samples they belong to."""
    return log_m.index_add(0, sample_ids, log_ratios.to(log_m.dtype))


class SequentialWeights:
    """The weight ``M`` of every step of one update's batch, as the adapters learn one after another.

    ``keys`` ``(N,)`` are the steps' ``(episode, round)``: steps with the same key are one joint sample;
    ``device`` is where the weights live (the learner's).
    Before an adapter's step, :meth:`weights` gives ``M`` of every step (its predecessors' clipped
    product ratio; 1 before any); after it, :meth:`record` adds its new action log-ratios.
    """

    def __init__(self, keys: Sequence[tuple[int, int]], clip: float, device: torch.device | None = None):
        self.sample_ids, n_samples = round_index(keys, device)  # (N,) one joint-sample id per step
        self.log_m = torch.zeros(
            n_samples, dtype=torch.float64, device=device
        )  # (n_samples,) log of the product so far
        self.clip = clip

    def weights(self) -> torch.Tensor:
        """``M`` of every step, ``(N,)``: multiply the advantages of the next adapter's steps by it."""
        return clipped_weight(self.log_m, self.clip)[self.sample_ids].float()

    def record(self, idx: Sequence[int], log_ratios: torch.Tensor) -> None:
        """After an adapter's step: ``log_ratios`` ``(len(idx),)`` = ``log pi_new - log pi_old`` of its steps
        ``idx``."""
        self.log_m = accumulate(self.log_m, self.sample_ids[list(idx)], log_ratios)


@dataclass
class Turn:
    """One learning adapter's turn in an update: its steps and, in a sequential update, every step's weight ``M``."""

    position: int
    """The adapter's place in this update's order."""
    adapter: str
    idx: list[int]
    """The adapter's steps (indices into the update's batch)."""
    weights: torch.Tensor | None
    """``M`` of every step of the batch, ``(N,)``, from the adapters before it; None outside a sequential update."""
    needs_ratios: bool
    """Whether an adapter after this one needs its new log-ratios: then pass them to :meth:`record` after its step."""
    trust: SequentialWeights | None = None

    def record(self, log_ratios: torch.Tensor) -> None:
        """Add this adapter's ``log pi_new - log pi_old`` of its steps (``(len(idx),)``) to the later adapters'
        ``M``."""
        self.trust.record(self.idx, log_ratios)

    def metrics(self) -> dict[str, float]:
        """``<adapter>/sequential_weight`` (its steps' mean ``M``) and ``/sequential_position`` in a sequential
        update."""
        if self.weights is None:
            return {}
        mean = (
            {f"{self.adapter}/sequential_weight": float(self.weights[self.idx].mean())} if self.idx else {}
        )  # none: data-parallel
        return {**mean, f"{self.adapter}/sequential_position": float(self.position)}


def turns(
    learning: Sequence[str],
    idx_of: dict[str, list[int]],
    keys: Sequence[tuple[int, int]],
    settings: SequentialConfig,
    rng: np.random.Generator,
    device: torch.device | None = None,
    held: dict[str, bool] | None = None,
):
    """The learning adapters' turns, in order (:func:`agent_order` when ``settings.enabled``), skipping adapters without
    steps; ``keys`` are the steps' ``(episode, round)``. Each turn's ``weights`` reflect the ratios recorded before it,
    and live on ``device`` (the learner's). ``held``: whether any data-parallel rank has each adapter's steps (default:
    this batch's): then every rank takes the same turns, a rank without the adapter's steps with an empty ``idx``."""
    trust = None
    if settings.enabled:  # one adapter after another, each weighted by its predecessors' ratios
        learning = agent_order(learning, settings.order, rng)
        trust = SequentialWeights(keys, settings.weight_clip, device)
    for k, adapter in enumerate(learning):
        if held[adapter] if held is not None else idx_of[adapter]:
            weights = trust.weights() if trust is not None else None  # (N,)
            yield Turn(k, adapter, idx_of[adapter], weights, trust is not None and k + 1 < len(learning), trust)
