"""MARFT at token level (the original code's "TPPO"), as in ``ALGORITHMS.md``.

Every generated token is an action. With ``V_k`` the critic's value of the state before token ``k``
(the prompt plus the response so far) and the tokens of all agents of an episode flattened in
acting order:

- inside a response:                ``delta_k = gamma_token * V_{k+1} - V_k``  (no reward)
- a response's last token:          ``delta_k = r + gamma_agent * V(next agent's first token) - V_k``
- the round's last agent's last:    ``delta_k = r + gamma * (1 - done) * V(next round's first token) - V_k``

and GAE runs backwards over that sequence with ``lambda`` (:func:`marft_agents.advantages.token_gae`).

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

from marft_agents.advantages import normalize, token_gae
from marft_agents.algorithms.marft import MARFT, MARFTConfig, flatten, ppo_step
from marft_agents.critic import fit_critic
from marft_agents.policy import LaMASPolicy
from marft_agents.rollout import AgentStep, Episode


@dataclass
class MARFTTokenConfig(MARFTConfig):
    """Hyper-parameters of token-level MARFT (those of action level, plus the per-token discount).

    ``minibatch_size`` counts agent-steps (each with all its tokens); ``logp_reduction`` only shapes
    an action's log-prob in the sequential weight ``M``; the PPO ratio is per token.
    """

    gamma_token: float = 1.0
    """Discount between tokens of one response (1.0: a response's length is not penalised)."""


@dataclass
class TokenBatch:
    """Agent-steps as padded per-token tensors, ``(N, R)`` with ``R`` the longest response."""

    old_logp: torch.Tensor
    """Behaviour log-prob of every response token (0 on padding)."""
    mask: torch.Tensor
    """True on real response tokens."""
    lengths: torch.Tensor
    """Tokens per response, ``(N,)``."""


def pack(steps: list[AgentStep]) -> TokenBatch:
    """Pad the steps' behaviour log-probs into ``(N, R)`` tensors."""
    lengths = torch.tensor([len(s.response) for s in steps], dtype=torch.long)  # (N,)
    if len(steps) and int(lengths.min()) < 1:
        raise ValueError("token-level training needs every response to have at least one token")
    old = torch.nn.utils.rnn.pad_sequence([s.token_logps.float() for s in steps], batch_first=True)  # (N, R)
    mask = torch.arange(old.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)  # (N, R)
    return TokenBatch(old_logp=old, mask=mask, lengths=lengths)


def at_last_token(x: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """An ``(N, width)`` tensor holding ``x[i]`` at column ``lengths[i] - 1`` and zero (False) elsewhere."""
    out = torch.zeros(len(x), width, dtype=x.dtype)
    out[torch.arange(len(x)), lengths - 1] = x
    return out


def episode_layout(rows: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Where each ``(step, token)`` goes when every row's steps are laid end to end.

    ``rows`` ``(N,)`` numbers each step's episode (steps of one episode are consecutive, in acting
    order); ``mask`` ``(N, R)``. Returns ``(row, col)`` of every real token (row-major order of
    ``mask.nonzero()``), the number of rows and the longest row's length.
    """
    lengths = mask.sum(1)  # (N,)
    n_rows = int(rows.max()) + 1 if len(rows) else 0
    per_row = torch.zeros(n_rows, dtype=lengths.dtype).index_add_(0, rows, lengths)  # (E,)
    row_start = torch.cumsum(per_row, 0) - per_row  # (E,) global offset of each row's first token
    step_start = torch.cumsum(lengths, 0) - lengths - row_start[rows]  # (N,) offset inside its row
    step, tok = mask.nonzero(as_tuple=True)
    return rows[step], step_start[step] + tok, n_rows, int(per_row.max()) if n_rows else 0


def token_advantages(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    rows: torch.Tensor,
    round_ends: torch.Tensor,
    dones: torch.Tensor,
    *,
    gamma: float,
    gamma_agent: float,
    gamma_token: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token GAE for agent-steps given as ``(N, R)`` tensors; returns ``(advantages, returns)``, ``(N, R)``.

    ``token_rewards`` and ``values`` are per token; ``rows`` ``(N,)`` says which sequence each step
    belongs to (its episode; or ``arange(N)`` to run each response on its own); ``round_ends`` and
    ``dones`` ``(N,)`` flag steps. Steps are scattered into ``(n_rows, T)``, scanned, gathered back.
    """
    lengths = mask.sum(1)
    R = mask.shape[1]
    r_idx, c_idx, n_rows, T = episode_layout(rows, mask)
    step, tok = mask.nonzero(as_tuple=True)

    def grid(x: torch.Tensor) -> torch.Tensor:  # (N, R) -> (n_rows, T)
        out = torch.zeros(n_rows, T, dtype=x.dtype)
        out[r_idx, c_idx] = x[step, tok]
        return out

    last = at_last_token(torch.ones(len(lengths), dtype=torch.bool), lengths, R)  # (N, R)
    adv, ret = token_gae(
        grid(token_rewards.float()), grid(values.float()),
        grid(last), grid(last & round_ends.unsqueeze(1)), grid(last & dones.unsqueeze(1)), grid(mask),
        gamma=gamma, gamma_agent=gamma_agent, gamma_token=gamma_token, lam=lam,
    )
    out_adv, out_ret = torch.zeros_like(values, dtype=torch.float32), torch.zeros_like(values, dtype=torch.float32)
    out_adv[step, tok], out_ret[step, tok] = adv[r_idx, c_idx], ret[r_idx, c_idx]
    return out_adv, out_ret


class MARFTToken(MARFT):
    """Token-level MARFT: per-token critic, GAE over all agents' tokens, PPO-clip per token."""

    # __init__, checkpoint state, agent-by-agent scheduling and the sequential loop are action level's.
    config: MARFTTokenConfig

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One token-level MARFT update from whole episodes; returns metrics."""
        cfg = self.config
        steps = flatten(episodes)
        batch = pack(steps)
        features = self.features(steps)  # (N, R, d), frozen: computed once per update
        with torch.no_grad():
            values_old = self.critic(features) * batch.mask  # (N, R)
        episode_ids = {e: k for k, e in enumerate(dict.fromkeys(s.episode for s in steps))}
        rewards = at_last_token(torch.tensor([s.reward for s in steps], dtype=torch.float32), batch.lengths,
                                batch.mask.shape[1])  # (N, R): a step's reward on its last token
        advantages, returns = token_advantages(
            rewards, values_old, batch.mask,
            torch.tensor([episode_ids[s.episode] for s in steps], dtype=torch.long),
            torch.tensor([s.round_end for s in steps]), torch.tensor([s.done for s in steps]),
            gamma=cfg.gamma, gamma_agent=cfg.gamma_agent, gamma_token=cfg.gamma_token, lam=cfg.gae_lambda,
        )
        if cfg.normalize_advantages:
            advantages = normalize(advantages, batch.mask)
        self._batch = batch  # this update's behaviour log-probs, read by _policy_step
        metrics: dict[str, float] = {}
        adapters = self.learning_adapters(update)
        if cfg.sequential.enabled:
            metrics.update(self._sequential_steps(adapters, steps, advantages, rng))
        else:
            for adapter in adapters:
                idx = [i for i, s in enumerate(steps) if self.policy.adapter_of[s.agent] == adapter]
                if idx:
                    metrics.update(self._policy_step(adapter, steps, idx, advantages, rng))
        metrics.update(fit_critic(self.critic, self.critic_optimizer, (features,), values_old, returns, rng,
                                  epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size,
                                  value_clip=cfg.value_clip, max_grad_norm=cfg.max_grad_norm, mask=batch.mask))
        metrics["advantage_std"] = float(advantages[batch.mask].std()) if batch.mask.sum() > 1 else 0.0
        return metrics

    def features(self, steps: list[AgentStep]) -> torch.Tensor:
        """Frozen base features before every response token, ``(N, R, d)`` (zeros on padding)."""
        return token_features(self.policy, steps, self.config.minibatch_size)

    def _policy_step(self, adapter, steps, idx, advantages, rng) -> dict[str, float]:
        cfg = self.config
        return token_ppo_step(
            self.policy, adapter, self.optimizers[adapter], steps, idx, self._batch.old_logp, advantages, rng,
            temperature=self.temperature, clip_eps=cfg.clip_eps, entropy_coef=cfg.entropy_coef, kl_coef=cfg.kl_coef,
            kl_gate=cfg.kl_gate, epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size,
            max_grad_norm=cfg.max_grad_norm,
        )


# -- pieces shared with CORY (token-level PPO on padded per-token tensors) ------------------------


def token_features(policy: LaMASPolicy, steps: list[AgentStep], minibatch_size: int) -> torch.Tensor:
    """``policy.token_features`` of every step in minibatches, padded to ``(N, R, d)``."""
    R = max((len(s.response) for s in steps), default=0)
    out = torch.zeros(len(steps), R, policy.hidden_size)
    # Chunks of one agent's steps share its role prompt, which the policy then runs only once.
    order = sorted(range(len(steps)), key=lambda i: steps[i].agent)
    for start in range(0, len(order), minibatch_size):
        chunk = order[start: start + minibatch_size]
        feats = policy.token_features([steps[i].prompt for i in chunk], [steps[i].response for i in chunk])
        out[chunk, : feats.shape[1]] = feats
    return out


def token_ppo_step(
    policy: LaMASPolicy,
    adapter: str,
    optimizer: torch.optim.Optimizer,
    steps: list[AgentStep],
    idx: list[int],
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    rng: np.random.Generator,
    *,
    temperature: float,
    clip_eps: float,
    entropy_coef: float,
    kl_coef: float,
    kl_gate: float | None,
    epochs: int,
    minibatch_size: int,
    max_grad_norm: float,
) -> dict[str, float]:
    """PPO-clip per token for ``adapter`` on the steps ``idx``; ``old_logp``/``advantages`` are ``(N, R)``."""

    def token_terms(rows, mb, logp_tok, mask):
        R_mb = mask.shape[1]
        rows = torch.as_tensor(rows)
        return logp_tok, old_logp[rows, :R_mb], advantages[rows, :R_mb], mask  # (B, R_mb) each

    return ppo_step(
        policy, adapter, optimizer, steps, idx, rng, token_terms, temperature=temperature, clip_eps=clip_eps,
        entropy_coef=entropy_coef, kl_coef=kl_coef, kl_gate=kl_gate, epochs=epochs,
        minibatch_size=minibatch_size, max_grad_norm=max_grad_norm,
    )

