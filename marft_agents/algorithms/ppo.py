"""Single-agent PPO: the MARFT paper's baseline (``docs/algorithms/ppo.md``), one agent with the same model and budget.

Textbook PPO with the pieces action-level MARFT uses (``base.py``, ``losses.py``), on one agent:

1. A critic ``V(o)``, a small MLP on frozen base features of the observation (``critic.py``).
2. GAE over the agent's rounds: with one agent every step ends its round, so chain GAE's
   ``delta_t = r_t + gamma (1 - done_t) V(o_{t+1}) - V(o_t)`` is plain GAE (``gamma_agent`` never applies).
3. PPO-clip on whole responses (:meth:`PPO.policy_step`), ``log pi(a|o)`` the sum (or mean) of the
   response's token log-probs under the sampling temperature; entropy bonus; optional KL-to-reference
   penalty and approx-KL gate.
4. A clipped value loss on the GAE returns.

Select it with ``marft train env=marft/MathSolo-v0 algo=ppo``; keep ``max_new_tokens`` and
``episodes_per_update`` as in the multi-agent run it is compared with (same model, same budget).
"""

from __future__ import annotations

import numpy as np
import torch

from marft_agents.algorithms.action_ppo import action_ppo_step
from marft_agents.algorithms.advantages import chain_gae, normalize, returns_differ, spread
from marft_agents.algorithms.base import CriticLearner, PPOSettings, adapter_optimizers, agent_health, by_adapter, team_returns
from marft_agents.algorithms.critic import ValueHead, features, fit_critic
from marft_agents.models.policy import LaMASPolicy
from marft_agents.rollout.layered import AgentStep, Episode

PPOConfig = PPOSettings
"""Hyper-parameters of single-agent PPO: the shared PPO ones, with MARFT's defaults for a fair comparison."""


class PPO(CriticLearner):
    """Single-agent PPO: a critic on the observation, plain GAE over the agent's rounds, PPO-clip on responses."""

    config: PPOConfig

    def __init__(self, policy: LaMASPolicy, config: PPOConfig, temperature: float, tis_cap: float | None = None):
        if len(policy.agents) != 1:
            raise ValueError(
                f"single-agent PPO needs a one-agent env such as marft/MathSolo-v0, got agents {policy.agents}; "
                "use algo=marft, ippo or mappo for several agents"
            )
        super().__init__(policy, config, temperature, tis_cap)
        self.critic = ValueHead(policy.hidden_size).to(policy.device)  # made on the CPU: the same start on every device
        self.optimizers = adapter_optimizers(policy, config.lr)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.critic_lr, weight_decay=0.0)

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One PPO update from whole episodes; returns metrics."""
        cfg = self.config
        steps, idx_of = by_adapter(self.policy, episodes)
        feats = features(self.policy, steps, cfg.minibatch_size)  # (N, d), frozen: computed once per update
        with torch.no_grad():
            values_old = self.critic(feats)  # (N,)
        # With one agent every step ends its round, so chain GAE is plain GAE (gamma_agent never applies).
        advantages, returns = chain_gae(
            torch.tensor([s.reward for s in steps], dtype=torch.float32, device=values_old.device),
            values_old,
            torch.tensor([s.round_end for s in steps], device=values_old.device),
            torch.tensor([s.done for s in steps], device=values_old.device),
            gamma=cfg.gamma,
            gamma_agent=cfg.gamma,
            lam=cfg.gae_lambda,
        )
        raw, raw_spread = advantages, spread(advantages)  # before normalisation: 0 when there is nothing to learn
        if cfg.normalize_advantages:
            advantages = normalize(advantages)
        (adapter,) = self.policy.adapters
        informative = returns_differ(team_returns(episodes, self.policy.device))  # equal returns: a step would follow critic noise
        metrics = self.policy_step(adapter, steps, idx_of[adapter], advantages, rng) if idx_of[adapter] and informative else {}
        metrics["policy/skipped_equal_returns"] = float(not informative)
        metrics.update(agent_health(steps, idx_of, raw))
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

    def policy_step(
        self, adapter: str, steps: list[AgentStep], idx: list[int], advantages: torch.Tensor, rng: np.random.Generator
    ) -> dict[str, float]:
        """Epochs of PPO-clip on whole responses over ``adapter``'s steps ``idx`` (:func:`action_ppo_step`); ``advantages`` ``(N,)``."""
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
