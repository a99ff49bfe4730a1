"""PPO-clip per token: the policy step that token-level MARFT and CORY share.

Written once here (it was two copies). For the steps ``idx`` of one adapter, ``epochs`` passes in fresh
random minibatches (:func:`~marft_agents.algorithms.base.minibatches`):

- ``rho_k = exp(log pi(w_k) - log pi_old(w_k))`` for every response token ``w_k``, times the token's
  advantage, clipped (``losses.ppo_clip_loss``), as a mask-weighted mean over the minibatch's response
  tokens, each term weighted by the TIS weights when ``generation.tis_cap`` is set;
- loss ``= ppo - c_H H + beta KL(pi || pi_ref)``, ``H`` and the KL per-token means; the KL term only when
  ``kl_coef > 0`` (CORY passes 0: its KL penalty is in the reward);
- a minibatch whose approx KL to the behaviour policy exceeds ``kl_gate`` is skipped (None: never);
- one optimizer step per minibatch (:func:`~marft_agents.algorithms.base.apply`).

:func:`pack` lays a batch's behaviour log-probs out per token, ``(N, R)``, for both learners' advantages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from marft_agents.algorithms.base import apply, minibatches
from marft_agents.algorithms.losses import approx_kl, masked_mean, mean_stats, ppo_clip_loss, step_stats
from marft_agents.algorithms.tis import token_weights, weight_stats
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature
from marft_agents.rollout.episode import AgentStep


@dataclass
class TokenBatch:
    """Agent-steps as padded per-token tensors, ``(N, R)`` with ``R`` the longest response."""

    old_logp: torch.Tensor
    """Behaviour log-prob of every response token (0 on padding)."""
    mask: torch.Tensor
    """True on real response tokens."""
    lengths: torch.Tensor
    """Tokens per response, ``(N,)``."""


def pack(steps: list[AgentStep], device: torch.device | None = None) -> TokenBatch:
    """Pad the steps' behaviour log-probs into ``(N, R)`` tensors on ``device`` (None: torch's default)."""
    lengths = torch.tensor([len(s.response) for s in steps], dtype=torch.long, device=device)  # (N,)
    if len(steps) and int(lengths.min()) < 1:
        skipped = (
            " (some are skipped steps: collect with RolloutEngine(..., skip_ignored=False))"
            if any(s.skipped for s in steps)
            else ""
        )
        raise ValueError(f"token-level training needs every response to have at least one token{skipped}")
    old = torch.nn.utils.rnn.pad_sequence([s.token_logps.float().to(device) for s in steps], batch_first=True)  # (N, R)
    mask = torch.arange(old.shape[1], device=device).unsqueeze(0) < lengths.unsqueeze(1)  # (N, R)
    return TokenBatch(old_logp=old, mask=mask, lengths=lengths)


def step(
    policy: LaMASPolicy,
    optimizer: torch.optim.Optimizer,
    adapter: str,
    steps: list[AgentStep],
    idx: list[int],
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    rng: np.random.Generator,
    *,
    clip_eps: float,
    entropy_coef: float,
    kl_coef: float,
    kl_gate: float | None,
    max_grad_norm: float,
    minibatch_size: int,
    epochs: int,
    temperature: Temperature,
    tis_cap: float | None,
) -> dict[str, float]:
    """Epochs of PPO-clip per token over ``adapter``'s steps ``idx``; ``old_logp``, ``advantages`` ``(N, R)`` over
    ``steps``.

    Returns the minibatches' mean ``loss``, ``entropy``, ``clip_frac``, ``approx_kl`` (and ``kl_ref``, TIS
    statistics) under ``<adapter>/``, and ``<adapter>/skipped_minibatches`` (the KL gate's).
    """
    log, skipped = [], 0  # per-minibatch stats
    sizes = dict(minibatch_size=minibatch_size, epochs=epochs)
    for mb in minibatches(policy, adapter, steps, idx, rng, temperature=temperature, reference=kl_coef > 0, **sizes):
        rows, width = torch.as_tensor(mb.rows, device=old_logp.device), mb.mask.shape[1]
        weights = token_weights(mb.steps, width, tis_cap, mb.mask.device)  # (B, R) TIS weights, or None (off)
        ppo, stats = ppo_clip_loss(
            mb.logp_tok, old_logp[rows, :width], advantages[rows, :width], clip_eps, mb.mask, weights=weights
        )
        entropy = masked_mean(mb.entropy_tok, mb.mask)
        loss = ppo - entropy_coef * entropy
        row = {}
        if kl_coef > 0:
            kl = masked_mean(approx_kl(mb.logp_tok, mb.ref_tok), mb.mask)  # per token, to the reference
            loss = loss + kl_coef * kl
            row["kl_ref"] = kl.item()  # logged for gated minibatches too
        if kl_gate is not None and stats["approx_kl"] > kl_gate:  # too far from the behaviour policy
            log.append(row)
            skipped += 1
            continue
        apply(optimizer, loss, policy.parameters(adapter), max_grad_norm, adapter)
        log.append({**row, **step_stats(loss, entropy, stats), **weight_stats(weights, mb.mask)})
    return {**mean_stats(log, f"{adapter}/"), f"{adapter}/skipped_minibatches": float(skipped)}
