"""PPO losses as pure functions: masked means, action log-probs, clipped surrogate, clipped value loss, KL, entropy.

Shapes are ``(B,)`` for action-level samples (one whole response each) or ``(B, L)`` with a mask
for token-level ones; every mean is a mask-weighted mean. Each algorithm composes its own loss from
these (``marft_agents/algorithms/``) and reduces its per-minibatch numbers with :func:`mean_stats`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch


class NonFiniteLossError(ArithmeticError):
    """A loss or gradient norm that is NaN or infinite: the step it belongs to must not be taken."""


def ensure_finite(value: torch.Tensor, name: str) -> None:
    """Raise :class:`NonFiniteLossError` naming ``name`` when the scalar ``value`` is NaN or infinite."""
    number = float(value.detach()) if isinstance(value, torch.Tensor) else float(value)
    if not math.isfinite(number):
        raise NonFiniteLossError(
            f"{name} is {number}: the update stopped before this step changed any weight and nothing of it "
            "was saved (the last checkpoint is intact); lower the learning rate or check the inputs"
        )


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over the entries where ``mask`` is true (all entries without a mask)."""
    if mask is None:
        return x.mean()
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def reduce_logp(token_logps: torch.Tensor, n: int, reduction: str) -> torch.Tensor:
    """An action's log-prob from its ``n`` token log-probs: their sum, or their mean."""
    total = token_logps.sum()
    return total / max(n, 1) if reduction == "mean" else total


def action_logps(token_logps: Sequence[torch.Tensor], reduction: str) -> torch.Tensor:
    """Per-action log-probs ``(B,)`` from each action's own token log-probs (a 1-D tensor per action)."""
    return torch.stack([reduce_logp(t, len(t), reduction) for t in token_logps])


def reduce_batch(logp_tok: torch.Tensor, mask: torch.Tensor, reduction: str) -> torch.Tensor:
    """Per-row action log-probs ``(B,)`` from per-token ones ``(B, R)`` and their mask."""
    total = (logp_tok * mask).sum(-1)  # (B,)
    if reduction == "mean":
        return total / mask.sum(-1).clamp(min=1)
    return total


def ppo_clip_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    clip_eps: float,
    mask: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``-mean(w * min(rho * A, clip(rho, 1-eps, 1+eps) * A))`` with ``rho = exp(logp - logp_old)``.

    ``weights`` ``w`` (the shape of ``logp``, no gradient) weight each sample's term, e.g. the
    truncated importance weights of :func:`truncated_is_weights`; None is ``w = 1``.
    """
    log_ratio = logp - logp_old
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    surrogate = torch.min(unclipped, clipped)
    if weights is not None:
        surrogate = surrogate * weights
    loss = -masked_mean(surrogate, mask)
    with torch.no_grad():
        stats = {
            "clip_frac": masked_mean(((ratio - 1.0).abs() > clip_eps).float(), mask).item(),
            "approx_kl": masked_mean(approx_kl(logp, logp_old), mask).item(),
            "ratio_max": (ratio if mask is None else ratio[mask.bool()]).max().item() if ratio.numel() else 1.0,
        }
    return loss, stats


def truncated_is_weights(logp_trainer: torch.Tensor, logp_engine: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance weights ``min(exp(logp_trainer - logp_engine), cap)``, detached, any shape.

    The correction of Yao et al. 2025 ("Your Efficient RL Framework Secretly Brings You Off-Policy
    RL Training") for samples drawn by a generation engine whose numbers differ from the trainer's:
    ``logp_engine`` is what the engine reported, ``logp_trainer`` the trainer's recompute with the
    same weights; the cap bounds the variance a rare large ratio would add.
    """
    return torch.exp(logp_trainer.detach() - logp_engine.detach()).clamp(max=cap)


def approx_kl(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-sample estimate of ``KL(pi || ref)`` from samples of pi: ``(r - 1) - log r``, ``r = p_ref/p``.

    Non-negative and unbiased (Schulman's k3 estimator).
    """
    log_r = logp_ref - logp
    return torch.exp(log_r) - 1.0 - log_r


def clipped_value_loss(
    values: torch.Tensor,
    values_old: torch.Tensor,
    returns: torch.Tensor,
    clip: float | None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """``mean(max(err(R - V), err(R - V_clipped)))`` with ``V_clipped = V_old + clip(V - V_old, ±clip)``.

    ``err`` is half the squared error; ``clip=None`` turns clipping off.
    """

    def err(e: torch.Tensor) -> torch.Tensor:
        return 0.5 * e**2

    loss = err(returns - values)
    if clip is not None:
        v_clipped = values_old + torch.clamp(values - values_old, -clip, clip)
        loss = torch.max(loss, err(returns - v_clipped))
    return masked_mean(loss, mask)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of ``softmax(logits)`` over the last dimension."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def sequence_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-row mean over the entries where ``mask`` is true: ``(B, L) -> (B,)`` (0 for an empty row)."""
    mask = mask.to(x.dtype)
    return (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def grpo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    logp_ref: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO's objective, negated: per-token clipped surrogate minus ``kl_coef`` times per-token KL.

    ``logp``, ``logp_old``, ``logp_ref`` and ``mask`` are ``(B, L)`` token log-probs; ``advantages``
    ``(B,)`` is one number per response, shared by its tokens. Each response's tokens are averaged
    first, then the responses: ``-(1/B) sum_i (1/|o_i|) sum_t [min(rho A_i, clip(rho) A_i) - beta KL_it]``
    with ``rho = exp(logp - logp_old)`` per token and ``KL`` the k3 estimate against the reference.
    ``weights`` ``(B, L)`` (no gradient) multiply each token's surrogate, not its KL term (the
    truncated importance weights of :func:`truncated_is_weights`); None is 1.
    """
    ratio = torch.exp(logp - logp_old)  # (B, L)
    adv = advantages.unsqueeze(-1)  # (B, 1), broadcast over tokens
    surrogate = torch.min(ratio * adv, torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv)  # (B, L)
    if weights is not None:
        surrogate = surrogate * weights
    per_token = surrogate
    if logp_ref is not None and kl_coef:
        per_token = per_token - kl_coef * approx_kl(logp, logp_ref)
    loss = -sequence_mean(per_token, mask).mean()
    with torch.no_grad():
        stats = {
            "clip_frac": masked_mean(((ratio - 1.0).abs() > clip_eps).float(), mask).item(),
            "approx_kl": masked_mean(approx_kl(logp, logp_old), mask).item(),
        }
        if logp_ref is not None:
            stats["kl_ref"] = masked_mean(approx_kl(logp, logp_ref), mask).item()
    return loss, stats


def mean_stats(rows: Sequence[dict[str, float]], prefix: str = "") -> dict[str, float]:
    """An update's numbers from its minibatches' (one dict each; a key may be missing from some).

    The mean over the minibatches that have the key, or the maximum for a key ending in ``_max``
    (``tis_weight_max`` stays a maximum); keys get ``prefix``.
    """
    values: dict[str, list[float]] = {}
    for row in rows:
        for k, v in row.items():
            values.setdefault(k, []).append(v)
    return {f"{prefix}{k}": float(np.max(v) if k.endswith("_max") else np.mean(v)) for k, v in values.items()}
