"""IPPO and MAPPO for Dec-POMDP configurations (empty dependency graphs); ``docs/algorithms/ippo.md``, ``mappo.md``.

The two differ only in what the critic sees, so they live in one module and MAPPO is IPPO with
the critic's input changed:

- **IPPO**: every agent ``i`` has its own value head ``V_i(o_t^i)`` on frozen base features of its own
  observation.
- **MAPPO**: one centralised value head ``V(s_t)`` on frozen base features of the env's global state
  (``state_text()``, recorded by the rollout engine when the agent acted), shared by all agents.
  It estimates one value per state, so it assumes the agents share the reward (``credit="team"``).

Both then do, per agent ``i`` and independently of the other agents:

1. GAE along the agent's own rounds: ``delta_t^i = r_t^i + gamma (1 - done_t) V(x_{t+1}^i) - V(x_t^i)``,
   ``A_t^i = delta_t^i + gamma lam (1 - done_t) A_{t+1}^i`` (``x`` is ``o^i`` or ``s``). Unlike MARFT's
   chain GAE, no agent bootstraps from another agent's value in the same round.
2. PPO-clip on whole responses per agent (``action_ppo.step``: entropy bonus, optional KL to
   the reference, optional approx-KL gate), advantages standardised over the batch.
3. The critic(s) fit the GAE returns with a clipped value loss (IPPO: a frozen agent's head, like its adapter,
   never learns).

On an env with dependencies they still run (an observation then holds the parents' actions), but
they ignore the agent-to-agent links that MARFT's chain GAE uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from marft_agents.algorithms import action_ppo
from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms.advantages import chain_gae
from marft_agents.algorithms.base import Learner, by_adapter
from marft_agents.algorithms.critic import Critic, ValueHeads, features
from marft_agents.algorithms.optimizers import adapter_optimizers
from marft_agents.algorithms.ppo_settings import PPOSettings
from marft_agents.algorithms.prepare import prepare_advantages
from marft_agents.algorithms.returns import agent_returns, require_cooperative
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature
from marft_agents.rollout.episode import AgentStep, Episode

IPPOConfig = MAPPOConfig = PPOSettings
"""Hyper-parameters of IPPO and of MAPPO (the same ones; MAPPO only centralises the critic): the shared PPO ones."""


def agent_streams(episodes: list[Episode]) -> tuple[list[int], list[bool]]:
    """Each agent's own trajectory, one after another: indices into ``flatten(episodes)`` and dones.

    Order: episode by episode, inside an episode agent by agent (first appearance), each agent's
    steps in round order; ``dones[k]`` marks the last step of an agent in its episode, which cuts
    the GAE recursion between streams.
    """
    order: list[int] = []
    dones: list[bool] = []
    offset = 0
    for e in episodes:
        by_agent: dict[str, list[int]] = {}
        for k, s in enumerate(e.steps):
            by_agent.setdefault(s.agent, []).append(offset + k)
        for idx in by_agent.values():
            order += idx
            dones += [False] * (len(idx) - 1) + [True]
        offset += len(e.steps)
    return order, dones


def per_agent_gae(
    steps: list[AgentStep], episodes: list[Episode], values: torch.Tensor, *, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE along each agent's own rounds; ``(advantages, returns)`` in ``steps`` order, ``(N,)`` each."""
    order, dones = agent_streams(episodes)
    device = values.device
    idx = torch.tensor(order, dtype=torch.long, device=device)
    rewards = torch.tensor([steps[i].reward for i in order], dtype=torch.float32, device=device)
    # Every step of a stream is its own "round": chain GAE with round_ends everywhere is plain GAE.
    round_ends = torch.ones(len(order), dtype=torch.bool, device=device)
    adv_s, ret_s = chain_gae(
        rewards, values[idx], round_ends, torch.tensor(dones, device=device), gamma=gamma, gamma_agent=gamma, lam=lam
    )  # (N,) in stream order
    advantages, returns = torch.empty_like(adv_s), torch.empty_like(ret_s)
    advantages[idx], returns[idx] = adv_s, ret_s
    return advantages, returns


class IPPO(Learner):
    """Independent PPO: per-agent policies and per-agent critics on each agent's own observation."""

    centralised = False
    """True: one value head on the global state (MAPPO); False: a head per agent on its observation."""
    critic: Critic

    def __init__(self, policy: LaMASPolicy, config: IPPOConfig, temperature: Temperature, **options: Any):
        """``options``: :class:`~marft_agents.algorithms.base.Learner`'s ``tis_cap`` and ``frozen``."""
        super().__init__(policy, config, temperature, **options)
        # IPPO: a head per agent. MAPPO: one head for every agent, or on a team of models (models/team.py) one per
        # model, reading the state as that model embeds it; each head at its model's width.
        if not self.centralised:
            groups = list(policy.agents)
        else:
            groups = [policy.model_of[a] for a in policy.agents] if policy.is_team else [0] * len(policy.agents)
        keys = list(dict.fromkeys(groups))
        self.head_of = {a: keys.index(g) for a, g in zip(policy.agents, groups)}
        # a frozen agent's own head (IPPO) learns nothing either; MAPPO's heads are every agent's and learn from all
        self.critic_learns = {a: self.centralised or policy.adapter_of[a] not in self.frozen for a in policy.agents}
        widths = [policy.width_of(policy.agents[groups.index(k)]) for k in keys] if policy.is_team else None
        heads = ValueHeads(policy.hidden_size, len(keys), widths)
        learning = dict.fromkeys(self.head_of[a] for a in policy.agents if self.critic_learns[a])
        params = [p for k in learning for p in heads.heads[k].parameters()]
        self.critic = Critic(heads, policy.device, params=params, **config.critic_options())
        self.optimizers = adapter_optimizers(policy, config.lr, self.trainable)

    @classmethod
    def check_data_parallel(cls, config: IPPOConfig) -> None:
        """IPPO and MAPPO split across ranks: whole episodes stay on one rank (each agent's GAE is local)."""

    def critic_features(self, steps: list[AgentStep]) -> torch.Tensor:
        """What the critic sees, ``(N, d)``: IPPO, each agent's own observation."""
        return features(self.policy, steps, self.config.minibatch_size)

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One IPPO/MAPPO update from whole episodes; returns metrics."""
        cfg = self.config
        steps, idx_of = by_adapter(self.policy, episodes)
        feats = self.critic_features(steps)  # (N, d), frozen: computed once per update
        heads = torch.tensor([self.head_of[s.agent] for s in steps], device=feats.device)  # (N,)
        keep = torch.tensor(
            [self.critic_learns[s.agent] for s in steps], dtype=torch.bool, device=feats.device
        )  # (N,) rows the critic learns from
        self.critic.observe(feats[keep], heads[keep], ranks=self.ranks)  # the input statistics first (every rank's)
        values_old = self.critic.values(feats, heads)  # (N,)
        advantages, returns = per_agent_gae(steps, episodes, values_old, gamma=cfg.gamma, lam=cfg.gae_lambda)
        returns_of = agent_returns(self.policy, episodes, "own")  # each agent's own rewards: any reward structure
        advantages, metrics, informative = prepare_advantages(  # per agent; an agent's equal returns: no step for it
            self.policy, returns_of, steps, idx_of, advantages, **cfg.advantage_options(), ranks=self.ranks
        )
        anywhere = dp.held(self.ranks, idx_of)  # data-parallel: every rank steps the same adapters
        sampling = dict(settings=cfg, temperature=self.temperature, tis_cap=self.tis_cap, ranks=self.ranks)
        for adapter in self.trainable:
            if anywhere[adapter] and informative[adapter]:
                optimizer = self.optimizers[adapter]
                metrics.update(
                    action_ppo.step(
                        self.policy, optimizer, adapter, steps, idx_of[adapter], advantages, rng, **sampling
                    )
                )
        metrics.update(
            self.critic.fit((feats[keep], heads[keep]), values_old[keep], returns[keep], rng, ranks=self.ranks)
        )
        metrics["advantage_std"] = float(advantages.std()) if len(steps) > 1 else 0.0
        return metrics


class MAPPO(IPPO):
    """Multi-agent PPO: per-agent policies and one centralised critic on the env's global state."""

    centralised = True
    needs_state = True

    @classmethod
    def check_env(cls, config: MAPPOConfig, env: Any, *, workers: int = 0) -> None:
        """Refuse an env whose agents are not one team: one value of the global state cannot be every player's."""
        require_cooperative("mappo", env, "its one critic values the team's global state", instead="algo=ippo")

    def critic_features(self, steps: list[AgentStep]) -> torch.Tensor:
        """What the critic sees, ``(N, d)``: the global state when the agent acted."""
        if any(s.state is None for s in steps):
            raise ValueError(
                "MAPPO needs the env's global state with every agent-step: collect with "
                "RolloutEngine(..., record_state=True) on an env that implements state_text(), or use algo=ippo"
            )
        if not self.policy.is_team:
            return self.state_features([s.state for s in steps])
        out = torch.empty(len(steps), self.policy.hidden_size, device=self.policy.device)  # (N, D)
        for agent in dict.fromkeys(s.agent for s in steps):  # each agent reads the state with its own model
            rows = [i for i, s in enumerate(steps) if s.agent == agent]
            out[rows] = self.state_features([steps[i].state for i in rows], agent)
        return out

    def state_features(self, states: list[str], agent: str | None = None) -> torch.Tensor:
        """Frozen base features of each state, ``(n, d)``; ``agent``: with its model (a team of models)."""
        # Agents of one round share the state: embed each distinct state once.
        unique = list(dict.fromkeys(states))
        row = {text: k for k, text in enumerate(unique)}
        prompts = [self.policy.prompt({"instructions": "", "text": text}, agent) for text in unique]
        size = self.config.minibatch_size
        table = torch.cat([self.policy.features(prompts[i : i + size], agent) for i in range(0, len(prompts), size)])
        return table[torch.tensor([row[s] for s in states], device=table.device)]  # (n, d)
