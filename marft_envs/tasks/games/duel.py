"""``marft/NumberDuel-v0``: two players each name a number at once; the larger one within the cap wins.

A zero-sum game (``reward_structure = "zero_sum"``), so a run can train one player against a frozen copy
of the other (``agents.player_1.train=false``) and watch its win rate rise (``docs/envs/games.md``).

Each round draws a cap ``C`` (``cap_low`` to ``cap_high``, from the env's seed). ``player_0`` and
``player_1`` act at once (the graph is always empty: a Dec-POMDP, with a Parallel view) and each names a
whole number: the one in ``\\boxed{}`` if there is one, else the last number it writes. A number from 1
to ``C`` is valid; the larger valid number wins the round (+1, the other player -1); equal numbers, or
two invalid ones, tie (0 each); a valid number beats an invalid one. The best reply to any opponent is
``C`` itself. An episode is ``rounds`` duels (default 1; PettingZoo's ``max_cycles`` sets it), each with
a fresh cap; from the second on, each player sees the numbers named in the rounds before.

Infos: ``solved`` is whether ``player_0`` won the round (the headline accuracy is ``player_0``'s win rate
in one-round episodes); each player's own score (``reward_components.own_correct``) is 1 when it won;
``answer`` is the number it named.

Version history: the family's, in :mod:`marft_envs.tasks.games`.
"""

from __future__ import annotations

import re
from typing import Any

from marft_envs.core import FlexEnv, RoundResult
from marft_envs.outcomes import ANSWER, outcome_infos

_BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")
_NUMBER = re.compile(r"-?\d+")
MAX_DIGITS = 12
"""A longer run of digits is no number a player may name (and never reaches ``int``)."""


def named_number(text: str) -> int | None:
    """The whole number a player named: the last ``\\boxed{N}``, else the last number in ``text``; None if none."""
    found = _BOXED.findall(text) or _NUMBER.findall(text)
    if not found or len(found[-1].lstrip("-")) > MAX_DIGITS:
        return None
    return int(found[-1])


def duel_rewards(a: int | None, b: int | None, cap: int) -> tuple[float, float]:
    """``(reward of a, reward of b)``: the larger valid number (1 to ``cap``) wins +1 and the other gets -1; ties 0."""
    valid_a, valid_b = a is not None and 1 <= a <= cap, b is not None and 1 <= b <= cap
    if valid_a != valid_b:
        return (1.0, -1.0) if valid_a else (-1.0, 1.0)
    if not valid_a or a == b:
        return 0.0, 0.0
    return (1.0, -1.0) if a > b else (-1.0, 1.0)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class NumberDuel(FlexEnv):
    """Two players name a number each, at once, for ``rounds`` rounds; the larger one up to the round's cap wins."""

    metadata = {"name": "marft/NumberDuel-v0", "is_parallelizable": True, "render_modes": ["human", "ansi"]}
    reward_structure = "zero_sum"

    def __init__(
        self, cap_low: int = 10, cap_high: int = 99, rounds: int = 1, render_mode: str | None = None, max_cycles: int | None = None
    ):
        """``max_cycles``: PettingZoo's name for ``rounds`` (it replaces it when given)."""
        _positive("cap_low", cap_low)
        if _positive("cap_high", cap_high) < cap_low:
            raise ValueError(f"NumberDuel needs cap_low <= cap_high, got cap_low={cap_low}, cap_high={cap_high}")
        self.rounds = _positive("rounds", rounds) if max_cycles is None else _positive("max_cycles (the number of rounds)", max_cycles)
        super().__init__(["player_0", "player_1"], render_mode=render_mode)
        self.cap_low, self.cap_high = cap_low, cap_high
        self.cap = cap_high
        self.named: list[dict[str, int | None]] = []

    def reset_task(self, options: dict[str, Any]) -> None:
        self.cap = self._draw_cap()
        self.named = []

    def _draw_cap(self) -> int:
        return int(self.np_random.integers(self.cap_low, self.cap_high + 1))

    def observe_text(self, agent: str) -> str:
        lines = [
            f"A duel: you and your opponent each name a whole number from 1 to {self.cap}. The larger number wins; "
            f"a number above {self.cap}, or none, loses; equal numbers tie. Answer with your number in \\boxed{{}}."
        ]
        other = "player_1" if agent == "player_0" else "player_0"
        for k, named in enumerate(self.named):
            lines.append(f"Round {k + 1}: you named {named[agent]}, your opponent {named[other]}.")
        return "\n".join(lines)

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        named = {a: named_number(actions.get(a, "")) for a in self.possible_agents}
        r0, r1 = duel_rewards(named["player_0"], named["player_1"], self.cap)
        rewards = {"player_0": r0, "player_1": r1}
        infos = outcome_infos(self.possible_agents, solved=r0 > 0, own_correct={a: float(r > 0) for a, r in rewards.items()})
        for a in self.possible_agents:
            infos[a][ANSWER] = named[a]
        self.named.append(named)
        done = len(self.named) >= self.rounds
        if not done:
            self.cap = self._draw_cap()
        return RoundResult(rewards=rewards, terminations=dict.fromkeys(self.possible_agents, done), infos=infos)
