"""The learner protocol and the pieces every training algorithm shares.

An algorithm is a :class:`Learner` subclass plus a config dataclass, registered by name in
``marft_agents/algorithms/__init__.py``. The trainer drives any learner the same way:

1. ``check_env`` before any work; ``before_collect(envs, update)``; then its ``collector`` plays
   ``episodes_per_update`` episodes (groups of ``group_size`` share a problem; ``needs_state``: record
   the env's global state with every agent-step) and ``update(episodes, update, rng)`` learns from them;
2. ``state_dict()`` / ``load_state_dict()`` round-trip everything ``--resume`` needs; evaluation uses
   the run's env options updated with ``eval_env_kwargs``.

Algorithms are siblings: each module imports this one, the pure maths (``advantages``, ``losses``,
``critic``, ``sequential``), the policy, the rollout types and the tree rollout, never another algorithm
module. Shared below: per-adapter optimizers and checkpoint state, the policy-gradient minibatch loop
(:func:`train_adapter`) and its two objectives, frozen-feature and token-packing helpers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from marft_agents.losses import approx_kl, ensure_finite, masked_mean, ppo_clip_loss
from marft_agents.policy import LaMASPolicy
from marft_agents.rollout import AgentStep, Episode
from marft_agents.sequential import (
    SequentialConfig,
    agent_order,
    round_index,
    sequential_update,
)
from marft_agents.tis import action_weights, token_weights, weight_stats


class Learner(ABC):
    """One training algorithm as the trainer drives it: collection hooks, one update, checkpoint state."""

    group_size: int = 1
    """Consecutive episodes that share one problem (group-relative methods play each problem G times)."""
    needs_state: ClassVar[bool] = False
    """Whether the rollout engine must record the env's global state (``state_text()``) with every step."""
    eval_env_kwargs: ClassVar[dict[str, Any]] = {}
    """Env options that evaluation applies on top of the run's (e.g. CORY: each policy alone)."""
    tis_cap: float | None = None
    """Truncated importance-sampling cap ``C`` (``generation.tis_cap``, set by ``build_learner``); the
    learner hands it to the shared objectives, which weight each term (``marft_agents/tis.py``). None: off."""

    def __init__(self, policy: LaMASPolicy, config: Any, temperature: float):
        self.policy = policy
        self.config = config
        self.temperature = temperature

    @classmethod
    def check_env(cls, config: Any, env: Any, *, workers: int = 0) -> None:
        """Refuse, before any work, an env (or ``workers`` > 0) this learner cannot train with (default: any)."""

    def collector(self, rollout: Any) -> Any:
        """What plays the episodes, given the rollout engine (default: the engine; GRPO's tree: a tree rollout)."""
        return rollout

    def before_collect(self, envs: list, update: int) -> None:
        """Called before each collection with the training envs (default: nothing)."""

    @abstractmethod
    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """Learn from one batch of whole episodes; return metrics."""

    def state_dict(self) -> dict:
        """Adapters and their optimizers; learners with more state extend it."""
        return {
            "adapters": {a: self.policy.adapter_state(a) for a in self.policy.adapters},
            "optimizers": {a: o.state_dict() for a, o in self.optimizers.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        for a in self.policy.adapters:
            self.policy.load_adapter_state(a, state["adapters"][a])
            self.optimizers[a].load_state_dict(state["optimizers"][a])


class CriticLearner(Learner):
    """A learner with one value model, ``self.critic``, and its ``self.critic_optimizer``, both checkpointed."""

    critic: torch.nn.Module
    critic_optimizer: torch.optim.Optimizer

    def state_dict(self) -> dict:
        return {**super().state_dict(), "critic": self.critic.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.critic.load_state_dict(state["critic"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])


@dataclass
class PPOSettings:
    """Hyper-parameters every PPO-style learner here shares (MARFT, token MARFT, PPO, IPPO, MAPPO)."""

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
class ChainSettings(PPOSettings):
    """The PPO settings plus MARFT's multi-agent ones (action- and token-level MARFT)."""

    gamma_agent: float = 0.99
    """Discount between agents of one round (the original used gamma; 1.0 is the principled choice)."""
    agent_iteration_interval: int = 0
    """K > 0: only one agent learns at a time, switching every K updates (round-robin)."""
    sequential: SequentialConfig = field(default_factory=SequentialConfig)
    """The sequential trust-region update (HAPPO-style); off by default."""


# -- batching and optimizers ------------------------------------------------------------------------


def flatten(episodes: list[Episode]) -> list[AgentStep]:
    """Every agent-step of every episode, in acting order."""
    return [s for e in episodes for s in e.steps]


def steps_of(policy: LaMASPolicy, steps: list[AgentStep], adapter: str) -> list[int]:
    """Indices of the steps played by ``adapter`` (several agents in ``"shared"`` mode)."""
    return [i for i, s in enumerate(steps) if policy.adapter_of[s.agent] == adapter]


def adapter_optimizers(policy: LaMASPolicy, lr: float) -> dict[str, torch.optim.Optimizer]:
    """One AdamW (no weight decay) per adapter."""
    return {a: torch.optim.AdamW(policy.parameters(a), lr=lr, weight_decay=0.0) for a in policy.adapters}


def round_robin(adapters: Sequence[str], update: int, interval: int) -> list[str]:
    """The adapters that learn in ``update``: all (``interval <= 0``) or one in turn every ``interval`` updates."""
    if interval <= 0:
        return list(adapters)
    return [adapters[(update // interval) % len(adapters)]]


def check_reduction(reduction: str) -> None:
    """``logp_reduction`` must be "sum" or "mean"."""
    if reduction not in ("sum", "mean"):
        raise ValueError(f"logp_reduction must be 'sum' or 'mean', got {reduction!r}")


# -- the one policy-gradient minibatch loop -----------------------------------------------------------

Objective = Callable[[np.ndarray, list[AgentStep], torch.Tensor, torch.Tensor, "torch.Tensor | None"],
                     tuple[torch.Tensor, dict[str, float]]]
"""``(rows, steps, logp_tok, mask, ref_tok) -> (loss, stats)`` for one minibatch."""


def train_adapter(
    policy: LaMASPolicy,
    adapter: str,
    optimizer: torch.optim.Optimizer,
    steps: list[AgentStep],
    idx: list[int],
    rng: np.random.Generator,
    objective: Objective,
    *,
    temperature: float,
    entropy_coef: float,
    kl_coef: float,
    kl_gate: float | None,
    epochs: int,
    minibatch_size: int,
    max_grad_norm: float,
    reference: bool = False,
) -> dict[str, float]:
    """Epochs over shuffled minibatches of the steps ``idx`` for ``adapter``; returns mean stats.

    Per minibatch the policy scores the responses (per-token log-probs ``(B, R)`` under the sampling
    temperature, entropies, mask); ``objective`` turns them into a loss and stats (``rows``: the
    minibatch's step indices; ``ref_tok``: reference log-probs, computed when ``kl_coef > 0`` or
    ``reference``). The loop subtracts the entropy bonus, adds ``kl_coef`` times the per-token KL to
    the reference (the base, adapters off), and skips the step when ``stats["approx_kl"]`` exceeds
    ``kl_gate``.
    """
    params = policy.parameters(adapter)
    sums: dict[str, list[float]] = {"loss": [], "entropy": []}
    skipped = 0
    for _ in range(epochs):
        order = rng.permutation(idx)
        for start in range(0, len(order), minibatch_size):
            rows = order[start: start + minibatch_size]
            mb = [steps[i] for i in rows]
            prompts, responses = [s.prompt for s in mb], [s.response for s in mb]
            logp_tok, entropy_tok, mask = policy.score(prompts, responses, adapter, temperature)  # (B, R)
            ref_tok = None
            if kl_coef > 0 or reference:
                with torch.no_grad():
                    ref_tok, _, _ = policy.score(prompts, responses, None, temperature)  # (B, R)
            loss, stats = objective(rows, mb, logp_tok, mask, ref_tok)
            entropy = masked_mean(entropy_tok, mask)
            loss = loss - entropy_coef * entropy
            if kl_coef > 0:
                kl = masked_mean(approx_kl(logp_tok, ref_tok), mask)
                loss = loss + kl_coef * kl
                sums.setdefault("kl_ref", []).append(kl.item())  # logged for gated minibatches too
            if kl_gate is not None and stats["approx_kl"] > kl_gate:
                skipped += 1
                continue
            ensure_finite(loss, f"{adapter}/loss")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            ensure_finite(torch.nn.utils.clip_grad_norm_(params, max_grad_norm), f"{adapter}/grad_norm")
            optimizer.step()
            sums["loss"].append(loss.item())
            sums["entropy"].append(entropy.item())
            for k, v in stats.items():
                sums.setdefault(k, []).append(v)
    # a maximum stays a maximum over minibatches (tis_weight_max); everything else is averaged
    out = {f"{adapter}/{k}": float(np.max(v) if k.endswith("_max") else np.mean(v)) for k, v in sums.items() if v}
    out[f"{adapter}/skipped_minibatches"] = float(skipped)
    return out


def reduce_logp(token_logps: torch.Tensor, n: int, reduction: str) -> torch.Tensor:
    """An action's log-prob from its ``n`` token log-probs: their sum, or their mean."""
    total = token_logps.sum()
    return total / max(n, 1) if reduction == "mean" else total


def reduce_batch(logp_tok: torch.Tensor, mask: torch.Tensor, reduction: str) -> torch.Tensor:
    """Per-row action log-probs ``(B,)`` from per-token ones ``(B, R)`` and their mask."""
    total = (logp_tok * mask).sum(-1)  # (B,)
    if reduction == "mean":
        return total / mask.sum(-1).clamp(min=1)
    return total


def action_objective(advantages: torch.Tensor, clip_eps: float, reduction: str,
                     tis_cap: float | None = None) -> Objective:
    """PPO-clip on whole actions: one ratio per response; ``advantages`` ``(N,)``, or ``(N, 1)``-broadcastable.

    ``tis_cap``: each action's term is weighted by its truncated importance weight (``tis.action_weights``).
    """

    def objective(rows, mb, logp_tok, mask, ref_tok):
        old = torch.stack([reduce_logp(s.token_logps, len(s.response), reduction) for s in mb])  # (B,)
        weights = action_weights(mb, reduction, tis_cap)  # (B,) or None
        loss, stats = ppo_clip_loss(reduce_batch(logp_tok, mask, reduction), old, advantages[rows], clip_eps,
                                    weights=weights)
        out = {"clip_frac": stats["clip_frac"], "approx_kl": stats["approx_kl"]}
        return loss, out if weights is None else {**out, **weight_stats(weights)}

    return objective


def token_objective(old_logp: torch.Tensor, advantages: torch.Tensor, clip_eps: float,
                    tis_cap: float | None = None) -> Objective:
    """PPO-clip per token: ``old_logp`` and ``advantages`` are ``(N, R)``, mask-weighted over a minibatch.

    ``tis_cap``: each token's term is weighted by its truncated importance weight (``tis.token_weights``).
    """

    def objective(rows, mb, logp_tok, mask, ref_tok):
        width = mask.shape[1]
        rows = torch.as_tensor(rows)
        weights = token_weights(mb, width, tis_cap)  # (B, R) or None
        loss, stats = ppo_clip_loss(logp_tok, old_logp[rows, :width], advantages[rows, :width], clip_eps, mask,
                                    weights=weights)
        out = {"clip_frac": stats["clip_frac"], "approx_kl": stats["approx_kl"]}
        return loss, out if weights is None else {**out, **weight_stats(weights, mask)}

    return objective


@torch.no_grad()
def action_log_ratios(
    policy: LaMASPolicy, adapter: str, steps: list[AgentStep], *, temperature: float, minibatch_size: int,
    reduction: str,
) -> torch.Tensor:
    """``log pi_new(a|o) - log pi_old(a|o)`` of each step's action under ``adapter``, ``(n,)``."""
    out = []
    for start in range(0, len(steps), minibatch_size):
        mb = steps[start: start + minibatch_size]
        logp_tok, _, mask = policy.score([s.prompt for s in mb], [s.response for s in mb], adapter, temperature)
        old = torch.stack([reduce_logp(s.token_logps, len(s.response), reduction) for s in mb])  # (B,)
        out.append(reduce_batch(logp_tok, mask, reduction) - old)
    return torch.cat(out) if out else torch.zeros(0)


# -- frozen features and per-token tensors ----------------------------------------------------------


def features(policy: LaMASPolicy, steps: list[AgentStep], minibatch_size: int) -> torch.Tensor:
    """Frozen base features of every step's prompt, ``(N, d)``, computed in minibatches."""
    # Chunks of one agent's steps share its role prompt, which the policy then runs only once.
    order = sorted(range(len(steps)), key=lambda i: steps[i].agent)
    out = torch.empty(len(steps), policy.hidden_size)
    for start in range(0, len(order), minibatch_size):
        chunk = order[start: start + minibatch_size]
        out[chunk] = policy.features([steps[i].prompt for i in chunk])
    return out


def token_features(policy: LaMASPolicy, steps: list[AgentStep], minibatch_size: int) -> torch.Tensor:
    """Frozen base features before every response token, padded to ``(N, R, d)`` (zeros on padding)."""
    width = max((len(s.response) for s in steps), default=0)
    out = torch.zeros(len(steps), width, policy.hidden_size)
    order = sorted(range(len(steps)), key=lambda i: steps[i].agent)  # chunks share a role prompt
    for start in range(0, len(order), minibatch_size):
        chunk = order[start: start + minibatch_size]
        feats = policy.token_features([steps[i].prompt for i in chunk], [steps[i].response for i in chunk])
        out[chunk, : feats.shape[1]] = feats
    return out


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


def sequential_policy_steps(
    policy: LaMASPolicy,
    adapters: Sequence[str],
    steps: list[AgentStep],
    advantages: torch.Tensor,
    rng: np.random.Generator,
    train: Callable[[str, list[int], torch.Tensor], dict[str, float]],
    *,
    settings: SequentialConfig,
    temperature: float,
    minibatch_size: int,
    reduction: str,
) -> dict[str, float]:
    """The sequential trust-region update (``marft_agents/sequential.py``) over ``adapters``.

    ``train(adapter, idx, weighted_advantages)`` is the learner's own policy step; ``advantages`` is
    ``(N,)`` (one per action) or ``(N, R)`` (one per token), and each adapter trains on it times its
    predecessors' clipped product ratio ``M``, broadcast over tokens.
    """
    idx_of = {a: steps_of(policy, steps, a) for a in adapters}
    sample_ids, _ = round_index([(s.episode, s.round) for s in steps])  # (N,) one id per round

    def weighted(adapter: str, weights: torch.Tensor) -> dict[str, float]:
        weights = weights.view(-1, *([1] * (advantages.dim() - 1)))  # broadcast over tokens
        return train(adapter, idx_of[adapter], advantages * weights)

    return sequential_update(
        agent_order(adapters, settings.order, rng), sample_ids,
        steps_of=lambda a: torch.tensor(idx_of[a], dtype=torch.long),
        train=weighted,
        log_ratios=lambda a: action_log_ratios(policy, a, [steps[i] for i in idx_of[a]], temperature=temperature,
                                               minibatch_size=minibatch_size, reduction=reduction),
        clip=settings.weight_clip,
    )
