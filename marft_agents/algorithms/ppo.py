"""Single-agent PPO: the MARFT paper's baseline (``docs/algorithms/ppo.md``), one agent with the same model and budget.

Textbook PPO with the pieces action-level MARFT composes (``critic.py``, ``prepare.py``, ``action_ppo.py``),
on one agent:

1. A critic ``V(o)``, a small MLP on frozen base features of the observation (``critic.py``).
2. GAE over the agent's rounds: with one agent every step ends its round, so chain GAE's
   ``delta_t = r_t + gamma (1 - done_t) V(o_{t+1}) - V(o_t)`` is plain GAE (``gamma_agent`` never applies).
3. PPO-clip on whole responses (``action_ppo.step``), ``log pi(a|o)`` the sum (or mean) of the
   response's token log-probs under the sampling temperature; entropy bonus; optional KL-to-reference
   penalty and approx-KL gate.
4. A clipped value loss on the GAE returns.

Select it with ``marft train env=marft/MathSolo-v0 algo=ppo``; keep ``max_new_tokens`` and
``episodes_per_update`` as in the multi-agent run it is compared with (same model, same budget).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from marft_agents.algorithms import action_ppo
from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms.advantages import chain_gae
from marft_agents.algorithms.base import Learner, by_adapter
from marft_agents.algorithms.critic import Critic, ValueHead, features
from marft_agents.algorithms.optimizers import adapter_optimizers
from marft_agents.algorithms.ppo_settings import PPOSettings
from marft_agents.algorithms.prepare import prepare_advantages
from marft_agents.algorithms.returns import agent_returns
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature
from marft_agents.rollout.episode import Episode

PPOConfig = PPOSettings
"""Hyper-parameters of single-agent PPO: the shared PPO ones, with MARFT's defaults for a fair comparison."""


class PPO(Learner):
    """Single-agent PPO: a critic on the observation, plain GAE over the agent's rounds, PPO-clip on responses."""

    config: PPOConfig
    critic: Critic

    def __init__(self, policy: LaMASPolicy, config: PPOConfig, temperature: Temperature, **options: Any):
        """``options``: :class:`~marft_agents.algorithms.base.Learner`'s ``tis_cap`` and ``frozen``."""
        if len(policy.agents) != 1:
            raise ValueError(
                f"single-agent PPO needs a one-agent env such as marft/MathSolo-v0, got agents {policy.agents}; "
                "use algo=marft, ippo or mappo for several agents"
            )
        super().__init__(policy, config, temperature, **options)
        self.critic = Critic(ValueHead(policy.hidden_size), policy.device, **config.critic_options())
        self.optimizers = adapter_optimizers(policy, config.lr, self.trainable)

    @classmethod
    def check_data_parallel(cls, config: PPOConfig) -> None:
        """Single-agent PPO splits across ranks: whole episodes stay on one rank (GAE is local)."""

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One PPO update from whole episodes; returns metrics."""
        (adapter,), cfg = self.policy.adapters, self.config
        steps, idx_of = by_adapter(self.policy, episodes)
        feats = features(self.policy, steps, cfg.minibatch_size)  # (N, d) frozen base features: once per update
        values_old = self.critic.observe_and_value(feats, ranks=self.ranks)  # (N,), every rank's rows in the statistics
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
        advantages, metrics, informative = prepare_advantages(  # equal returns: no policy step
            self.policy,
            agent_returns(self.policy, episodes, "own"),
            steps,
            idx_of,
            advantages,
            **cfg.advantage_options(),
            ranks=self.ranks,
        )
        if dp.held(self.ranks, idx_of)[adapter] and informative[adapter]:  # data-parallel: every rank steps, or none
            sampling = dict(settings=cfg, temperature=self.temperature, tis_cap=self.tis_cap, ranks=self.ranks)
            optimizer = self.optimizers[adapter]
            metrics.update(
                action_ppo.step(self.policy, optimizer, adapter, steps, idx_of[adapter], advantages, rng, **sampling)
            )
        metrics.update(self.critic.fit((feats,), values_old, returns, rng, ranks=self.ranks))
        metrics["advantage_std"] = float(advantages.std()) if len(steps) > 1 else 0.0
        return metrics
