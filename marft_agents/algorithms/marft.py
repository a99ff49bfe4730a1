"""MARFT at action level (the original code's "APPO"); ``docs/algorithms/marft.md``.

1. A critic shared by all agents estimates ``V(o^i)`` from frozen base features; since ``o^i`` holds
   the predecessors' same-round actions, this is the sequential value ``V(o, a^{1:i-1})``.
2. Chain GAE along each round's acting order (``gamma_agent`` between agents of a round, ``gamma``
   between rounds), over all collected episodes at once (episode ends cut exactly one link).
3. Per agent, PPO-clip on whole actions: ``log pi(a|o)`` is the sum (or mean) of the response's token
   log-probs under the sampling temperature; an entropy bonus; an optional KL-to-reference penalty
   (the base with adapters disabled); an optional approx-KL gate that skips a minibatch.
4. The critic fits the GAE returns with a clipped value loss.
5. Agent-by-agent training (the original's ``agent_iteration_interval``): only agent
   ``(update // K) mod N`` learns in update ``update``; ``K = 0`` trains every agent every update.
6. Optionally (``sequential.enabled``) the learning agents update one after another, each with its
   advantages weighted by its predecessors' clipped product ratio (``marft_agents/sequential.py``, HAPPO-style).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from marft_agents.advantages import chain_gae, normalize, spread
from marft_agents.algorithms.base import (
    ChainSettings,
    CriticLearner,
    action_log_ratios,
    action_objective,
    adapter_optimizers,
    check_reduction,
    features,
    flatten,
    round_robin,
    sequential_policy_steps,
    steps_of,
    train_adapter,
)
from marft_agents.critic import ValueHead, fit_critic
from marft_agents.policy import LaMASPolicy
from marft_agents.rollout import AgentStep, Episode


@dataclass
class MARFTConfig(ChainSettings):
    """Hyper-parameters of action-level MARFT: the shared PPO ones plus the multi-agent ones."""


def compute_advantages(
    steps: list[AgentStep], values: torch.Tensor, *, gamma: float, gamma_agent: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chain GAE over all steps as one stream (``done`` cuts the links between episodes)."""
    rewards = torch.tensor([s.reward for s in steps], dtype=torch.float32)
    round_ends = torch.tensor([s.round_end for s in steps])
    dones = torch.tensor([s.done for s in steps])
    return chain_gae(rewards, values, round_ends, dones, gamma=gamma, gamma_agent=gamma_agent, lam=lam)


class MARFT(CriticLearner):
    """Action-level MARFT: shared critic, chain GAE, PPO-clip per agent."""

    config: MARFTConfig

    def __init__(self, policy: LaMASPolicy, config: MARFTConfig, temperature: float):
        check_reduction(config.logp_reduction)
        super().__init__(policy, config, temperature)
        self.critic = ValueHead(policy.hidden_size)
        self.optimizers = adapter_optimizers(policy, config.lr)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.critic_lr, weight_decay=0.0)

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One MARFT update from whole episodes; returns metrics."""
        cfg = self.config
        steps = flatten(episodes)
        feats = features(self.policy, steps, cfg.minibatch_size)  # (N, d), frozen: computed once per update
        with torch.no_grad():
            values_old = self.critic(feats)  # (N,)
        advantages, returns = compute_advantages(
            steps, values_old, gamma=cfg.gamma, gamma_agent=cfg.gamma_agent, lam=cfg.gae_lambda
        )
        raw_spread = spread(advantages)  # before normalisation: 0 when there is nothing to learn
        if cfg.normalize_advantages:
            advantages = normalize(advantages)
        learning = self.learning_adapters(update)
        metrics: dict[str, float] = {}
        if cfg.sequential.enabled:
            metrics.update(sequential_policy_steps(
                self.policy, learning, steps, advantages, rng, lambda a, idx, adv: self._policy_step(a, steps, idx, adv, rng),
                settings=cfg.sequential, temperature=self.temperature, minibatch_size=cfg.minibatch_size,
                reduction=cfg.logp_reduction,
            ))
        else:
            for adapter in learning:
                idx = steps_of(self.policy, steps, adapter)
                if idx:
                    metrics.update(self._policy_step(adapter, steps, idx, advantages, rng))
        metrics.update(fit_critic(self.critic, self.critic_optimizer, (feats,), values_old, returns, rng,
                                  epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size,
                                  value_clip=cfg.value_clip, max_grad_norm=cfg.max_grad_norm))
        metrics["advantage_std"] = float(advantages.std()) if len(steps) > 1 else 0.0
        metrics["signal/advantage_std"] = raw_spread
        return metrics

    def learning_adapters(self, update: int) -> list[str]:
        """The adapters that learn in this update (all, or one in turn)."""
        return round_robin(self.policy.adapters, update, self.config.agent_iteration_interval)

    def action_log_ratios(self, adapter: str, steps: list[AgentStep]) -> torch.Tensor:
        """``log pi_new(a|o) - log pi_old(a|o)`` of each step's action under ``adapter``, ``(n,)``."""
        return action_log_ratios(self.policy, adapter, steps, temperature=self.temperature,
                                 minibatch_size=self.config.minibatch_size, reduction=self.config.logp_reduction)

    def _policy_step(self, adapter, steps, idx, advantages, rng) -> dict[str, float]:
        cfg = self.config
        return train_adapter(
            self.policy, adapter, self.optimizers[adapter], steps, idx, rng,
            action_objective(advantages, cfg.clip_eps, cfg.logp_reduction, self.tis_cap),
            temperature=self.temperature, entropy_coef=cfg.entropy_coef, kl_coef=cfg.kl_coef, kl_gate=cfg.kl_gate,
            epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size, max_grad_norm=cfg.max_grad_norm,
        )
