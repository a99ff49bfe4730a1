"""MARFT at action level (the original code's "APPO"); ``docs/algorithms/marft.md``.

1. A critic shared by all agents estimates ``V(o^i)`` from frozen base features; since ``o^i`` holds
   the predecessors' same-round actions, this is the sequential value ``V(o, a^{1:i-1})``.
2. Chain GAE along each round's acting order (``gamma_agent`` between agents of a round, ``gamma``
   between rounds), over all collected episodes at once (episode ends cut exactly one link).
3. Per agent, PPO-clip on whole actions (:meth:`MARFT.policy_step`): ``log pi(a|o)`` is the sum (or
   mean) of the response's token log-probs under the sampling temperature; an entropy bonus; an
   optional KL-to-reference penalty (the base with adapters disabled); an optional approx-KL gate
   that skips a minibatch.
4. The critic fits the GAE returns with a clipped value loss.
5. Agent-by-agent training (the original's ``agent_iteration_interval``): only agent
   ``(update // K) mod N`` learns in update ``update``; ``K = 0`` trains every agent every update.
6. Optionally (``sequential.enabled``) the learning agents update one after another, each with its
   advantages weighted by its predecessors' clipped product ratio (``marft_agents/algorithms/sequential.py``, HAPPO-style).
"""

from __future__ import annotations

import numpy as np
import torch

from marft_agents.algorithms.action_ppo import action_log_ratios, action_ppo_step
from marft_agents.algorithms.advantages import chain_gae, normalize_per_agent, returns_differ, spread
from marft_agents.algorithms.base import (
    ChainSettings,
    CriticLearner,
    adapter_ids,
    adapter_optimizers,
    agent_health,
    by_adapter,
    team_returns,
)
from marft_agents.algorithms.critic import ValueHead, features, fit_critic
from marft_agents.algorithms.sequential import SequentialWeights, agent_order, round_robin
from marft_agents.models.policy import LaMASPolicy
from marft_agents.rollout.layered import AgentStep, Episode

MARFTConfig = ChainSettings
"""Hyper-parameters of action-level MARFT: the shared PPO ones plus the multi-agent ones (``ChainSettings``)."""


def compute_advantages(
    steps: list[AgentStep], values: torch.Tensor, *, gamma: float, gamma_agent: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chain GAE over all steps as one stream (``done`` cuts the links between episodes).

    The stream holds each step's :attr:`~AgentStep.chain_reward`: a round's shared reward enters once,
    on its last agent, and the chain backs it up to the agents before it (every agent's copy of it,
    summed along the chain, would count it once per agent).
    """
    device = values.device
    rewards = torch.tensor([s.chain_reward for s in steps], dtype=torch.float32, device=device)
    round_ends = torch.tensor([s.round_end for s in steps], device=device)
    dones = torch.tensor([s.done for s in steps], device=device)
    return chain_gae(rewards, values, round_ends, dones, gamma=gamma, gamma_agent=gamma_agent, lam=lam)


class MARFT(CriticLearner):
    """Action-level MARFT: shared critic, chain GAE, PPO-clip per agent."""

    config: MARFTConfig

    def __init__(self, policy: LaMASPolicy, config: MARFTConfig, temperature: float, tis_cap: float | None = None):
        super().__init__(policy, config, temperature, tis_cap)
        self.critic = ValueHead(policy.hidden_size).to(policy.device)  # made on the CPU: the same start on every device
        self.optimizers = adapter_optimizers(policy, config.lr)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.critic_lr, weight_decay=0.0)

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One MARFT update from whole episodes; returns metrics."""
        cfg = self.config
        steps, idx_of = by_adapter(self.policy, episodes)
        feats = features(self.policy, steps, cfg.minibatch_size)  # (N, d), frozen: computed once per update
        with torch.no_grad():
            values_old = self.critic(feats)  # (N,)
        advantages, returns = compute_advantages(steps, values_old, gamma=cfg.gamma, gamma_agent=cfg.gamma_agent, lam=cfg.gae_lambda)
        raw_spread = spread(advantages)  # before normalisation: 0 when there is nothing to learn
        metrics: dict[str, float] = agent_health(steps, idx_of, advantages)
        if cfg.normalize_advantages:  # per agent: a joint standardisation pushes each agent by a constant
            advantages = normalize_per_agent(advantages, adapter_ids(self.policy, steps))
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
                metrics.update(self.policy_step(adapter, steps, idx, advantages, rng))
                continue
            weights = trust.weights()  # (N,) M of every step
            metrics.update(self.policy_step(adapter, steps, idx, advantages * weights, rng))
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
            )
        )
        metrics["advantage_std"] = float(advantages.std()) if len(steps) > 1 else 0.0
        metrics["signal/advantage_std"] = raw_spread
        return metrics

    def learning_adapters(self, update: int) -> list[str]:
        """The adapters that learn in this update (all, or one in turn)."""
        return round_robin(self.policy.adapters, update, self.config.agent_iteration_interval)

    def policy_step(
        self, adapter: str, steps: list[AgentStep], idx: list[int], advantages: torch.Tensor, rng: np.random.Generator
    ) -> dict[str, float]:
        """Epochs of PPO-clip on whole actions over ``adapter``'s steps ``idx`` (:func:`action_ppo_step`); ``advantages`` ``(N,)``."""
        return action_ppo_step(
            self.policy,
            self.optimizers[adapter],
            adapter,
            steps,
            idx,
            advantages,
            rng,
            settings=self.config,
            temperature=self.temperature,
            tis_cap=self.tis_cap,
        )

    def log_ratios(self, adapter: str, steps: list[AgentStep], idx: list[int]) -> torch.Tensor:
        """``log pi_new(a|o) - log pi_old(a|o)`` of ``adapter``'s actions ``idx`` (after its step), ``(len(idx),)``."""
        cfg = self.config
        return action_log_ratios(
            self.policy, adapter, steps, idx, temperature=self.temperature, minibatch_size=cfg.minibatch_size, reduction=cfg.logp_reduction
        )
