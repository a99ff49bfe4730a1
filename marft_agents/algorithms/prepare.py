"""Between the advantages and the policy step: standardise per agent, apply the no-signal rule, log each agent's health.

MARFT (both levels), PPO and IPPO/MAPPO call :func:`prepare_advantages` on their raw advantages. It
standardises them per agent — jointly over agents, each agent's different mean would become an
agent-wide constant push (``ALGORITHMS.md``, "Credit") — and says, per agent, whether the batch carries a
signal for it: when every one of an agent's returns is equal, its policy step would only follow the critic's
noise (``returns.py`` gives each agent's returns as its learner credits them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms.advantages import spread
from marft_agents.algorithms.data_parallel import SINGLE, Ranks
from marft_agents.models.policy import LaMASPolicy
from marft_agents.rollout.episode import AgentStep


def prepare_advantages(
    policy: LaMASPolicy,
    returns: Mapping[str, Sequence[float]],
    steps: list[AgentStep],
    idx_of: dict[str, list[int]],
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    normalize: bool,
    scope: str,
    skip_equal_returns: bool,
    ranks: Ranks = SINGLE,
) -> tuple[torch.Tensor, dict[str, float], dict[str, bool]]:
    """``(advantages, metrics, informative)`` from the raw ``advantages`` ``(N,)`` (or ``(N, R)`` with ``mask``).

    ``normalize``: standardise within each agent's steps (``scope="agent"``) or jointly (``scope="batch"``: the
    earlier behaviour, for ablations), over every rank's steps. ``informative[adapter]`` is False when the
    adapter's ``returns`` (``returns.agent_returns``; every rank's) are all equal and ``skip_equal_returns`` is
    set: then that adapter takes no policy step, and the others still do. The metrics hold each adapter's raw
    advantage health and ``<adapter>/skipped_equal_returns``, the raw spread ``signal/advantage_std`` and
    ``policy/skipped_equal_returns`` (the share of adapters skipped).
    """
    metrics = {"signal/advantage_std": spread(advantages, mask), **agent_health(steps, idx_of, advantages, mask)}
    if normalize:
        if scope == "agent":
            groups, n_groups = agent_ids(policy, steps), len(policy.agents)
        else:  # every step in one group: the joint standardisation
            groups, n_groups = torch.zeros(len(steps), dtype=torch.long, device=policy.device), 1
        advantages = dp.normalize_per_agent(ranks, advantages, groups, n_groups, mask)  # over every rank's steps
    informative = {}
    for adapter in policy.adapters:  # in one order on every rank: each is a collective
        own = torch.tensor(returns.get(adapter, []), dtype=torch.float64, device=policy.device)  # (E_a,)
        informative[adapter] = dp.returns_differ(ranks, own) or not skip_equal_returns
        metrics[f"{adapter}/skipped_equal_returns"] = float(not informative[adapter])
    metrics["policy/skipped_equal_returns"] = float(np.mean([not v for v in informative.values()]))
    return advantages, metrics, informative


def agent_ids(policy: LaMASPolicy, steps: list[AgentStep]) -> torch.Tensor:
    """Each step's agent (its role) as an integer, ``(N,)`` (its place in ``policy.agents``): to normalise per agent.

    Per agent, not per adapter: with ``adapter_mode=shared`` one adapter serves every role, and one group would again
    push each role by the difference of the roles' means."""
    number = {a: k for k, a in enumerate(policy.agents)}
    return torch.tensor([number[s.agent] for s in steps], dtype=torch.long, device=policy.device)


def agent_health(
    steps: list[AgentStep], idx_of: dict[str, list[int]], advantages: torch.Tensor, mask: torch.Tensor | None = None
) -> dict[str, float]:
    """Per adapter: the mean and spread of its raw advantages (before normalisation) and its mean reward.

    ``advantages`` is ``(N,)``, or ``(N, R)`` with ``mask``. A mean far from 0 for one agent while the
    others sit near it is the push that joint standardisation used to turn into a constant.
    """
    out: dict[str, float] = {}
    for adapter, idx in idx_of.items():
        if not idx:
            continue
        rows = advantages[idx]
        values = rows[mask[idx]] if mask is not None else rows
        out[f"{adapter}/advantage_mean"] = float(values.double().mean()) if values.numel() else 0.0
        out[f"{adapter}/advantage_std"] = float(values.double().std(unbiased=False)) if values.numel() > 1 else 0.0
        out[f"{adapter}/reward"] = float(np.mean([steps[i].reward for i in idx]))
    return out
