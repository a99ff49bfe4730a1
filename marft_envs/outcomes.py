"""The outcome keys a trainer reads from ``infos``: an episode's success and each agent's own score.

Trainers and evaluation (``marft_agents``) read exactly these, from the infos of an episode's last
round, and nothing else by name:

- ``infos[agent][SOLVED]`` (bool): whether the episode succeeded — the team's final answer was
  right. An env that never sets it has no success notion: ``marft train`` then reports mean
  return as its headline instead of an accuracy.
- ``infos[agent][REWARD_COMPONENTS][OWN_CORRECT]`` (float in [0, 1]): this agent's own score in the
  round (its own answer right, its locating exact, ...), for the per-role diagnostics.
- ``infos[agent][REWARD_COMPONENTS]`` (dict of floats): the reward's parts, logged as they are.
- ``infos[agent][SHARED_REWARD]`` (float): the part of this agent's reward that every agent of the
  round received alike (the team reward under ``credit="team"``; 0 or absent otherwise). The team's
  return counts it once per round, not once per agent, and a chain learner enters it into the chain
  once (at the round's last agent) — else a reward backed up along the chain is counted twice.
  An env need not set it by hand: a ``RoundResult`` whose ``rewards`` come from
  ``marft_envs.rewards.credit.assign_credit`` (or that sets ``shared_reward=``) reports it for every agent.
- ``infos[agent][ANSWER]`` (optional): the answer this agent gave in the round (the MATH envs' extracted
  ``\\boxed{}`` answer; None when it gave none), for the copy and agreement diagnostics: how often an agent
  repeats the answer of a teammate it saw, and how often the team's answers agree.
- ``infos[agent][TEAM_ANSWER]`` (optional): the team's answer in the round (the MATH envs': the answering agent's,
  or the debate's vote), written to each evaluation's per-problem outcomes.

:func:`outcome_infos` builds per-agent infos with these keys, so a task need not spell them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SOLVED = "solved"
"""Key of the episode's success (bool) in every agent's info of the last round."""
REWARD_COMPONENTS = "reward_components"
"""Key of the reward's named parts (dict of floats) in an agent's info."""
OWN_CORRECT = "own_correct"
"""Key, inside the reward components, of an agent's own score in [0, 1]."""
SHARED_REWARD = "shared_reward"
"""Key of the part of an agent's reward that every agent of the round received alike (float)."""
ANSWER = "answer"
"""Key of the answer an agent gave in the round (optional; None: it gave none)."""
TEAM_ANSWER = "team_answer"
"""Key of the team's answer in the round (optional; None: the team gave none)."""

REWARD_STRUCTURES = ("cooperative", "zero_sum", "general_sum")
"""How an env's agents' rewards relate (its ``reward_structure``): one team; opponents whose rewards sum to 0 in
every round; or each agent with interests of its own. Learners that assume one team (a chain backs each agent's
reward up to the agents before it; a shared critic values the team) refuse the other two."""


def reward_structure(env: Any) -> str:
    """The env's declared ``reward_structure`` ("cooperative" when it declares none); a value not in
    :data:`REWARD_STRUCTURES` raises a one-line ValueError."""
    declared = getattr(env, "reward_structure", "cooperative")
    if declared not in REWARD_STRUCTURES:
        raise ValueError(f"{type(env).__name__}.reward_structure must be one of {list(REWARD_STRUCTURES)}, got {declared!r}")
    return declared


def outcome_infos(
    agents: Iterable[str],
    *,
    solved: bool | None = None,
    own_correct: Mapping[str, float] | None = None,
    components: Mapping[str, float] | None = None,
    **extra: Any,
) -> dict[str, dict[str, Any]]:
    """Per-agent infos carrying the outcome keys: ``solved`` for all, ``own_correct[agent]`` for each."""
    out: dict[str, dict[str, Any]] = {}
    for agent in agents:
        parts = dict(components or {})
        if own_correct is not None and agent in own_correct:
            parts[OWN_CORRECT] = float(own_correct[agent])
        info: dict[str, Any] = {REWARD_COMPONENTS: parts, **extra}
        if solved is not None:
            info[SOLVED] = bool(solved)
        out[agent] = info
    return out
