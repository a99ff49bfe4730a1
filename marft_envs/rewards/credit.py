"""Credit assignment: who receives a round's reward.

An explicit, tested choice instead of something buried in ``step``:

- ``"team"``: every agent of the round receives the team reward.
- ``"last"``: only the last agent in the round's order receives it (the original MARFT code).
- ``"per_agent"``: each agent receives its own score (e.g. whether its own answer is right);
  agents without one get 0.

Under ``"team"`` every agent's reward holds the same team reward. :func:`assign_credit` returns a
:class:`Credit` that says so (its ``shared``): a ``RoundResult`` built from it reports that part as
``infos[agent]["shared_reward"]`` (``marft_envs.outcomes.SHARED_REWARD``) on its own, so the team's return
counts it once per round and a chain learner backs it up once, not once per agent, without the env
naming the key. :func:`shared_part` gives the same number for an env that builds its rewards itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

CREDIT_MODES = ("team", "last", "per_agent")


class Credit(dict):
    """Each agent's reward for a round (a plain ``dict``), and the part of it every agent received alike."""

    def __init__(self, rewards: Mapping[str, float], shared: float = 0.0):
        super().__init__(rewards)
        self.shared = float(shared)
        """The part of every agent's reward that all agents of the round received alike (the team reward under "team")."""


def assign_credit(mode: str, order: Sequence[str], team_reward: float, own_rewards: Mapping[str, float] | None = None) -> Credit:
    """Split a round's reward among the agents in ``order`` (the round's acting order); the result says its shared part."""
    if mode == "team":
        return Credit({a: float(team_reward) for a in order}, shared=float(team_reward))
    if mode == "last":
        return Credit({a: float(team_reward) if k == len(order) - 1 else 0.0 for k, a in enumerate(order)})
    if mode == "per_agent":
        own = own_rewards or {}
        return Credit({a: float(own.get(a, 0.0)) for a in order})
    raise ValueError(f"unknown credit mode {mode!r}: use one of {list(CREDIT_MODES)}")


def shared_part(mode: str, team_reward: float) -> float:
    """The part of every agent's reward that all agents of the round received alike: the team reward under "team", else 0."""
    if mode not in CREDIT_MODES:
        raise ValueError(f"unknown credit mode {mode!r}: use one of {list(CREDIT_MODES)}")
    return float(team_reward) if mode == "team" else 0.0
