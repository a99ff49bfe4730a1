"""Multi-agent GRPO: group-relative advantages, no critic; ``docs/algorithms/grpo.md``.

1. The trainer plays every problem ``G = group_size`` times in consecutive episodes (same seed, so
   the same problem); episode ``e`` belongs to problem ``e // G``.
2. Each agent-step is scored by the reward the team collects from its round on,
   ``R_t = sum_{t' >= t} gamma^(t' - t) * (sum of the rewards of round t')`` (the episode's return
   for a first-round step).
3. Its advantage is its score standardised inside its group, ``A = (R - mean_g) / (std_g + eps)``:
   - ``grouping="problem"``: one sample per episode (its return), shared by all its agent-steps — the
     plain GRPO outcome advantage of a whole LaMAS trajectory;
   - ``grouping="agent_round"``: the agent-steps of one agent in one round on one problem form a
     group; a later round's steps are compared only with steps of the same round;
   - ``grouping="tree"``: tree sampling (``marft_agents/rollout/tree.py``): the trainer plays one tree
     per problem, ``group_size`` candidates at every agent node from one context; the candidates of
     one node (key ``(problem, round, agent, node)``, the exact same prompt) form a group and are
     compared by their ``score`` (their round's team reward, or the mean of their continuations');
     so do the continuation samples of one downstream agent after one upstream candidate (key
     ``(problem, round, agent, node, k)``, scored by their round's team reward).
   ``normalize="agent"`` divides by the agent's own score std over the batch instead of the group's
   (Dr.MAS, ``advantages.agent_scaled``).
4. Per agent, GRPO's token-level clipped objective with a k3 KL penalty to the reference policy
   (the base, adapters off; after ``init_from`` the run's starting adapters), each response's tokens
   averaged first (``losses.grpo_loss``).

"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms.advantages import agent_scaled, group_relative, spread
from marft_agents.algorithms.base import Learner, apply, by_adapter, minibatches, steps_of
from marft_agents.algorithms.losses import grpo_loss, masked_mean, mean_stats
from marft_agents.algorithms.optimizers import adapter_optimizers
from marft_agents.algorithms.prepare import agent_health
from marft_agents.algorithms.returns import require_cooperative
from marft_agents.algorithms.tis import token_weights, weight_stats
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.rollout.tree import PICKS, TreeRollout, is_continuation
from marft_agents.settings.fields import AT_LEAST_ONE, LR, NON_NEGATIVE, POSITIVE, UNIT, WHY_LR, Ranged, choice, ranged
from marft_envs.branching import NotBranchableError, probe_branching

GROUPINGS = ("problem", "agent_round", "tree")
NORMALIZATIONS = ("group", "agent")


@dataclass
class GRPOConfig(Ranged):
    """Hyper-parameters of multi-agent GRPO."""

    lr: float = ranged(3e-4, LR, WHY_LR)
    """Adam learning rate of each agent's adapter."""
    group_size: int = ranged(4, AT_LEAST_ONE)
    """Episodes played per problem (``episodes_per_update`` must be a multiple of it)."""
    grouping: str = choice("problem", GROUPINGS)
    """Who is compared with whom: "problem" (whole episodes), "agent_round" (one agent, one round), or "tree"
    (tree sampling: the group_size candidates of one agent node, drawn from one context)."""
    normalize: str = choice("group", NORMALIZATIONS)
    """Advantage scale: "group" (the group's std, GRPO) or "agent" (the agent's own std over the batch, Dr.MAS)."""
    tree_continuations: int = ranged(2, AT_LEAST_ONE)
    """grouping=tree: continuations sampled to the round's end to score an upstream agent's candidate (TreeRPO)."""
    tree_pick: str = choice("best", PICKS)
    """grouping=tree: the candidate the trunk goes on from: "best" (highest score: own reward, or its continuations'
    mean), "random_upstream" (the best closing candidate, a random upstream one) or "sample" (always random)."""
    gamma: float = ranged(1.0, UNIT)
    """Discount per round of the reward-to-go that scores an agent-step."""
    std_eps: float = ranged(1e-6, POSITIVE)
    """Added to a group's reward std before dividing."""
    clip_eps: float = ranged(0.2, POSITIVE)
    """Per-token ratio clip."""
    kl_coef: float = ranged(0.04, NON_NEGATIVE)
    """Weight of the per-token KL(pi || reference) penalty; 0 skips the reference pass."""
    entropy_coef: float = ranged(0.0, NON_NEGATIVE)
    """Weight of the mean per-token entropy bonus (GRPO has none by default)."""
    ppo_epochs: int = ranged(1, AT_LEAST_ONE)
    """Passes over the batch per update."""
    minibatch_size: int = ranged(64, AT_LEAST_ONE)
    """Agent-steps per gradient step."""
    grad_accumulation: int = ranged(1, AT_LEAST_ONE)
    """k: the gradients of k consecutive minibatches add up to one optimizer step, the one a minibatch of
    k * minibatch_size agent-steps would take (same rows, same loss), with one minibatch's activations at a time."""
    micro_batch_tokens: int | None = ranged(None, NON_NEGATIVE)
    """The most padded tokens (agent-steps x their longest prompt and response) one forward and backward pass holds: a
    larger minibatch runs in micro-batches whose gradients add up to its own (memory: one micro-batch's activations at
    a time; 0: whole minibatches; None: 1024, more for a model narrower than SmolLM2-135M:
    :func:`~marft_agents.algorithms.ppo_settings.micro_batch_tokens`)."""
    max_grad_norm: float = ranged(0.5, POSITIVE)
    """Gradient clipping."""


def reward_to_go(episode: Episode, gamma: float, agent: str | None = None) -> list[float]:
    """Per agent-step: the rewards of its round and every later round, discounted per round.

    ``agent`` None: the team's rewards, a round's shared reward once (``AgentStep.chain_reward``; every agent's copy
    summed would count it once per agent). ``agent``: that agent's own rewards only (opponents in a zero-sum game).
    """
    by_round: dict[int, float] = defaultdict(float)
    for s in episode.steps:  # every round gets an entry: an agent's own to-go is defined where it did not act
        by_round[s.round] += s.chain_reward if agent is None else (s.reward if s.agent == agent else 0.0)
    rounds = sorted(by_round)
    to_go: dict[int, float] = {}
    acc = 0.0
    for t in reversed(rounds):
        acc = by_round[t] + gamma * acc
        to_go[t] = acc
    return [to_go[s.round] for s in episode.steps]


def training_steps(episodes: list[Episode]) -> list[AgentStep]:
    """Every agent-step to learn from: each episode's steps, then its tree branches (unchosen candidates and kept
    continuation samples; none without tree sampling)."""
    return [s for e in episodes for s in (*e.steps, *e.branches)]


def tree_groups(steps: list[AgentStep], device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scores, group ids)`` ``(N,)`` of tree-sampled steps, on ``device`` (None: torch's default).

    Steps a tree rollout did not tag (no sibling group or score) are refused.
    """
    if any(s.group is None or s.score is None for s in steps):
        raise ValueError(
            "grpo.grouping=tree needs episodes from a tree rollout (marft_agents.rollout.tree.TreeRollout): "
            "some agent-steps have no sibling group or score"
        )
    ids: dict[tuple, int] = {}
    prompts: dict[tuple, list[int]] = {}
    for s in steps:
        ids.setdefault(s.group, len(ids))
        if prompts.setdefault(s.group, s.prompt) != s.prompt:  # siblings must share the exact context
            raise ValueError(f"tree sibling group {s.group} holds different prompts: the tree rollout is broken")
    return torch.tensor([float(s.score) for s in steps], device=device), torch.tensor(
        [ids[s.group] for s in steps], device=device
    )


def tree_group_stats(
    steps: list[AgentStep], scores: torch.Tensor, groups: torch.Tensor, agents: list[str]
) -> dict[str, float]:
    """Sibling groups of a tree batch: how many there are, the share with no spread, per agent how many carry signal.

    ``scores`` and ``groups`` are ``tree_groups(steps)``, ``(N,)``; a group is informative when its scores differ.
    """
    first: dict[int, int] = {}  # group id -> its first step
    for n, g in enumerate(groups.tolist()):
        first.setdefault(g, n)
    informative = {g: bool(scores[groups == g].max() > scores[groups == g].min()) for g in first}
    out = {
        "grpo/zero_spread_groups": float(np.mean([not x for x in informative.values()])) if informative else 0.0,
        "tree/nodes": float(sum(not is_continuation(steps[n]) for n in first.values())),
        "tree/continuation_groups": float(sum(is_continuation(steps[n]) for n in first.values())),
    }
    for agent in agents:
        out[f"tree/informative_groups/{agent}"] = float(
            sum(informative[g] for g, n in first.items() if steps[n].agent == agent)
        )
    return out


def grpo_advantages(
    episodes: list[Episode],
    *,
    group_size: int,
    grouping: str,
    gamma: float,
    eps: float = 1e-6,
    normalize: str = "group",
    device: torch.device | None = None,
    own: bool = False,
) -> torch.Tensor:
    """Group-relative advantage of every agent-step of ``episodes`` (in ``training_steps`` order), ``(N,)`` on
    ``device`` (None: torch's default).

    ``own``: score each agent by its own rewards, compared within its own group (an env whose agents are not one team:
    in a zero-sum game the team's return is always 0); else by the team's."""
    if grouping not in GROUPINGS:
        raise ValueError(f"grouping must be one of {list(GROUPINGS)}, got {grouping!r}")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {list(NORMALIZATIONS)}, got {normalize!r}")
    if grouping == "tree":
        steps = training_steps(episodes)
        scores, groups = tree_groups(steps, device)
        return _relative(scores, groups, [s.agent for s in steps], normalize, eps)
    if grouping == "problem" and own:
        return _own_problem_advantages(episodes, group_size, gamma, eps, device)
    if grouping == "problem":
        # One sample per episode: a longer episode must not weigh more in its group's mean.
        returns = torch.tensor([reward_to_go(e, gamma)[0] if e.steps else 0.0 for e in episodes], device=device)  # (E,)
        problems = torch.tensor([e.index // group_size for e in episodes], device=device)  # (E,)
        per_episode = group_relative(returns, problems, eps)  # (E,)
        return torch.cat([per_episode[k].expand(len(e.steps)) for k, e in enumerate(episodes)])  # (N,)
    scores, keys = [], []
    for e in episodes:
        if own:
            by_agent = {a: reward_to_go(e, gamma, a) for a in dict.fromkeys(s.agent for s in e.steps)}
            scores += [by_agent[s.agent][k] for k, s in enumerate(e.steps)]
        else:
            scores += reward_to_go(e, gamma)
        keys += [(e.index // group_size, s.agent, s.round) for s in e.steps]
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    scores_t, groups = torch.tensor(scores, device=device), torch.tensor([ids[k] for k in keys], device=device)
    return _relative(scores_t, groups, [k[1] for k in keys], normalize, eps)


def _own_problem_advantages(
    episodes: list[Episode], group_size: int, gamma: float, eps: float, device: torch.device | None
) -> torch.Tensor:
    """``grouping="problem"`` by each agent's own return: one sample per (episode, agent), compared with the same
    agent's samples on the same problem; every step of the agent in the episode takes its sample's advantage."""
    samples: list[float] = []
    keys: list[tuple[int, str]] = []
    sample_of: list[int] = []  # each step's sample
    for e in episodes:
        index: dict[str, int] = {}
        for k, s in enumerate(e.steps):
            if s.agent not in index:  # its return from its first round on
                index[s.agent] = len(samples)
                samples.append(reward_to_go(e, gamma, s.agent)[k])
                keys.append((e.index // group_size, s.agent))
            sample_of.append(index[s.agent])
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    groups = torch.tensor([ids[k] for k in keys], dtype=torch.long, device=device)
    per_sample = group_relative(torch.tensor(samples, device=device), groups, eps)  # (S,)
    return per_sample[torch.tensor(sample_of, dtype=torch.long, device=device)]  # (N,)


def _relative(
    scores: torch.Tensor, groups: torch.Tensor, agents: list[str], normalize: str, eps: float
) -> torch.Tensor:
    """Group-relative advantages on the group's scale, or (``normalize="agent"``) on each agent's own."""
    if normalize == "group":
        return group_relative(scores, groups, eps)
    ids = {a: i for i, a in enumerate(dict.fromkeys(agents))}
    return agent_scaled(scores, groups, torch.tensor([ids[a] for a in agents], device=scores.device), eps)


class GRPO(Learner):
    """Multi-agent GRPO: group-relative advantages and a token-level clipped objective, no critic."""

    def __init__(self, policy: LaMASPolicy, config: GRPOConfig, temperature: Temperature, **options: Any):
        """``options``: :class:`~marft_agents.algorithms.base.Learner`'s ``tis_cap`` and ``frozen``."""
        if config.normalize == "agent" and config.grouping == "problem":
            raise ValueError(
                "grpo.normalize=agent needs grpo.grouping=agent_round or tree: with grouping=problem "
                "every agent of an episode shares one sample"
            )
        if config.group_size < 2:
            raise ValueError(
                f"grpo.group_size must be at least 2 (a group of one has no baseline), got {config.group_size}"
            )
        super().__init__(policy, config, temperature, **options)  # group_size: read from config.group_size
        self.optimizers = adapter_optimizers(policy, config.lr, self.trainable)

    @classmethod
    def check_env(cls, config: GRPOConfig, env, *, workers: int = 0) -> None:
        """Tree sampling needs an env that branches, in this process, whose agents are one team (a candidate is scored
        by its round's team reward): refuse anything else in one line.

        One ``branch()`` of ``env`` reset is tried, so a ``branch()`` that raises, returns None or cannot copy is
        named now.
        """
        if getattr(config, "grouping", None) != "tree":
            return
        why = "grouping=tree scores a candidate by its round's team reward"
        require_cooperative("grpo", env, why, instead="grpo.grouping=problem or agent_round")
        if workers:
            raise ValueError(
                "grpo.grouping=tree runs its tree rollouts in the learner's process: use distributed.workers=0"
            )
        try:
            probe_branching(env, purpose="grpo.grouping=tree")
        except NotBranchableError as err:
            raise ValueError(str(err)) from None

    @classmethod
    def check_data_parallel(cls, config: GRPOConfig) -> None:
        """Whole groups stay on one rank, so their baselines are local; refuse what spans the batch or the tree."""
        if config.grouping == "tree":
            raise ValueError(
                "grpo.grouping=tree plays its trees in one process: use grpo.grouping=problem or agent_round"
            )
        if config.normalize == "agent":
            raise ValueError(
                "grpo.normalize=agent scales by each agent's std over the whole batch: use grpo.normalize=group"
            )

    def collector(self, rollout: RolloutEngine):
        """Tree sampling wraps the rollout engine in a tree rollout; the other groupings play whole episodes."""
        cfg = self.config
        if cfg.grouping != "tree":
            return rollout
        return TreeRollout(rollout, width=cfg.group_size, continuations=cfg.tree_continuations, pick=cfg.tree_pick)

    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """One GRPO update from whole episodes (groups of ``group_size`` per problem, or trees); returns metrics."""
        cfg = self.config
        if cfg.grouping == "tree":
            return self._tree_update(episodes, rng)
        if len(episodes) % cfg.group_size:
            # A group split across two updates would be standardised in two halves.
            raise ValueError(
                f"grpo: {len(episodes)} episodes do not split into groups of {cfg.group_size}; "
                "set episodes_per_update to a multiple of grpo.group_size"
            )
        steps, idx_of = by_adapter(self.policy, episodes)
        advantages = grpo_advantages(
            episodes,
            group_size=cfg.group_size,
            grouping=cfg.grouping,
            gamma=cfg.gamma,
            eps=cfg.std_eps,
            normalize=cfg.normalize,
            device=self.policy.device,
            own=self.reward_structure != "cooperative",  # opponents: each scored by its own rewards
        )  # (N,)
        metrics: dict[str, float] = {
            # Groups whose members all scored the same give no signal; this says how much of the batch did.
            "grpo/zero_advantage_frac": float((advantages == 0).float().mean()) if len(steps) else 0.0,
            "signal/advantage_std": spread(advantages),
            **agent_health(steps, idx_of, advantages),
        }
        anywhere = dp.held(self.ranks, idx_of)  # data-parallel: every rank steps the same adapters
        for adapter in self.trainable:
            if anywhere[adapter]:
                metrics.update(self.policy_step(adapter, steps, idx_of[adapter], advantages, rng))
        return metrics

    def _tree_update(self, episodes: list[Episode], rng: np.random.Generator) -> dict[str, float]:
        """One update from tree rollouts: every candidate of every node and every kept continuation, each compared with
        its siblings."""
        cfg = self.config
        steps = training_steps(episodes)
        scores, groups = tree_groups(steps, self.policy.device)
        advantages = _relative(scores, groups, [s.agent for s in steps], cfg.normalize, cfg.std_eps)  # (N,)
        untrained = sum(e.extra_tokens for e in episodes)  # continuation tokens no agent-step holds
        metrics: dict[str, float] = {
            "grpo/zero_advantage_frac": float((advantages == 0).float().mean()) if len(steps) else 0.0,
            **tree_group_stats(steps, scores, groups, self.policy.agents),
            "tree/generated_tokens": float(sum(len(s.response) for s in steps) + untrained),
            "tree/continuation_tokens": float(sum(len(s.response) for s in steps if is_continuation(s)) + untrained),
        }
        idx_of = {
            adapter: steps_of(self.policy, steps, adapter) for adapter in self.policy.adapters
        }  # branches included
        metrics.update(agent_health(steps, idx_of, advantages))
        for adapter in self.trainable:
            if idx_of[adapter]:
                metrics.update(self.policy_step(adapter, steps, idx_of[adapter], advantages, rng))
        return metrics

    def policy_step(
        self, adapter: str, steps: list[AgentStep], idx: list[int], advantages: torch.Tensor, rng: np.random.Generator
    ) -> dict[str, float]:
        """Epochs of GRPO's clipped objective over ``adapter``'s steps ``idx``; ``advantages`` ``(N,)``."""
        cfg = self.config
        log, total = [], 0.0  # per-minibatch stats; total: the loss of the step being accumulated
        passes = dict(minibatch_size=cfg.minibatch_size, epochs=cfg.ppo_epochs, accumulation=cfg.grad_accumulation)
        passes.update(micro_batch_tokens=cfg.micro_batch_tokens)
        passes.update(reference=cfg.kl_coef > 0, ranks=self.ranks)
        for mb in minibatches(self.policy, adapter, steps, idx, rng, temperature=self.temperature, **passes):
            width = mb.mask.shape[1]
            old = _pad([s.token_logps for s in mb.steps], width, mb.mask.device)  # (B, R) behaviour log-probs
            weights = token_weights(mb.steps, width, self.tis_cap, mb.mask.device)  # (B, R) TIS weights, or None (off)
            # the KL penalty is inside each response's token average (grpo_loss), unlike PPO's
            grpo, stats = grpo_loss(
                mb.logp_tok, old, advantages[mb.rows], mb.mask, cfg.clip_eps, mb.ref_tok, cfg.kl_coef, weights=weights
            )
            entropy = masked_mean(mb.entropy_tok, mb.mask)
            # data-parallel: each response's token mean is one row of the global mean over rows; entropy is over tokens
            loss = mb.share.rows * grpo - cfg.entropy_coef * mb.share.tokens * entropy
            params = self.policy.parameters(adapter)
            part = apply(self.optimizers[adapter], loss, params, cfg.max_grad_norm, adapter, self.ranks, mb.share)
            total = part if mb.share.first else total + part  # an accumulated step's loss: the sum of its parts'
            tokens = mb.share.weights[1]  # the clip statistics and the KL are means over the minibatch's tokens
            stats = dp.shared_means(
                self.ranks, {"entropy": entropy.item(), **stats}, dict.fromkeys(("entropy", *stats), tokens)
            )
            log.append({**({"loss": total} if mb.share.last else {}), **stats, **weight_stats(weights, mb.mask)})
        return {**mean_stats(log, f"{adapter}/"), f"{adapter}/skipped_minibatches": 0.0}  # no gate: never skips


def _pad(rows: list[torch.Tensor], width: int, device: torch.device) -> torch.Tensor:
    """Right-pad 1-D tensors with zeros to ``(B, width)`` on ``device`` (padding is masked out downstream)."""
    out = torch.zeros(len(rows), width, device=device)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out
