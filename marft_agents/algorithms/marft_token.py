"""MARFT at token level (the original code's "TPPO"); ``docs/algorithms/marft_token.md``.

Every generated token is an action. With ``V_k`` the critic's value of the state before token ``k``
(the prompt plus the response so far) and the tokens of all agents of an episode flattened in
acting order:

- inside a response:                ``delta_k = gamma_token * V_{k+1} - V_k``  (no reward)
- a response's last token:          ``delta_k = r + gamma_agent * V(next agent's first token) - V_k``
- the round's last agent's last:    ``delta_k = r + gamma * (1 - done) * V(next round's first token) - V_k``

and GAE runs backwards over that sequence with ``lambda`` (:func:`marft_agents.advantages.token_gae`,
:func:`marft_agents.advantages.token_advantages`).

1. A per-token critic: the value head of action-level MARFT applied to the frozen base's hidden state
   at every response position (``LaMASPolicy.token_features``), computed once per update.
2. The flattened sequences of all episodes are laid out as rows of one ``(n_episodes, T)`` tensor with
   index arithmetic (no Python loop over tokens); the GAE scan loops over token positions only,
   vectorised over episodes.
3. Per agent, PPO-clip per token: ``rho_k = exp(log pi(w_k) - log pi_old(w_k))`` times the token's
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

from marft_agents.advantages import at_last_token, normalize, spread, token_advantages
from marft_agents.algorithms.base import (
    ChainSettings,
    CriticLearner,
    action_log_ratios,
    adapter_optimizers,
    check_reduction,
    flatten,
    pack,
    round_robin,
    sequential_policy_steps,
    steps_of,
    token_features,
    token_objective,
    train_adapter,
)
from marft_agents.critic import ValueHead, fit_critic
from marft_agents.policy import LaMASPolicy
from marft_agents.rollout import AgentStep, Episode


@dataclass
class MARFTTokenConfig(ChainSettings):
    """Hyper-parameters of token-level MARFT (those of action level, plus the per-token discount).

    ``minibatch_size`` counts agent-steps (each with all its tokens); ``logp_reduction`` only shapes
    an action's log-prob in the sequential weight ``M``; the PPO ratio is per token.
    """

    gamma_token: float = 1.0
    """Discount between tokens of one response (1.0: a response's length is not penalised)."""


class MARFTToken(CriticLearner):
    """Token-level MARFT: per-token critic, GAE over all agents' tokens, PPO-clip per token."""

    config: MARFTTokenConfig

    def __init__(self, policy: LaMASPolicy, config: MARFTTokenConfig, temperature: float):
        check_reduction(config.logp_reduction)
        super().__init__(policy, config, temperature)
        self.critic = ValueHead(policy.hidden_size)  # applied at every response position
        self.optimizers = adapter_optimizers(policy, config.lr)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.critic_lr, weight_decay=0.0)

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One token-level MARFT update from whole episodes; returns metrics."""
        cfg = self.config
        steps = flatten(episodes)
        batch = pack(steps)
        feats = token_features(self.policy, steps, cfg.minibatch_size)  # (N, R, d), frozen: once per update
        with torch.no_grad():
            values_old = self.critic(feats) * batch.mask  # (N, R)
        episode_ids = {e: k for k, e in enumerate(dict.fromkeys(s.episode for s in steps))}
        rewards = at_last_token(torch.tensor([s.reward for s in steps], dtype=torch.float32), batch.lengths,
                                batch.mask.shape[1])  # (N, R): a step's reward on its last token
        advantages, returns = token_advantages(
            rewards, values_old, batch.mask,
            torch.tensor([episode_ids[s.episode] for s in steps], dtype=torch.long),
            torch.tensor([s.round_end for s in steps]), torch.tensor([s.done for s in steps]),
            gamma=cfg.gamma, gamma_agent=cfg.gamma_agent, gamma_token=cfg.gamma_token, lam=cfg.gae_lambda,
        )
        raw_spread = spread(advantages, batch.mask)  # before normalisation: 0 when there is nothing to learn
        if cfg.normalize_advantages:
            advantages = normalize(advantages, batch.mask)

        def policy_step(adapter: str, idx: list[int], adv: torch.Tensor) -> dict[str, float]:
            return train_adapter(
                self.policy, adapter, self.optimizers[adapter], steps, idx, rng,
                token_objective(batch.old_logp, adv, cfg.clip_eps, self.tis_cap),
                temperature=self.temperature, entropy_coef=cfg.entropy_coef, kl_coef=cfg.kl_coef,
                kl_gate=cfg.kl_gate, epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size,
                max_grad_norm=cfg.max_grad_norm,
            )

        metrics: dict[str, float] = {}
        learning = self.learning_adapters(update)
        if cfg.sequential.enabled:
            metrics.update(sequential_policy_steps(
                self.policy, learning, steps, advantages, rng, policy_step, settings=cfg.sequential,
                temperature=self.temperature, minibatch_size=cfg.minibatch_size, reduction=cfg.logp_reduction,
            ))
        else:
            for adapter in learning:
                idx = steps_of(self.policy, steps, adapter)
                if idx:
                    metrics.update(policy_step(adapter, idx, advantages))
        metrics.update(fit_critic(self.critic, self.critic_optimizer, (feats,), values_old, returns, rng,
                                  epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size,
                                  value_clip=cfg.value_clip, max_grad_norm=cfg.max_grad_norm, mask=batch.mask))
        metrics["advantage_std"] = float(advantages[batch.mask].std()) if batch.mask.sum() > 1 else 0.0
        metrics["signal/advantage_std"] = raw_spread
        return metrics

    def learning_adapters(self, update: int) -> list[str]:
        """The adapters that learn in this update (all, or one in turn)."""
        return round_robin(self.policy.adapters, update, self.config.agent_iteration_interval)

    def action_log_ratios(self, adapter: str, steps: list[AgentStep]) -> torch.Tensor:
        """``log pi_new(a|o) - log pi_old(a|o)`` of each step's action under ``adapter``, ``(n,)``."""
        return action_log_ratios(self.policy, adapter, steps, temperature=self.temperature,
                                 minibatch_size=self.config.minibatch_size, reduction=self.config.logp_reduction)

    def features(self, steps: list[AgentStep]) -> torch.Tensor:
        """Frozen base features before every response token, ``(N, R, d)`` (zeros on padding)."""
        return token_features(self.policy, steps, self.config.minibatch_size)
