"""The MATH envs' reward for one attempt: MathChain's, and MathSolo's, MathDebate's and MathCORY's.

    own[a]    = 1 if agent a's final answer (:func:`~marft_envs.rewards.math.extract_answer`) matches
                the gold answer (:func:`~marft_envs.rewards.math.answers_match`), else 0
    team      = the mean of own[a] over the answering agents that acted this round (0 if none did)
    solved    = whether the team's answer (the family's pick: the chain's last answering agent, the
                debate's majority vote) matches the gold answer
    format[a] = format_reward x boxed_format(a's text) for every answering agent, when format_reward > 0

The env (:meth:`marft_envs.tasks.math.base.MathTask.end_round`) records the attempt, splits ``team``
and ``own`` between the round's agents by its credit mode (:mod:`marft_envs.rewards.credit`), adds
each ``format[a]`` to that agent's reward, and ends the episode once ``solved`` (or out of attempts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from marft_envs.rewards.format import boxed_format
from marft_envs.rewards.math import answers_match, extract_answer


@dataclass(frozen=True)
class AttemptGrade:
    """One graded attempt of a MATH team: every agent's answer and score, the team's score and answer."""

    answers: dict[str, str | None]
    """Each acting agent's extracted final answer (None: no answer found)."""
    correct: dict[str, bool]
    """Whether each acting agent's own answer matches the gold answer (``own``)."""
    team: float
    """The share of the answering agents that acted whose answer is right."""
    team_answer: str | None
    """The team's answer, as the family picks it from the answering agents' answers."""
    solved: bool
    """Whether the team's answer matches the gold answer."""
    format: dict[str, float]
    """Each answering agent's bonus for a parsable ``\\boxed{}`` answer, right or wrong; empty when off."""


def grade_attempt(
    actions: Mapping[str, str],
    gold: str,
    answering: Sequence[str],
    team_answer: Callable[[dict[str, str | None]], str | None],
    format_reward: float = 0.0,
) -> AttemptGrade:
    """Grade one attempt: ``actions`` (agent -> text) against ``gold``; ``answering``: the agents whose
    answers count (those absent from ``actions`` are left out); ``team_answer`` picks the team's answer
    from the answering agents' extracted answers; ``format_reward``: the weight of the format bonus."""
    answers = {a: extract_answer(text) for a, text in actions.items()}
    correct = {a: ans is not None and answers_match(ans, gold) for a, ans in answers.items()}
    acted = [a for a in answering if a in actions]
    team = sum(correct[a] for a in acted) / max(len(acted), 1)
    answer = team_answer({a: answers[a] for a in acted})
    solved = answer is not None and answers_match(answer, gold)
    bonus = {a: format_reward * boxed_format(actions[a]) for a in acted} if format_reward > 0 else {}
    return AttemptGrade(answers=answers, correct=correct, team=team, team_answer=answer, solved=solved, format=bonus)
