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
3. Per agent, PPO-clip per token (``token_ppo.step``, shared with CORY): ``rho_k = exp(log pi(w_k) - log pi_old(w_k))``
   times the token's advantage, mask-weighted means over the response tokens of a minibatch of agent-steps;
   the entropy bonus, optional KL-to-reference penalty and approx-KL gate of action level.
4. The critic fits the per-token returns with a masked clipped value loss.
5. Agent-by-agent training and the sequential trust-region update work as at action level; the
   sequential weight ``M`` of a round multiplies every token advantage of the later agents' responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from marft_agents.algorithms import action_ppo, token_ppo
from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms.advantages import at_last_token, token_advantages
from marft_agents.algorithms.base import Learner, by_adapter
from marft_agents.algorithms.critic import Critic, head_rows, model_heads, token_features
from marft_agents.algorithms.optimizers import adapter_optimizers
from marft_agents.algorithms.ppo_settings import ChainSettings, check_old_logps
from marft_agents.algorithms.prepare import prepare_advantages
from marft_agents.algorithms.returns import agent_returns, require_cooperative, warn_undeclared_team_reward
from marft_agents.algorithms.sequential import round_robin, turns
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.settings.fields import UNIT, ranged


@dataclass
class MARFTTokenConfig(ChainSettings):
    """Hyper-parameters of token-level MARFT (those of action level, plus the per-token discount).

    ``minibatch_size`` counts agent-steps (each with all its tokens); ``logp_reduction`` only shapes
    an action's log-prob in the sequential weight ``M``; the PPO ratio is per token.
    """

    gamma_token: float = ranged(1.0, UNIT)
    """Discount between tokens of one response (1.0: a response's length is not penalised)."""


def compute_advantages(
    steps: list[AgentStep],
    batch: token_ppo.TokenBatch,
    values: torch.Tensor,
    *,
    shared_reward: str = "once",
    **discounts: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token GAE over every episode's tokens in acting order, ``(advantages, returns)`` ``(N, R)``.

    A step's reward sits on its last token, a round's shared reward once (on its last agent: ``chain_reward``;
    ``shared_reward="per_agent"`` puts every copy in, for ablations). ``discounts``: ``gamma``, ``gamma_agent``,
    ``gamma_token`` and ``lam`` of :func:`~marft_agents.algorithms.advantages.token_advantages`.
    """
    device = values.device
    paid = [s.chain_reward if shared_reward == "once" else s.reward for s in steps]
    rewards = at_last_token(torch.tensor(paid, dtype=torch.float32, device=device), batch.lengths, batch.mask.shape[1])
    episode_ids = {e: k for k, e in enumerate(dict.fromkeys(s.episode for s in steps))}
    episodes = torch.tensor([episode_ids[s.episode] for s in steps], dtype=torch.long, device=device)
    round_ends = torch.tensor([s.round_end for s in steps], device=device)
    dones = torch.tensor([s.done for s in steps], device=device)
    return token_advantages(rewards, values, batch.mask, episodes, round_ends, dones, **discounts)  # (N, R) each


class MARFTToken(Learner):
    """Token-level MARFT: per-token critic, GAE over all agents' tokens, PPO-clip per token."""

    skips_ignored = False  # the per-token backup needs a token on every step

    config: MARFTTokenConfig
    critic: Critic

    @classmethod
    def check_env(cls, config: MARFTTokenConfig, env: Any, *, workers: int = 0) -> None:
        """Refuse an env whose agents are not one team: the chain would back one player's reward into another's."""
        require_cooperative("marft_token", env, "its token GAE backs each agent's reward up to the agents before it")

    def __init__(self, policy: LaMASPolicy, config: MARFTTokenConfig, temperature: Temperature, **options: Any):
        """``options``: :class:`~marft_agents.algorithms.base.Learner`'s ``tis_cap`` and ``frozen``."""
        check_old_logps(config.old_logps, "marft_token.")
        super().__init__(policy, config, temperature, **options)
        head, self.head_of = model_heads(policy)  # at every response position; a team of models: one head per model
        self.critic = Critic(head, policy.device, **config.critic_options())
        self.optimizers = adapter_optimizers(policy, config.lr, self.trainable)
        self.warned_team_reward = False

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One token-level MARFT update from whole episodes; returns metrics."""
        cfg = self.config
        steps, idx_of = by_adapter(self.policy, episodes)
        batch = token_ppo.pack(steps, self.policy.device)  # (N, R) behaviour log-probs and mask
        feats = token_features(self.policy, steps, cfg.minibatch_size)  # (N, R, d), frozen: once per update
        if self.head_of is None:
            inputs, observed = (feats,), (feats[batch.mask],)
        else:  # each step's head, on every one of its tokens
            heads = head_rows(self.head_of, steps, feats.device)  # (N,)
            inputs, observed = (feats, heads), (feats[batch.mask], heads.unsqueeze(1).expand_as(batch.mask)[batch.mask])
        self.critic.observe(*observed, ranks=self.ranks)  # statistics first (every rank's real tokens)
        values_old = self.critic.values(*inputs) * batch.mask  # (N, R)
        chain = dict(gamma=cfg.gamma, gamma_agent=cfg.gamma_agent, gamma_token=cfg.gamma_token, lam=cfg.gae_lambda)
        advantages, returns = compute_advantages(steps, batch, values_old, shared_reward=cfg.shared_reward, **chain)
        self.warned_team_reward = self.warned_team_reward or warn_undeclared_team_reward("marft_token", steps)
        advantages, metrics, informative = prepare_advantages(  # per agent; an agent's equal returns: no step for it
            self.policy, agent_returns(self.policy, episodes, "chain"), steps, idx_of, advantages, batch.mask,
            **cfg.advantage_options(), ranks=self.ranks,
        )  # fmt: skip
        learning = [a for a in self.learning_adapters(update) if informative[a]]
        ppo = dict(clip_eps=cfg.clip_eps, entropy_coef=cfg.entropy_coef, kl_coef=cfg.kl_coef, kl_gate=cfg.kl_gate)
        ppo.update(max_grad_norm=cfg.max_grad_norm, minibatch_size=cfg.minibatch_size, epochs=cfg.ppo_epochs)
        ppo.update(accumulation=cfg.grad_accumulation, micro_batch_tokens=cfg.micro_batch_tokens)
        sampled = dict(temperature=self.temperature, tis_cap=self.tis_cap, ranks=self.ranks)
        scoring = dict(temperature=self.temperature, minibatch_size=cfg.minibatch_size, reduction=cfg.logp_reduction)
        keys, held = [(s.episode, s.round) for s in steps], dp.held(self.ranks, idx_of)  # held: any rank's steps
        for turn in turns(learning, idx_of, keys, cfg.sequential, rng, self.policy.device, held):
            weight = 1.0 if turn.weights is None else turn.weights.view(-1, 1)  # M of a step on all its tokens
            optimizer, old = self.optimizers[turn.adapter], batch.old_logp
            args = (self.policy, optimizer, turn.adapter, steps, turn.idx, old, advantages * weight, rng)
            metrics.update({**token_ppo.step(*args, **ppo, **sampled), **turn.metrics()})
            if turn.needs_ratios and turn.idx:  # ratios for M, not the last's; a rank may hold none of its steps
                turn.record(action_ppo.log_ratios(self.policy, turn.adapter, steps, turn.idx, **scoring))
        metrics.update(self.critic.fit(inputs, values_old, returns, rng, mask=batch.mask, ranks=self.ranks))
        metrics["advantage_std"] = float(advantages[batch.mask].std()) if batch.mask.sum() > 1 else 0.0
        return metrics

    @classmethod
    def check_data_parallel(cls, config: MARFTTokenConfig) -> None:
        """Token-level MARFT splits across ranks: whole episodes stay on one rank (token GAE is local)."""

    def learning_adapters(self, update: int) -> list[str]:
        """The trainable adapters that learn in this update (all, or one in turn: the round-robin skips frozen ones)."""
        return round_robin(self.trainable, update, self.config.agent_iteration_interval)
