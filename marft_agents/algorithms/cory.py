"""CORY ("Coevolving with the Other You", Ma et al. 2024); ``docs/algorithms/cory.md``.

Two copies of one LLM — two adapters on one base, agents ``solver_0`` and ``solver_1`` of
``marft/MathCORY-v0`` — play a pioneer (answers the query) and an observer (answers the query with
the pioneer's response as a reference). Both receive the cooperative reward
``R = r(q, a_pioneer) + r(q, a_observer)``. Each agent ``i`` then runs its own token-level PPO step
on the batch, with its own value head, on the per-token reward

    r_k^i = -beta_i * (log pi_i(w_k) - log pi_ref(w_k))  +  [k is the last token] * R

(the KL to the frozen initial model — the base with adapters disabled, or after ``init_from`` the
agent's starting adapter — on the agent's own prompt, the k1 estimate on the sampled token, as in
TRL's PPO that the original used), GAE over the response's tokens (``gamma``, ``lambda``) and
PPO-clip per token.

1. Roles live in the env's graph, not in the learner: every ``swap_interval`` updates
   ``before_collect`` makes the other agent the pioneer (``MathCORY.set_pioneer``). Each agent keeps
   its adapter, value head, optimizers and KL coefficient across a swap — an in-memory rebinding of
   roles. ``reset_on_swap`` reproduces the original's silent reset of optimizer state and the KL
   controller at every swap.
2. ``beta_i`` is fixed, or adapted per agent towards ``kl_target`` with TRL's proportional
   controller (:func:`adaptive_kl_coef`).
3. Each policy is evaluated alone on query-only prompts: the learner's ``eval_env_kwargs`` turn the
   reference off (the empty graph), so both agents answer the bare problem; each one's accuracy is
   its ``own_accuracy``, and the headline accuracy is ``solver_0``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from marft_agents.algorithms import token_ppo
from marft_agents.algorithms.advantages import at_last_token, normalize, returns_differ, spread, token_advantages
from marft_agents.algorithms.base import Learner, by_adapter
from marft_agents.algorithms.critic import ValueHead, fit_critic, token_features
from marft_agents.algorithms.optimizers import adapter_optimizers
from marft_agents.algorithms.ppo_settings import PPOSettings, check_old_logps
from marft_agents.algorithms.prepare import agent_health
from marft_agents.algorithms.returns import agent_returns, require_cooperative
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature, row_temperatures
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.settings.fields import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, UNIT, ranged


@dataclass
class CORYConfig(PPOSettings):
    """Hyper-parameters of CORY: the shared PPO ones (with CORY's defaults below) plus its KL controller and role swaps.

    ``kl_coef`` is the KL penalty's weight in the per-token *reward* (not a loss term); ``gamma`` discounts between
    the tokens of a response; ``normalize_scope`` and ``logp_reduction`` do not apply (each agent's advantages are
    standardised on their own; the ratio is per token)."""

    gamma: float = ranged(1.0, UNIT)
    """Discount between tokens of a response (TRL's default)."""
    entropy_coef: float = ranged(0.0, NON_NEGATIVE)
    """Weight of the mean per-token entropy bonus (the original had none)."""
    kl_coef: float = ranged(0.05, NON_NEGATIVE)
    """Initial weight beta of the per-token KL-to-reference penalty in the reward (original: 0.3 IMDB, 0.01 GSM8K)."""
    kl_target: float | None = ranged(None, POSITIVE)
    """Adapt each agent's beta towards this KL per response (TRL's adaptive controller); None: fixed beta."""
    kl_horizon: int = ranged(10_000, AT_LEAST_ONE)
    """Horizon of the adaptive KL controller, in responses."""
    swap_interval: int = ranged(5, NON_NEGATIVE)
    """Swap the pioneer and observer roles every K updates (original: 5); 0 never swaps."""
    reset_on_swap: bool = False
    """Reproduce the original: reset optimizers, value-head optimizers and KL coefficients at every swap."""


def adaptive_kl_coef(coef: float, kl: float, target: float, horizon: int, n_steps: int) -> float:
    """TRL's proportional KL controller: ``coef * (1 + clip(kl / target - 1, -0.2, 0.2) * n_steps / horizon)``."""
    error = float(np.clip(kl / target - 1.0, -0.2, 0.2))
    return coef * (1.0 + error * n_steps / horizon)


def pioneer_at(agents: list[str], update: int, swap_interval: int) -> str:
    """The pioneer of update ``update``: ``agents[0]``, then the other one every ``swap_interval`` updates."""
    if swap_interval <= 0:
        return agents[0]
    return agents[(update // swap_interval) % len(agents)]


class CORY(Learner):
    """CORY: two adapters, cooperative reward, per-agent KL-penalised token PPO, role swaps."""

    skips_ignored = False  # the per-token backup needs a token on every step

    eval_env_kwargs = {"reference": False, "pioneer": "solver_1"}
    """Evaluate each policy alone on query-only prompts (the headline answer is ``solver_0``'s)."""

    def __init__(self, policy: LaMASPolicy, config: CORYConfig, temperature: Temperature, **options: Any):
        """``options``: :class:`~marft_agents.algorithms.base.Learner`'s ``tis_cap`` and ``frozen``."""
        check_old_logps(config.old_logps, "cory.")
        if len(policy.adapters) != 2:
            raise ValueError(
                f"CORY needs two agents with their own adapters, got adapters {policy.adapters}: "
                "use env=marft/MathCORY-v0 and adapter_mode 'lora' or 'copies'"
            )
        super().__init__(policy, config, temperature, **options)
        self.agents = list(policy.agents)
        self.critics = {
            a: ValueHead(policy.hidden_size).to(policy.device) for a in policy.adapters
        }  # made on the CPU, then moved
        self.kl_coefs = {a: config.kl_coef for a in policy.adapters}
        self.optimizers = adapter_optimizers(policy, config.lr, self.trainable)
        self._new_critic_optimizers()
        self.pioneer = pioneer_at(self.agents, 0, config.swap_interval)

    def _new_critic_optimizers(self) -> None:
        cfg = self.config
        self.critic_optimizers = {  # a frozen agent's value head learns nothing either
            a: torch.optim.AdamW(self.critics[a].parameters(), lr=cfg.critic_lr, weight_decay=0.0)
            for a in self.trainable
        }

    @classmethod
    def check_env(cls, config: CORYConfig, env: Any, *, workers: int = 0) -> None:
        """Refuse an env whose agents are not one team: both agents are paid the team's sum of the two rewards."""
        require_cooperative("cory", env, "both are paid the sum of the two answers' rewards", instead="algo=ippo")

    # -- role swap ------------------------------------------------------------------------------

    def before_collect(self, envs, update: int) -> None:
        """Set this update's pioneer in every env; at a swap, optionally reset as the original did."""
        cfg = self.config
        self.pioneer = pioneer_at(self.agents, update, cfg.swap_interval)
        for env in envs:
            if not hasattr(env, "set_pioneer"):
                raise TypeError(
                    f"CORY needs an env with set_pioneer(), such as marft/MathCORY-v0; got {type(env).__name__}"
                )
            env.set_pioneer(self.pioneer)
        swapping = cfg.swap_interval > 0 and update > 0 and update % cfg.swap_interval == 0
        if swapping and cfg.reset_on_swap:
            for optimizer in self.optimizers.values():  # fresh Adam moments in place: each keeps its rate and schedule
                optimizer.state.clear()
            self._new_critic_optimizers()
            self.kl_coefs = {a: cfg.kl_coef for a in self.policy.adapters}

    # -- one update -----------------------------------------------------------------------------

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """Each agent's own PPO step on the shared batch; returns metrics."""
        cfg = self.config
        steps, idx_of = by_adapter(self.policy, episodes)
        device = self.policy.device
        batch = token_ppo.pack(steps, device)  # (N, R)
        features = token_features(self.policy, steps, cfg.minibatch_size)  # (N, R, d), frozen
        kl_tok = (batch.old_logp - self.reference_logps(steps, batch.mask.shape[1])) * batch.mask  # (N, R)
        paid = torch.tensor([s.reward for s in steps], dtype=torch.float32, device=device)
        rewards = at_last_token(paid, batch.lengths, batch.mask.shape[1])  # (N, R): the cooperative reward, last token
        advantages = torch.zeros_like(batch.old_logp)  # (N, R), filled per agent
        raw = torch.zeros_like(batch.old_logp)  # (N, R): the same before normalisation, for signal/advantage_std
        metrics: dict[str, float] = {"cory/pioneer": float(self.agents.index(self.pioneer))}
        plans = {}
        for adapter, idx in idx_of.items():
            if not idx:
                continue
            rows = torch.tensor(idx, device=device)
            kl = float(kl_tok[rows].sum(1).mean())  # KL per response, as TRL logs it
            own = [steps[i].info.get("reward_components", {}).get("own_correct", 0.0) for i in idx]
            metrics.update({f"{adapter}/kl_ref": kl, f"{adapter}/kl_coef": self.kl_coefs[adapter]})
            metrics[f"{adapter}/task_reward"] = float(np.mean(own))  # its own answer's reward
            if adapter in self.frozen:  # it acts, but its adapter, value head and KL coefficient stay as they are
                continue
            token_rewards = rewards[rows] - self.kl_coefs[adapter] * kl_tok[rows]  # (n, R)
            plans[adapter] = self.agent_advantages(adapter, features[rows], token_rewards, batch.mask[rows])
            adv = plans[adapter][2]
            advantages[rows] = normalize(adv, batch.mask[rows]) if cfg.normalize_advantages else adv
            raw[rows] = adv
            if cfg.kl_target is not None:
                self.kl_coefs[adapter] = adaptive_kl_coef(
                    self.kl_coefs[adapter], kl, cfg.kl_target, cfg.kl_horizon, len(idx)
                )
        learning = {a: i for a, i in idx_of.items() if a not in self.frozen}  # a frozen agent's steps: no advantages
        rows = torch.tensor([i for idx in learning.values() for i in idx], dtype=torch.long, device=raw.device)
        metrics["signal/advantage_std"] = spread(raw[rows], batch.mask[rows])
        metrics.update(agent_health(steps, learning, raw, batch.mask))
        informative = self.informative(episodes, metrics)  # an agent whose task returns are all equal: no step
        ppo = dict(clip_eps=cfg.clip_eps, entropy_coef=cfg.entropy_coef, kl_coef=0.0, kl_gate=cfg.kl_gate)
        ppo.update(max_grad_norm=cfg.max_grad_norm, minibatch_size=cfg.minibatch_size, epochs=cfg.ppo_epochs)
        ppo.update(accumulation=cfg.grad_accumulation, micro_batch_tokens=cfg.micro_batch_tokens)
        sampled = dict(temperature=self.temperature, tis_cap=self.tis_cap)
        fit = dict(epochs=cfg.critic_epochs, minibatch_size=cfg.minibatch_size, value_clip=cfg.value_clip)
        for adapter, (values_old, ret, _) in plans.items():  # simultaneous, independent steps
            idx = idx_of[adapter]
            if informative[adapter]:  # kl_coef 0: the KL penalty is in the reward
                args = (self.policy, self.optimizers[adapter], adapter, steps, idx, batch.old_logp, advantages, rng)
                metrics.update(token_ppo.step(*args, **ppo, **sampled))
            inputs, mask = (features[torch.tensor(idx, device=device)],), batch.mask[torch.tensor(idx, device=device)]
            critic, optimizer = self.critics[adapter], self.critic_optimizers[adapter]
            metrics.update(
                fit_critic(critic, optimizer, inputs, values_old, ret, rng, **fit, max_grad_norm=cfg.max_grad_norm,
                           mask=mask, prefix=f"{adapter}/critic")
            )  # fmt: skip
        return metrics

    def agent_advantages(
        self, adapter: str, features: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(values_old, returns, advantages)`` ``(n, R)`` of one agent's responses: its value head (its input
        statistics fed first), token GAE with each response its own episode, on the KL-penalised ``rewards``."""
        cfg, device = self.config, mask.device
        self.critics[adapter].observe(features, mask)  # the input statistics first: the old values use them
        with torch.no_grad():
            values_old = self.critics[adapter](features) * mask  # (n, R)
        every = torch.ones(mask.shape[0], dtype=torch.bool, device=device)
        adv, ret = token_advantages(  # each response is its own episode
            rewards, values_old, mask, torch.arange(mask.shape[0], device=device), every, every,
            gamma=cfg.gamma, gamma_agent=cfg.gamma, gamma_token=cfg.gamma, lam=cfg.gae_lambda,
        )  # fmt: skip
        return values_old, ret, adv

    def informative(self, episodes: list[Episode], metrics: dict[str, float]) -> dict[str, bool]:
        """Per adapter, whether its task returns differ (``skip_equal_returns``: no policy step otherwise); the
        metrics gain ``<adapter>/skipped_equal_returns`` and ``policy/skipped_equal_returns``."""
        out = {}
        for adapter, returns in agent_returns(self.policy, episodes, "own").items():
            own = torch.tensor(returns, dtype=torch.float64, device=self.policy.device)
            out[adapter] = returns_differ(own) or not self.config.skip_equal_returns
            metrics[f"{adapter}/skipped_equal_returns"] = float(not out[adapter])
        metrics["policy/skipped_equal_returns"] = float(np.mean([not v for v in out.values()]))
        return out

    @torch.no_grad()
    def reference_logps(self, steps: list[AgentStep], width: int) -> torch.Tensor:
        """Per-token log-probs of the responses under each agent's frozen initial policy, ``(N, width)``.

        That is the base with adapters disabled, shared by both agents, or after ``init_from`` each
        agent's starting adapter (``policy.kl_reference``); chunks never mix two references.
        """
        out = torch.zeros(len(steps), width, device=self.policy.device)
        size = self.config.minibatch_size
        order = sorted(range(len(steps)), key=lambda i: steps[i].agent)  # chunks share a role prompt
        by_reference: dict[str | None, list[int]] = {}
        for i in order:
            by_reference.setdefault(self.policy.kl_reference(self.policy.adapter_of[steps[i].agent]), []).append(i)
        for reference, rows in by_reference.items():
            for start in range(0, len(rows), size):
                chunk = rows[start : start + size]
                prompts, responses = [steps[i].prompt for i in chunk], [steps[i].response for i in chunk]
                t = row_temperatures(
                    [steps[i].agent for i in chunk], self.temperature, self.policy.device
                )  # each step at its agent's temperature
                logp, _, mask = self.policy.score(prompts, responses, reference, t)  # (B, R)
                out[chunk, : mask.shape[1]] = logp * mask
        return out

    # -- checkpoint state -----------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {
            **super().state_dict(),
            "critics": {a: c.state_dict() for a, c in self.critics.items()},
            "critic_optimizers": {a: o.state_dict() for a, o in self.critic_optimizers.items()},
            "kl_coefs": dict(self.kl_coefs),
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        for a in self.policy.adapters:
            self.critics[a].load_state_dict(state["critics"][a])
        for a, optimizer in self.critic_optimizers.items():
            optimizer.load_state_dict(state["critic_optimizers"][a])
        self.kl_coefs = dict(state["kl_coefs"])
