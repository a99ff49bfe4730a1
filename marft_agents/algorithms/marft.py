"""MARFT at action level (the original code's "APPO"); ``docs/algorithms/marft.md``.

1. A critic shared by all agents estimates ``V(o^i)`` from frozen base features (a team of models,
   ``agents.<id>.model``: one head per model, at its width, shared by that model's agents); since ``o^i`` holds
   the predecessors' same-round actions, this is the sequential value ``V(o, a^{1:i-1})``.
2. Chain GAE along each round's acting order (``gamma_agent`` between agents of a round, ``gamma``
   between rounds), over all collected episodes at once (episode ends cut exactly one link).
3. Per agent, PPO-clip on whole actions (``action_ppo.step``): ``log pi(a|o)`` is the sum (or
   mean) of the response's token log-probs under the sampling temperature; an entropy bonus; an
   optional KL-to-reference penalty (the base with adapters disabled; after ``init_from`` the run's
   starting adapters); an optional approx-KL gate that skips a minibatch.
4. The critic fits the GAE returns with a clipped value loss.
5. Agent-by-agent training (the original's ``agent_iteration_interval``): only agent
   ``(update // K) mod N`` learns in update ``update``; ``K = 0`` trains every agent every update. The
   agents are the trainable ones (``N`` of them): a frozen agent (``agents.<agent_id>.train=false``) never learns.
6. Optionally (``sequential.enabled``) the learning agents update one after another, each with its
   advantages weighted by its predecessors' clipped product ratio (``algorithms/sequential.py``, HAPPO-style).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from marft_agents.algorithms import action_ppo
from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms.advantages import chain_gae
from marft_agents.algorithms.base import Learner, by_adapter
from marft_agents.algorithms.critic import Critic, features, head_rows, model_heads
from marft_agents.algorithms.optimizers import adapter_optimizers
from marft_agents.algorithms.ppo_settings import ChainSettings
from marft_agents.algorithms.prepare import prepare_advantages
from marft_agents.algorithms.returns import agent_returns, require_cooperative, warn_undeclared_team_reward
from marft_agents.algorithms.sequential import round_robin, turns
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature
from marft_agents.rollout.episode import AgentStep, Episode

MARFTConfig = ChainSettings
"""Hyper-parameters of action-level MARFT: the shared PPO ones plus the multi-agent ones (``ChainSettings``)."""


def compute_advantages(
    steps: list[AgentStep],
    values: torch.Tensor,
    *,
    gamma: float,
    gamma_agent: float,
    lam: float,
    shared_reward: str = "once",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chain GAE over all steps as one stream (``done`` cuts the links between episodes).

    The stream holds each step's :attr:`~AgentStep.chain_reward`: a round's shared reward enters once,
    on its last agent, and the chain backs it up to the agents before it (every agent's copy of it,
    summed along the chain, would count it once per agent; ``shared_reward="per_agent"`` does that, for ablations).
    """
    device = values.device
    rewards = torch.tensor(
        [s.chain_reward if shared_reward == "once" else s.reward for s in steps], dtype=torch.float32, device=device
    )
    round_ends = torch.tensor([s.round_end for s in steps], device=device)
    dones = torch.tensor([s.done for s in steps], device=device)
    return chain_gae(rewards, values, round_ends, dones, gamma=gamma, gamma_agent=gamma_agent, lam=lam)


class MARFT(Learner):
    """Action-level MARFT: shared critic, chain GAE, PPO-clip per agent."""

    config: MARFTConfig
    critic: Critic

    def __init__(self, policy: LaMASPolicy, config: MARFTConfig, temperature: Temperature, **options: Any):
        """``options``: :class:`~marft_agents.algorithms.base.Learner`'s ``tis_cap`` and ``frozen``."""
        super().__init__(policy, config, temperature, **options)
        head, self.head_of = model_heads(policy)  # one shared head; a team of models: one per model, at its width
        self.critic = Critic(head, policy.device, **config.critic_options())
        self.optimizers = adapter_optimizers(policy, config.lr, self.trainable)
        self.warned_team_reward = False

    @classmethod
    def check_env(cls, config: MARFTConfig, env: Any, *, workers: int = 0) -> None:
        """Refuse an env whose agents are not one team: chain GAE would back one player's reward into another's."""
        require_cooperative("marft", env, "chain GAE backs each agent's reward up to the agents before it")

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One MARFT update from whole episodes; returns metrics."""
        cfg = self.config
        steps, idx_of = by_adapter(self.policy, episodes)
        feats = features(self.policy, steps, cfg.minibatch_size)  # (N, d) frozen base features: once per update
        inputs = (feats,) if self.head_of is None else (feats, head_rows(self.head_of, steps, feats.device))
        values_old = self.critic.observe_and_value(*inputs, ranks=self.ranks)  # (N,); every rank's rows observed
        chain = dict(gamma=cfg.gamma, gamma_agent=cfg.gamma_agent, lam=cfg.gae_lambda, shared_reward=cfg.shared_reward)
        advantages, returns = compute_advantages(steps, values_old, **chain)
        self.warned_team_reward = self.warned_team_reward or warn_undeclared_team_reward("marft", steps)
        returns_of = agent_returns(self.policy, episodes, "chain")  # what the chain credits each agent with
        advantages, metrics, informative = prepare_advantages(  # per agent; an agent's equal returns: no step for it
            self.policy, returns_of, steps, idx_of, advantages, **cfg.advantage_options(), ranks=self.ranks
        )
        learning = [a for a in self.learning_adapters(update) if informative[a]]
        keys, held = [(s.episode, s.round) for s in steps], dp.held(self.ranks, idx_of)  # held: any rank's steps
        sampling = dict(settings=cfg, temperature=self.temperature, tis_cap=self.tis_cap, ranks=self.ranks)
        for turn in turns(learning, idx_of, keys, cfg.sequential, rng, self.policy.device, held):
            scaled = advantages if turn.weights is None else advantages * turn.weights  # (N,): M of every step
            optimizer = self.optimizers[turn.adapter]
            metrics.update(
                action_ppo.step(self.policy, optimizer, turn.adapter, steps, turn.idx, scaled, rng, **sampling)
            )
            metrics.update(turn.metrics())
            if turn.needs_ratios and turn.idx:  # data-parallel: this rank may hold none of the adapter's steps
                turn.record(self.log_ratios(turn.adapter, steps, turn.idx))
        metrics.update(self.critic.fit(inputs, values_old, returns, rng, ranks=self.ranks))
        metrics["advantage_std"] = float(advantages.std()) if len(steps) > 1 else 0.0
        return metrics

    @classmethod
    def check_data_parallel(cls, config: MARFTConfig) -> None:
        """Action-level MARFT splits across ranks: whole episodes stay on one rank (chain GAE is local)."""

    def learning_adapters(self, update: int) -> list[str]:
        """The trainable adapters that learn in this update (all, or one in turn: the round-robin skips frozen ones)."""
        return round_robin(self.trainable, update, self.config.agent_iteration_interval)

    def log_ratios(self, adapter: str, steps: list[AgentStep], idx: list[int]) -> torch.Tensor:
        """``log pi_new(a|o) - log pi_old(a|o)`` of ``adapter``'s actions ``idx`` (after its step), ``(len(idx),)``."""
        cfg = self.config
        scoring = dict(temperature=self.temperature, minibatch_size=cfg.minibatch_size, reduction=cfg.logp_reduction)
        return action_ppo.log_ratios(self.policy, adapter, steps, idx, **scoring)
