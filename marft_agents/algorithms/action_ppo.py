"""PPO-clip on whole actions: the policy step that action-level MARFT, single-agent PPO and IPPO/MAPPO share.

Written once here (it was three copies that nothing kept equal). For the steps ``idx`` of one
adapter, ``epochs`` passes in fresh random minibatches (:func:`~marft_agents.algorithms.base.minibatches`):

- ``log pi(a|o)``: the sum (or mean, ``logp_reduction``) of the response's token log-probs under the
  sampling temperature; ``log pi_old(a|o)`` the same over the behaviour log-probs kept at sampling, or, with
  ``old_logps="learner"`` and until the adapter's first optimizer step, ``log pi(a|o)`` itself, detached: the
  weights that sampled are still the learner's, and its own numbers make that step's ratio exactly 1 (in bf16 the
  sampler's, or a rescoring in other batches, round otherwise: docs/real-models.md, "The ratio in today's setting
  is not 1 in bf16");
- loss ``= -mean(min(rho A, clip(rho, 1 - eps, 1 + eps) A)) - c_H H + beta KL(pi || pi_ref)``, with
  ``H`` the mean per-token entropy and the KL term only when ``kl_coef > 0``
  (:func:`action_ppo_loss`, a pure function); each term weighted by the TIS weights when
  ``generation.tis_cap`` is set;
- a minibatch whose approx KL to the behaviour policy exceeds ``kl_gate`` is skipped (the original's
  hard-coded 1e-3 gate, as an option);
- one optimizer step per minibatch (:func:`~marft_agents.algorithms.base.apply`), or per ``grad_accumulation``
  minibatches, whose gradients add up as one minibatch's would (the KL gate then has no single minibatch to judge).

Each algorithm computes its own advantages (chain GAE, plain GAE, per-agent GAE) and calls :func:`step` by
module name (``action_ppo.step(...)``); the sequential update reads :func:`log_ratios` after a step.
"""

from __future__ import annotations

import numpy as np
import torch

from marft_agents.algorithms.base import apply, minibatches
from marft_agents.algorithms.data_parallel import SINGLE, WHOLE, Ranks, Share, shared_means
from marft_agents.algorithms.losses import action_logps, approx_kl, masked_mean, mean_stats, ppo_clip_loss, reduce_batch
from marft_agents.algorithms.ppo_settings import PPOSettings, check_kl_gate
from marft_agents.algorithms.tis import action_weights, weight_stats
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature
from marft_agents.rollout.episode import AgentStep


def action_ppo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    entropy: torch.Tensor,
    kl: torch.Tensor | None,
    *,
    clip_eps: float,
    entropy_coef: float,
    kl_coef: float,
    weights: torch.Tensor | None = None,
    share: Share = WHOLE,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The action-level PPO loss of one minibatch and its clip statistics.

    ``logp``, ``logp_old``, ``advantages`` (and ``weights``) are ``(B,)``; ``entropy`` and ``kl`` are
    scalars (per-token means); ``kl`` None leaves the KL term out. ``share``: the part of a global
    minibatch these rows are (data-parallel): the clip term is a mean over rows, the others over tokens.
    """
    ppo, stats = ppo_clip_loss(logp, logp_old, advantages, clip_eps, weights=weights)
    loss = share.rows * ppo - entropy_coef * share.tokens * entropy
    if kl is not None:
        loss = loss + kl_coef * share.tokens * kl
    return loss, stats


def step(
    policy: LaMASPolicy,
    optimizer: torch.optim.Optimizer,
    adapter: str,
    steps: list[AgentStep],
    idx: list[int],
    advantages: torch.Tensor,
    rng: np.random.Generator,
    *,
    settings: PPOSettings,
    temperature: Temperature,
    tis_cap: float | None,
    ranks: Ranks = SINGLE,
) -> dict[str, float]:
    """Epochs of PPO-clip on whole actions over ``adapter``'s steps ``idx``; ``advantages`` ``(N,)`` over ``steps``.

    Returns the minibatches' mean ``entropy``, ``clip_frac``, ``approx_kl`` (and ``kl_ref``, TIS statistics) and the
    optimizer steps' mean ``loss`` under ``<adapter>/``, and ``<adapter>/skipped_minibatches`` (the KL gate's).
    ``ranks``: this rank's steps of a data-parallel update; the KL gate and the clip statistics are the
    global minibatch's, so every rank skips the same minibatches.
    """
    reduction, accumulation = settings.logp_reduction, settings.grad_accumulation
    check_kl_gate(settings.kl_gate, accumulation)
    log, skipped, total = [], 0, 0.0  # per-minibatch stats; total: the loss of the step being accumulated
    sizes = dict(minibatch_size=settings.minibatch_size, epochs=settings.ppo_epochs, accumulation=accumulation)
    # the KL gate judges a whole minibatch before its step: under it, minibatches run whole
    sizes["micro_batch_tokens"] = 0 if settings.kl_gate is not None else settings.micro_batch_tokens
    coefs = dict(clip_eps=settings.clip_eps, entropy_coef=settings.entropy_coef, kl_coef=settings.kl_coef)
    stepped = False  # whether this adapter's weights have moved since its steps were sampled
    for mb in minibatches(
        policy, adapter, steps, idx, rng, temperature=temperature, reference=settings.kl_coef > 0, ranks=ranks, **sizes
    ):
        logp = reduce_batch(mb.logp_tok, mb.mask, reduction)  # (B,) log pi(a|o), with grad
        if settings.old_logps == "learner" and not stepped:
            old = logp.detach()  # (B,) the sampling weights' log-probs, in the learner's own numbers
        else:
            old = action_logps([s.token_logps for s in mb.steps], reduction)  # (B,) behaviour log-probs
        weights = action_weights(mb.steps, reduction, tis_cap)  # (B,) TIS weights, or None (off)
        entropy = masked_mean(mb.entropy_tok, mb.mask)  # per token
        kl = masked_mean(approx_kl(mb.logp_tok, mb.ref_tok), mb.mask) if settings.kl_coef > 0 else None  # per token
        loss, stats = action_ppo_loss(
            logp, old, advantages[mb.rows], entropy, kl, weights=weights, share=mb.share, **coefs
        )
        rows, tokens = mb.share.weights  # the clip statistics are means over rows, entropy and KL over tokens
        local = {**stats, "entropy": entropy.item(), **({} if kl is None else {"kl_ref": kl.item()})}
        stats = shared_means(ranks, local, {"clip_frac": rows, "approx_kl": rows, "entropy": tokens, "kl_ref": tokens})
        row = {} if kl is None else {"kl_ref": stats["kl_ref"]}  # logged for gated minibatches too
        if settings.kl_gate is not None and stats["approx_kl"] > settings.kl_gate:  # too far from the behaviour policy
            log.append(row)
            skipped += 1
            continue
        part = apply(optimizer, loss, policy.parameters(adapter), settings.max_grad_norm, adapter, ranks, mb.share)
        stepped = stepped or mb.share.last  # the last part of a step steps
        total = part if mb.share.first else total + part  # an accumulated step's loss: the sum of its parts'
        clip = {k: stats[k] for k in ("entropy", "clip_frac", "approx_kl")}
        log.append({**row, **({"loss": total} if mb.share.last else {}), **clip, **weight_stats(weights)})
    return {**mean_stats(log, f"{adapter}/"), f"{adapter}/skipped_minibatches": float(skipped)}


@torch.no_grad()
def log_ratios(
    policy: LaMASPolicy,
    adapter: str,
    steps: list[AgentStep],
    idx: list[int],
    *,
    temperature: Temperature,
    minibatch_size: int,
    reduction: str,
) -> torch.Tensor:
    """``log pi_new(a|o) - log pi_old(a|o)`` of ``adapter``'s actions ``idx`` (e.g. after its step), ``(len(idx),)``."""
    return torch.cat(
        [
            reduce_batch(mb.logp_tok, mb.mask, reduction) - action_logps([s.token_logps for s in mb.steps], reduction)
            for mb in minibatches(
                policy, adapter, steps, idx, None, temperature=temperature, minibatch_size=minibatch_size
            )
        ]
    )
