"""MARFT at token level (the original code's "TPPO"); ``docs/algorithms/marft_token.md``.

Every generated token is an action. With ``V_k`` the critic's value of the state before token ``k``
(the prompt plus the response so far) and the tokens of all agents of an episode flattened in
acting order:

- inside a response:                ``delta_k = gamma_token * V_{k+1} - V_k``  (no reward)
- a response's last token:          ``delta_k = r + gamma_agent * V(next agent's first token) - V_k``
- the round's last agent's last:    ``delta_k = r + gamma * (1 - done) * V(next round's first token) - V_k``

and GAE runs backwards over that sequence with ``lambda`` (:func:`marft_agents.algorithms.advantages.token_gae`,
:func:`marft_agents.algorithms.advantages.token_advantages`).

1. A per-token critic: the value head of action-level MARFT applied to the frozen base's hidden state
   at every response position (``LaMASPolicy.token_features``), computed once per update.
2. The flattened sequences of all episodes are laid out as rows of one ``(n_episodes, T)`` tensor with
   index arithmetic (no Python loop over tokens); the GAE scan loops over token positions only,
   vectorised over episodes.
3. Per agent, PPO-clip per token (:meth:`MARFTToken.policy_step`): ``rho_k = exp(log pi(w_k) - log pi_old(w_k))`` times the token's
   advantage, mask-weighted means over the response tokens of a minibatch of agent-steps; the
   entropy bonus, optional KL-to-reference penalty and approx-KL gate of action level.
4. The critic fits the per-token returns with a masked clipped value loss.
5. Agent-by-agent training and the sequential trust-region update work as at action level; the
   sequential weight ``M`` of a round multiplies every token advantage of the later agents' responses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from marft_agents.algorithms.advantages import at_last_token, normalize_per_agent, returns_differ, spread, token_advantages
from marft_agents.algorithms.base import (
    ChainSettings,
    CriticLearner,
    adapter_ids,
    adapter_optimizers,
    agent_health,
    apply,
    by_adapter,
    minibatches,
    pack,
    team_returns,
)
from marft_agents.algorithms.critic import ValueHead, fit_critic, token_features
from marft_agents.algorithms.losses import action_logps, approx_kl, masked_mean, mean_stats, ppo_clip_loss, reduce_batch
from marft_agents.algorithms.sequential import SequentialWeights, agent_order, round_robin
from marft_agents.algorithms.tis import token_weights, weight_stats
from marft_agents.models.policy import LaMASPolicy
from marft_agents.rollout.layered import AgentStep, Episode
from marft_agents.settings.fields import UNIT, ranged


@dataclass
class MARFTTokenConfig(ChainSettings):
    """Hyper-parameters of token-level MARFT (those of action level, plus the per-token discount).

    ``minibatch_size`` counts agent-steps (each with all its tokens); ``logp_reduction`` only shapes
    an action's log-prob in the sequential weight ``M``; the PPO ratio is per token.
    """

    gamma_token: float = ranged(1.0, UNIT)
    """Discount between tokens of one response (1.0: a response's length is not penalised)."""


class MARFTToken(CriticLearner):
    """Token-level MARFT: per-token critic, GAE over all agents' tokens, PPO-clip per token."""

    skips_ignored = False  # the per-token backup needs a token on every step

    config: MARFTTokenConfig

    def __init__(self, policy: LaMASPolicy, config: MARFTTokenConfig, temperature: float, tis_cap: float | None = None):
        super().__init__(policy, config, temperature, tis_cap)
        self.critic = ValueHead(policy.hidden_size).to(policy.device)  # applied at every response position
        self.optimizers = adapter_optimizers(policy, config.lr)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.critic_lr, weight_decay=0.0)

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One token-level MARFT update from whole episodes; returns metrics."""
        cfg = self.config
        steps, idx_of = by_adapter(self.policy, episodes)
        device = self.policy.device
        batch = pack(steps, device)
        feats = token_features(self.policy, steps, cfg.minibatch_size)  # (N, R, d), frozen: once per update
        with torch.no_grad():
            values_old = self.critic(feats) * batch.mask  # (N, R)
        episode_ids = {e: k for k, e in enumerate(dict.fromkeys(s.episode for s in steps))}
        rewards = at_last_token(
            torch.tensor([s.chain_reward for s in steps], dtype=torch.float32, device=device), batch.lengths, batch.mask.shape[1]
        )  # (N, R): a step's reward on its last token, a round's shared reward once (on its last agent)
        advantages, returns = token_advantages(
            rewards,
            values_old,
            batch.mask,
            torch.tensor([episode_ids[s.episode] for s in steps], dtype=torch.long, device=device),
            torch.tensor([s.round_end for s in steps], device=device),
            torch.tensor([s.done for s in steps], device=device),
            gamma=cfg.gamma,
            gamma_agent=cfg.gamma_agent,
            gamma_token=cfg.gamma_token,
            lam=cfg.gae_lambda,
        )
        raw_spread = spread(advantages, batch.mask)  # before normalisation: 0 when there is nothing to learn
        metrics: dict[str, float] = agent_health(steps, idx_of, advantages, batch.mask)
        if cfg.normalize_advantages:  # per agent: a joint standardisation pushes each agent by a constant
            advantages = normalize_per_agent(advantages, adapter_ids(self.policy, steps), batch.mask)
        informative = returns_differ(team_returns(episodes, self.policy.device))  # equal returns: a step would follow critic noise
        metrics["policy/skipped_equal_returns"] = float(not informative)
        learning = self.learning_adapters(update) if informative else []
        trust = None
        if cfg.sequential.enabled:  # one adapter after another, each weighted by its predecessors' ratios
            learning = agent_order(learning, cfg.sequential.order, rng)
            trust = SequentialWeights([(s.episode, s.round) for s in steps], cfg.sequential.weight_clip, self.policy.device)
        for k, adapter in enumerate(learning):
            idx = idx_of[adapter]
            if not idx:
                continue
            if trust is None:
                metrics.update(self.policy_step(adapter, steps, idx, batch.old_logp, advantages, rng))
                continue
            weights = trust.weights()  # (N,) M of every step, the same for all its tokens
            metrics.update(self.policy_step(adapter, steps, idx, batch.old_logp, advantages * weights.view(-1, 1), rng))
            metrics[f"{adapter}/sequential_weight"] = float(weights[idx].mean())
            metrics[f"{adapter}/sequential_position"] = float(k)
            if k + 1 < len(learning):  # the last adapter's new ratio is not needed by anyone
                trust.record(idx, self.log_ratios(adapter, steps, idx))
        metrics.update(
            fit_critic(
                self.critic,
                self.critic_optimizer,
                (feats,),
                values_old,
                returns,
                rng,
                epochs=cfg.ppo_epochs,
                minibatch_size=cfg.minibatch_size,
                value_clip=cfg.value_clip,
                max_grad_norm=cfg.max_grad_norm,
                mask=batch.mask,
            )
        )
        metrics["advantage_std"] = float(advantages[batch.mask].std()) if batch.mask.sum() > 1 else 0.0
        metrics["signal/advantage_std"] = raw_spread
        return metrics

    def learning_adapters(self, update: int) -> list[str]:
        """The adapters that learn in this update (all, or one in turn)."""
        return round_robin(self.policy.adapters, update, self.config.agent_iteration_interval)

    def policy_step(
        self,
        adapter: str,
        steps: list[AgentStep],
        idx: list[int],
        old_logp: torch.Tensor,
        advantages: torch.Tensor,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """Epochs of PPO-clip per token over ``adapter``'s steps ``idx``; ``old_logp``, ``advantages`` ``(N, R)``."""
        cfg = self.config
        log, skipped = [], 0  # per-minibatch stats
        for mb in minibatches(
            self.policy,
            adapter,
            steps,
            idx,
            rng,
            temperature=self.temperature,
            minibatch_size=cfg.minibatch_size,
            epochs=cfg.ppo_epochs,
            reference=cfg.kl_coef > 0,
        ):
            rows, width = torch.as_tensor(mb.rows, device=old_logp.device), mb.mask.shape[1]
            weights = token_weights(mb.steps, width, self.tis_cap, mb.mask.device)  # (B, R) TIS weights, or None (off)
            ppo, stats = ppo_clip_loss(
                mb.logp_tok, old_logp[rows, :width], advantages[rows, :width], cfg.clip_eps, mb.mask, weights=weights
            )
            entropy = masked_mean(mb.entropy_tok, mb.mask)
            loss = ppo - cfg.entropy_coef * entropy
            row = {}
            if cfg.kl_coef > 0:
                kl = masked_mean(approx_kl(mb.logp_tok, mb.ref_tok), mb.mask)  # per token, to the reference
                loss = loss + cfg.kl_coef * kl
                row["kl_ref"] = kl.item()  # logged for gated minibatches too
            if cfg.kl_gate is not None and stats["approx_kl"] > cfg.kl_gate:  # too far from the behaviour policy
                log.append(row)
                skipped += 1
                continue
            apply(self.optimizers[adapter], loss, self.policy.parameters(adapter), cfg.max_grad_norm, adapter)
            log.append(
                {
                    **row,
                    "loss": loss.item(),
                    "entropy": entropy.item(),
                    "clip_frac": stats["clip_frac"],
                    "approx_kl": stats["approx_kl"],
                    **weight_stats(weights, mb.mask),
                }
            )
        return {**mean_stats(log, f"{adapter}/"), f"{adapter}/skipped_minibatches": float(skipped)}

    @torch.no_grad()
    def log_ratios(self, adapter: str, steps: list[AgentStep], idx: list[int]) -> torch.Tensor:
        """Action-level ``log pi_new(a|o) - log pi_old(a|o)`` of ``adapter``'s steps ``idx``, for the weight ``M``."""
        cfg, reduction = self.config, self.config.logp_reduction
        return torch.cat(
            [
                reduce_batch(mb.logp_tok, mb.mask, reduction) - action_logps([s.token_logps for s in mb.steps], reduction)
                for mb in minibatches(
                    self.policy, adapter, steps, idx, None, temperature=self.temperature, minibatch_size=cfg.minibatch_size
                )
            ]
        )
