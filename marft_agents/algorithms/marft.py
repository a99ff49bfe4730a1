"""MARFT at action level (the original code's "APPO"), as in ``ALGORITHMS.md``.

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
   advantages weighted by its predecessors' clipped product ratio (``sequential.py``, HAPPO-style).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from marft_agents.advantages import chain_gae, normalize
from marft_agents.algorithms.sequential import SequentialConfig, agent_order, round_index, sequential_update
from marft_agents.critic import ValueHead, fit_critic
from marft_agents.losses import approx_kl, masked_mean, ppo_clip_loss
from marft_agents.policy import LaMASPolicy
from marft_agents.rollout import AgentStep, Episode


@dataclass
class PPOSettings:
    """Hyper-parameters every PPO-style learner here shares (MARFT, single-agent PPO, IPPO, MAPPO)."""

    lr: float = 3e-4
    """Adam learning rate of each agent's adapter."""
    critic_lr: float = 1e-3
    """Adam learning rate of the value head(s)."""
    gamma: float = 0.99
    """Discount between rounds."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_eps: float = 0.2
    """PPO ratio clip."""
    value_clip: float | None = 0.2
    """Value-loss clip around the old values (None: no clipping)."""
    entropy_coef: float = 0.01
    """Weight of the mean per-token entropy bonus."""
    kl_coef: float = 0.0
    """Weight of the KL(pi || reference) penalty; 0 skips the reference pass."""
    kl_gate: float | None = None
    """Skip a minibatch whose approx KL to the behaviour policy exceeds this (the original: 1e-3)."""
    ppo_epochs: int = 1
    """Passes over the batch per update."""
    minibatch_size: int = 64
    """Agent-steps per gradient step."""
    max_grad_norm: float = 0.5
    """Gradient clipping."""
    normalize_advantages: bool = True
    """Standardise advantages over the batch."""
    logp_reduction: str = "sum"
    """How token log-probs make an action's log-prob: "sum" (exact) or "mean" (per-token average)."""


@dataclass
class MARFTConfig(PPOSettings):
    """Hyper-parameters of action-level MARFT: the shared PPO ones plus the multi-agent ones."""

    gamma_agent: float = 0.99
    """Discount between agents of one round (the original used gamma; 1.0 is the principled choice)."""
    agent_iteration_interval: int = 0
    """K > 0: only one agent learns at a time, switching every K updates (round-robin)."""
    sequential: SequentialConfig = field(default_factory=SequentialConfig)
    """The sequential trust-region update (HAPPO-style); off by default."""


def flatten(episodes: list[Episode]) -> list[AgentStep]:
    """Every agent-step of every episode, in acting order."""
    return [s for e in episodes for s in e.steps]


def compute_advantages(
    steps: list[AgentStep], values: torch.Tensor, *, gamma: float, gamma_agent: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chain GAE over all steps as one stream (``done`` cuts the links between episodes)."""
    rewards = torch.tensor([s.reward for s in steps], dtype=torch.float32)
    round_ends = torch.tensor([s.round_end for s in steps])
    dones = torch.tensor([s.done for s in steps])
    return chain_gae(rewards, values, round_ends, dones, gamma=gamma, gamma_agent=gamma_agent, lam=lam)


class MARFT:
    """Action-level MARFT: shared critic, chain GAE, PPO-clip per agent."""

    def __init__(self, policy: LaMASPolicy, config: MARFTConfig, temperature: float):
        if config.logp_reduction not in ("sum", "mean"):
            raise ValueError(f"logp_reduction must be 'sum' or 'mean', got {config.logp_reduction!r}")
        self.policy = policy
        self.config = config
        self.temperature = temperature
        self.critic = ValueHead(policy.hidden_size)
        self.optimizers = {a: torch.optim.AdamW(policy.parameters(a), lr=config.lr, weight_decay=0.0)
                           for a in policy.adapters}
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.critic_lr, weight_decay=0.0)

    # -- one update ----------------------------------------------------------------------------

    def learning_adapters(self, update: int) -> list[str]:
        """The adapters that learn in this update (all, or one in turn)."""
        k = self.config.agent_iteration_interval
        if k <= 0:
            return list(self.policy.adapters)
        return [self.policy.adapters[(update // k) % len(self.policy.adapters)]]

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One MARFT update from whole episodes; returns metrics."""
        cfg = self.config
        steps = flatten(episodes)
        features = self.features(steps)  # (N, d), frozen: computed once per update
        with torch.no_grad():
            values_old = self.critic(features)  # (N,)
        advantages, returns = compute_advantages(
            steps, values_old, gamma=cfg.gamma, gamma_agent=cfg.gamma_agent, lam=cfg.gae_lambda
        )
        if cfg.normalize_advantages:
            advantages = normalize(advantages)
        metrics: dict[str, float] = {}
        if cfg.sequential.enabled:
            metrics.update(self._sequential_steps(self.learning_adapters(update), steps, advantages, rng))
        else:
            for adapter in self.learning_adapters(update):
                idx = [i for i, s in enumerate(steps) if self.policy.adapter_of[s.agent] == adapter]
                if idx:
                    metrics.update(self._policy_step(adapter, steps, idx, advantages, rng))
        metrics.update(self._critic_step(features, values_old, returns, rng))
        metrics["advantage_std"] = float(advantages.std()) if len(steps) > 1 else 0.0
        return metrics

    def _sequential_steps(self, adapters, steps, advantages, rng) -> dict[str, float]:
        """One adapter after another, each with ``M * A`` (``advantages``: ``(N,)`` or ``(N, R)``)."""
        seq = self.config.sequential
        idx_of = {a: [i for i, s in enumerate(steps) if self.policy.adapter_of[s.agent] == a] for a in adapters}
        sample_ids, _ = round_index([(s.episode, s.round) for s in steps])  # (N,) one id per round

        def train(adapter: str, weights: torch.Tensor) -> dict[str, float]:
            weights = weights.view(-1, *([1] * (advantages.dim() - 1)))  # broadcast over tokens
            return self._policy_step(adapter, steps, idx_of[adapter], advantages * weights, rng)

        return sequential_update(
            agent_order(adapters, seq.order, rng), sample_ids,
            steps_of=lambda a: torch.tensor(idx_of[a], dtype=torch.long),
            train=train,
            log_ratios=lambda a: self.action_log_ratios(a, [steps[i] for i in idx_of[a]]),
            clip=seq.weight_clip,
        )

    @torch.no_grad()
    def action_log_ratios(self, adapter: str, steps: list[AgentStep]) -> torch.Tensor:
        """``log pi_new(a|o) - log pi_old(a|o)`` of each step's action under ``adapter``, ``(n,)``."""
        out = []
        for start in range(0, len(steps), self.config.minibatch_size):
            mb = steps[start: start + self.config.minibatch_size]
            prompts, responses = [s.prompt for s in mb], [s.response for s in mb]
            logp_tok, _, mask = self.policy.score(prompts, responses, adapter, self.temperature)  # (B, R)
            old = torch.stack([self._reduce(s.token_logps, len(s.response)) for s in mb])  # (B,)
            out.append(self._reduce_batch(logp_tok, mask) - old)
        return torch.cat(out) if out else torch.zeros(0)

    def features(self, steps: list[AgentStep]) -> torch.Tensor:
        """Frozen base features of every step's prompt, ``(N, d)``, computed in minibatches."""
        size = self.config.minibatch_size
        # Chunks of one agent's steps share its role prompt, which the policy then runs only once.
        order = sorted(range(len(steps)), key=lambda i: steps[i].agent)
        out = torch.empty(len(steps), self.policy.hidden_size)
        for start in range(0, len(order), size):
            chunk = order[start: start + size]
            out[chunk] = self.policy.features([steps[i].prompt for i in chunk])
        return out

    def _policy_step(self, adapter, steps, idx, advantages, rng) -> dict[str, float]:
        cfg = self.config

        def action_terms(rows, mb, logp_tok, mask):
            old = torch.stack([self._reduce(s.token_logps, len(s.response)) for s in mb])  # (B,)
            return self._reduce_batch(logp_tok, mask), old, advantages[rows], None  # (B,) each

        return ppo_step(
            self.policy, adapter, self.optimizers[adapter], steps, idx, rng, action_terms,
            temperature=self.temperature, clip_eps=cfg.clip_eps, entropy_coef=cfg.entropy_coef, kl_coef=cfg.kl_coef,
            kl_gate=cfg.kl_gate, epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size,
            max_grad_norm=cfg.max_grad_norm,
        )

    def _reduce(self, token_logps: torch.Tensor, n: int) -> torch.Tensor:
        total = token_logps.sum()
        return total / max(n, 1) if self.config.logp_reduction == "mean" else total

    def _reduce_batch(self, logp_tok: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        total = (logp_tok * mask).sum(-1)  # (B,)
        if self.config.logp_reduction == "mean":
            return total / mask.sum(-1).clamp(min=1)
        return total

    def _critic_step(self, features, values_old, returns, rng) -> dict[str, float]:
        cfg = self.config
        return fit_critic(self.critic, self.critic_optimizer, (features,), values_old, returns, rng,
                          epochs=cfg.ppo_epochs, minibatch_size=cfg.minibatch_size, value_clip=cfg.value_clip,
                          max_grad_norm=cfg.max_grad_norm)

    # -- checkpoint state ----------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {
            "adapters": {a: self.policy.adapter_state(a) for a in self.policy.adapters},
            "optimizers": {a: o.state_dict() for a, o in self.optimizers.items()},
            "critic": self.critic.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        for a in self.policy.adapters:
            self.policy.load_adapter_state(a, state["adapters"][a])
            self.optimizers[a].load_state_dict(state["optimizers"][a])
        self.critic.load_state_dict(state["critic"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])


def ppo_step(
    policy: LaMASPolicy,
    adapter: str,
    optimizer: torch.optim.Optimizer,
    steps: list[AgentStep],
    idx: list[int],
    rng: np.random.Generator,
    loss_terms: Callable,
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
    """PPO-clip epochs over shuffled minibatches of the steps ``idx``, for ``adapter``; returns mean stats.

    ``loss_terms(rows, mb, logp_tok, mask)`` turns a minibatch (``rows``: its step indices, ``mb``: its
    steps, and the new per-token log-probs ``(B, R)`` with their mask) into ``(new, old, advantages,
    loss_mask)`` for :func:`ppo_clip_loss`: per action (``(B,)``, mask None) or per token (``(B, R)``).
    The entropy bonus, the KL-to-reference penalty and the KL gate are per token in both cases.
    """
    params = policy.parameters(adapter)
    sums: dict[str, list[float]] = {"loss": [], "entropy": [], "clip_frac": [], "approx_kl": [], "kl_ref": []}
    skipped = 0
    for _ in range(epochs):
        order = rng.permutation(idx)
        for start in range(0, len(order), minibatch_size):
            rows = order[start: start + minibatch_size]
            mb = [steps[i] for i in rows]
            prompts, responses = [s.prompt for s in mb], [s.response for s in mb]
            logp_tok, entropy_tok, mask = policy.score(prompts, responses, adapter, temperature)  # (B, R)
            new, old, adv, loss_mask = loss_terms(rows, mb, logp_tok, mask)
            loss, stats = ppo_clip_loss(new, old, adv, clip_eps, loss_mask)
            entropy = masked_mean(entropy_tok, mask)
            loss = loss - entropy_coef * entropy
            if kl_coef > 0:
                with torch.no_grad():
                    ref_tok, _, _ = policy.score(prompts, responses, None, temperature)
                kl = masked_mean(approx_kl(logp_tok, ref_tok), mask)
                loss = loss + kl_coef * kl
                sums["kl_ref"].append(kl.item())
            if kl_gate is not None and stats["approx_kl"] > kl_gate:
                skipped += 1
                continue
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()
            sums["loss"].append(loss.item())
            sums["entropy"].append(entropy.item())
            sums["clip_frac"].append(stats["clip_frac"])
            sums["approx_kl"].append(stats["approx_kl"])
    out = {f"{adapter}/{k}": float(np.mean(v)) for k, v in sums.items() if v}
    out[f"{adapter}/skipped_minibatches"] = float(skipped)
    return out
