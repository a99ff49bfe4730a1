"""Single-agent PPO: the MARFT paper's baseline (``docs/algorithms/ppo.md``), one agent with the same model and budget.

Textbook PPO with the pieces action-level MARFT uses (``base.py``), on one agent:

1. A critic ``V(o)``, a small MLP on frozen base features of the observation (``critic.py``).
2. GAE over the agent's rounds: with one agent every step ends its round, so chain GAE's
   ``delta_t = r_t + gamma (1 - done_t) V(o_{t+1}) - V(o_t)`` is plain GAE (``gamma_agent`` never applies).
3. PPO-clip on whole responses, ``log pi(a|o)`` the sum (or mean) of the response's token log-probs
   under the sampling temperature; entropy bonus; optional KL-to-reference penalty and approx-KL gate.
4. A clipped value loss on the GAE returns.

Select it with ``marft train env=marft/MathSolo-v0 algo=ppo``; keep ``max_new_tokens`` and
``episodes_per_update`` as in the multi-agent run it is compared with (same model, same budget).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from marft_agents.advantages import chain_gae, normalize, spread
from marft_agents.algorithms.base import (
    CriticLearner,
    PPOSettings,
    action_objective,
    adapter_optimizers,
    check_reduction,
    features,
    flatten,
    train_adapter,
)
from marft_agents.critic import ValueHead, fit_critic
from marft_agents.policy import LaMASPolicy
from marft_agents.rollout import Episode


@dataclass
class PPOConfig(PPOSettings):
    """Hyper-parameters of single-agent PPO: the shared PPO ones, with MARFT's defaults for a fair comparison."""


class PPO(CriticLearner):
    """Single-agent PPO: a critic on the observation, plain GAE over the agent's rounds, PPO-clip on responses."""

    config: PPOConfig

    def __init__(self, policy: LaMASPolicy, config: PPOConfig, temperature: float):
        if len(policy.agents) != 1:
            raise ValueError(
                f"single-agent PPO needs a one-agent env such as marft/MathSolo-v0, got agents {policy.agents}; "
                "use algo=marft, ippo or mappo for several agents"
            )
        check_reduction(config.logp_reduction)
        super().__init__(policy, config, temperature)
        self.critic = ValueHead(policy.hidden_size)
        self.optimizers = adapter_optimizers(policy, config.lr)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.critic_lr, weight_decay=0.0)

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One PPO update from whole episodes; returns metrics."""
        cfg = self.config
        steps = flatten(episodes)
        feats = features(self.policy, steps, cfg.minibatch_size)  # (N, d), frozen: computed once per update
        with torch.no_grad():
            values_old = self.critic(feats)  # (N,)
        # With one agent every step ends its round, so chain GAE is plain GAE (gamma_agent never applies).
        advantages, returns = chain_gae(
            torch.tensor([s.reward for s in steps], dtype=torch.float32), values_old,
            torch.tensor([s.round_end for s in steps]), torch.tensor([s.done for s in steps]),
            gamma=cfg.gamma, gamma_agent=cfg.gamma, lam=cfg.gae_lambda,
        )
        raw_spread = spread(advantages)  # before normalisation: 0 when there is nothing to learn
        if cfg.normalize_advantages:
            advantages = normalize(advantages)
        (adapter,) = self.policy.adapters
        metrics = train_adapter(
            self.policy, adapter, self.optimizers[adapter], steps, list(range(len(steps))), rng,
            action_objective(advantages, cfg.clip_eps, cfg.logp_reduction, self.tis_cap),
            temperature=self.temperature, entropy_coef=cfg.entropy_coef, kl_coef=cfg.kl_coef, kl_gate=cfg.kl_gate,
            epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size, max_grad_norm=cfg.max_grad_norm,
        ) if steps else {}
        metrics.update(fit_critic(self.critic, self.critic_optimizer, (feats,), values_old, returns, rng,
                                  epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size,
                                  value_clip=cfg.value_clip, max_grad_norm=cfg.max_grad_norm))
        metrics["advantage_std"] = float(advantages.std()) if len(steps) > 1 else 0.0
        metrics["signal/advantage_std"] = raw_spread
        return metrics
