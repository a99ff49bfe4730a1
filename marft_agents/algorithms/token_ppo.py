"""PPO-clip per token: the policy step that token-level MARFT and CORY share.

Written once here (it was two copies). For the steps ``idx`` of one adapter, ``epochs`` passes in fresh
random minibatches (:func:`~marft_agents.algorithms.base.minibatches`):

- ``rho_k = exp(log pi(w_k) - log pi_old(w_k))`` for every response token ``w_k``, times the token's
  advantage, clipped (``losses.ppo_clip_loss``), as a mask-weighted mean over the minibatch's response
  tokens, each term weighted by the TIS weights when ``generation.tis_cap`` is set;
- loss ``= ppo - c_H H + beta KL(pi || pi_ref)``, ``H`` and the KL per-token means; the KL term only when
  ``kl_coef > 0`` (CORY passes 0: its KL penalty is in the reward);
- a minibatch whose approx KL to the behaviour policy exceeds ``kl_gate`` is skipped (None: never);
- one optimizer step per minibatch (:func:`~marft_agents.algorithms.base.apply`), or per ``accumulation``
  minibatches (``grad_accumulation``), whose gradients add up as one minibatch's would.

Data-parallel (``ranks``), every term is a mean over the global minibatch's response tokens: each rank's
term is scaled by its share of them (``mb.share.tokens``), and the KL gate reads the global statistics.

:func:`pack` lays a batch's behaviour log-probs out per token, ``(N, R)``, for both learners' advantages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from marft_agents.algorithms.base import apply, minibatches
from marft_agents.algorithms.data_parallel import SINGLE, Ranks, shared_means
from marft_agents.algorithms.losses import approx_kl, masked_mean, mean_stats, ppo_clip_loss
from marft_agents.algorithms.ppo_settings import check_kl_gate
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
    ranks: Ranks = SINGLE,
    accumulation: int = 1,
    micro_batch_tokens: int | None = 0,
) -> dict[str, float]:
    """Epochs of PPO-clip per token over ``adapter``'s steps ``idx``; ``old_logp``, ``advantages`` ``(N, R)`` over
    ``steps``.

    Returns the minibatches' mean ``entropy``, ``clip_frac``, ``approx_kl`` (and ``kl_ref``, TIS statistics) and the
    optimizer steps' mean ``loss`` under ``<adapter>/``, and ``<adapter>/skipped_minibatches`` (the KL gate's).
    ``ranks``: this rank's steps of a data-parallel update; the KL gate and the logged statistics are the global
    minibatch's, so every rank skips the same minibatches. ``accumulation``: minibatches per optimizer step.
    ``micro_batch_tokens``: a minibatch's most padded tokens per forward and backward pass (:func:`base.minibatches`);
    under ``kl_gate``, which judges a whole minibatch's KL before its step, minibatches run whole.
    """
    check_kl_gate(kl_gate, accumulation)
    log, skipped, total = [], 0, 0.0  # per-minibatch stats; total: the loss of the step being accumulated
    sizes = dict(minibatch_size=minibatch_size, epochs=epochs, reference=kl_coef > 0, ranks=ranks)
    sizes.update(accumulation=accumulation, micro_batch_tokens=0 if kl_gate is not None else micro_batch_tokens)
    for mb in minibatches(policy, adapter, steps, idx, rng, temperature=temperature, **sizes):
        rows, width = torch.as_tensor(mb.rows, device=old_logp.device), mb.mask.shape[1]
        weights = token_weights(mb.steps, width, tis_cap, mb.mask.device)  # (B, R) TIS weights, or None (off)
        ppo, stats = ppo_clip_loss(
            mb.logp_tok, old_logp[rows, :width], advantages[rows, :width], clip_eps, mb.mask, weights=weights
        )
        entropy = masked_mean(mb.entropy_tok, mb.mask)
        tokens = mb.share.tokens  # every term is a mean over tokens: this rank's part of the global one (1.0 alone)
        loss = tokens * ppo - entropy_coef * tokens * entropy
        local = {"entropy": entropy.item(), "clip_frac": stats["clip_frac"], "approx_kl": stats["approx_kl"]}
        if kl_coef > 0:
            kl = masked_mean(approx_kl(mb.logp_tok, mb.ref_tok), mb.mask)  # per token, to the reference
            loss = loss + kl_coef * tokens * kl
            local["kl_ref"] = kl.item()
        stats = shared_means(ranks, local, dict.fromkeys(local, mb.share.weights[1]))  # the global minibatch's
        row = {"kl_ref": stats["kl_ref"]} if kl_coef > 0 else {}  # logged for gated minibatches too
        if kl_gate is not None and stats["approx_kl"] > kl_gate:  # too far from the behaviour policy
            log.append(row)
            skipped += 1
            continue
        part = apply(optimizer, loss, policy.parameters(adapter), max_grad_norm, adapter, ranks, mb.share)
        total = part if mb.share.first else total + part  # an accumulated step's loss: the sum of its parts'
        clip = {k: stats[k] for k in ("entropy", "clip_frac", "approx_kl")}
        log.append({**row, **({"loss": total} if mb.share.last else {}), **clip, **weight_stats(weights, mb.mask)})
    return {**mean_stats(log, f"{adapter}/"), f"{adapter}/skipped_minibatches": float(skipped)}
