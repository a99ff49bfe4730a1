"""What a learner reads of the env's rewards: its declared structure, each agent's returns, an undeclared team reward.

An env declares how its agents' rewards relate (``reward_structure``: "cooperative", "zero_sum" or
"general_sum"; ``marft_envs.outcomes``). Learners that assume one team — chain GAE backs each agent's
reward up to the agents before it (MARFT), one critic values the team (MAPPO), a group compares the
team's return (GRPO's tree) — refuse the other two with :func:`require_cooperative`.

The no-signal rule is per agent (``ALGORITHMS.md``, "Traps found in our own learner", 1): an agent whose
returns are all equal takes no policy step, and the others do. :func:`agent_returns` gives each agent's
returns as its learner credits them: along the chain from its first step on ("chain"), or its own rewards
("own"). In a zero-sum game the team's return is always 0, while each player's own returns differ.
"""

from __future__ import annotations

import warnings
from typing import Any

from marft_agents.models.protocol import Policy
from marft_agents.rollout.episode import AgentStep, Episode
from marft_envs.outcomes import reward_structure

VIEWS = ("chain", "own")


def require_cooperative(algo: str, env: Any, why: str, instead: str = "algo=ippo (or algo=grpo)") -> None:
    """Refuse, in one line, an env whose declared rewards are not one team's (``algo`` assumes one team: ``why``)."""
    structure = reward_structure(env)
    if structure != "cooperative":
        name = getattr(env, "name", type(env).__name__)
        raise ValueError(
            f"algo={algo} trains one team ({why}), but {name} declares reward_structure={structure!r}: use {instead}"
        )


def agent_returns(policy: Policy, episodes: list[Episode], view: str) -> dict[str, list[float]]:
    """Each adapter's returns: one per episode and agent of the adapter that acted in it.

    ``view="chain"``: what chain credit gives the agent (MARFT): every reward from its first step in the episode on,
    a round's shared reward once (``AgentStep.chain_reward``) — the team's return for the episode's first agent.
    ``view="own"``: the rewards paid to the agent itself (IPPO, PPO: each agent's GAE reads its own).
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {list(VIEWS)}, got {view!r}")
    out: dict[str, list[float]] = {a: [] for a in policy.adapters}
    for episode in episodes:
        first: dict[str, int] = {}
        for k, s in enumerate(episode.steps):
            first.setdefault(s.agent, k)
        for agent, k in first.items():
            if view == "chain":
                value = sum(s.chain_reward for s in episode.steps[k:])
            else:
                value = sum(s.reward for s in episode.steps if s.agent == agent)
            out[policy.adapter_of[agent]].append(float(value))
    return out


def undeclared_team_reward(steps: list[AgentStep]) -> float | None:
    """A reward that every agent of some round received alike with no shared part declared (None: there is none).

    Such a reward, if it is one team reward paid to each agent, is counted once per agent by chain GAE: the env
    should declare it (``RoundResult(shared_reward=...)``, or pay it with ``assign_credit("team", ...)``).
    """
    rounds: dict[tuple[int, int], list[AgentStep]] = {}
    for s in steps:
        rounds.setdefault((s.episode, s.round), []).append(s)
    for members in rounds.values():
        rewards = {s.reward for s in members}
        if len(members) > 1 and len(rewards) == 1 and next(iter(rewards)) != 0 and not any(s.shared for s in members):
            return next(iter(rewards))
    return None


def warn_undeclared_team_reward(algo: str, steps: list[AgentStep]) -> bool:
    """Warn (and return True) when :func:`undeclared_team_reward` finds one in ``steps``; a learner warns once."""
    reward = undeclared_team_reward(steps)
    if reward is None:
        return False
    warnings.warn(
        f"algo={algo}: every agent of a round received the same reward {reward:g} and the env declares no shared part: "
        "if it is one team reward paid to each agent, the chain counts it once per agent. Declare it with "
        "RoundResult(shared_reward=...) or pay it with marft_envs.rewards.credit.assign_credit('team', ...)",
        stacklevel=3,
    )
    return True
