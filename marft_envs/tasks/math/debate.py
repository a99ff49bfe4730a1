"""``marft/MathDebate-v1``: independent solvers answer, then see each other's previous answers.

Every round's dependency graph is empty — within a round the solvers act independently — so this is
a Dec-POMDP and has a PettingZoo Parallel view. From the second round on, each solver also sees the
other solvers' answers from the previous round. After the last round the team's answer is the
majority vote of the solvers' final answers (equivalent answers vote together; ties go to the
earliest solver). The team reward is the fraction of solvers whose answer is right.

Options: ``n_agents`` (solvers, default 3), ``rounds`` (debate rounds, default 2), ``feedback``
(also tell the solvers whether the vote was right and stop early when it is), ``problems``,
``split`` (``"train"``, ``"validation"`` or ``"test"``: disjoint by arithmetic, :mod:`marft_envs.tasks.math.synthetic`),
``credit`` (``"team"``, ``"last"``, ``"per_agent"``), ``profile``.

``marft/MathDebate-v0`` (:mod:`marft_envs.tasks.math.debate_v0`) is this env on the first
release's leaky synthetic split by uid.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from typing import Any

from marft_envs.core import RoundResult
from marft_envs.rewards.math import answers_match
from marft_envs.tasks.math.base import MathTask
from marft_envs.validation import check_n_agents


def majority_vote(answers: list[str | None]) -> str | None:
    """The most common answer up to equivalence; ties go to the earliest; ``None`` answers abstain."""
    groups: list[tuple[str, int]] = []
    for ans in answers:
        if ans is None:
            continue
        for k, (rep, count) in enumerate(groups):
            if answers_match(ans, rep):
                groups[k] = (rep, count + 1)
                break
        else:
            groups.append((ans, 1))
    return max(groups, key=lambda g: g[1])[0] if groups else None


class MathDebate(MathTask):
    """N solvers answer independently each round, then see each other's previous answers."""

    metadata = {"name": "marft/MathDebate-v1", "is_parallelizable": True, "render_modes": ["human", "ansi"]}

    def __init__(self, n_agents: int = 3, rounds: int = 2, feedback: bool = False, **kwargs: Any):
        n_agents = check_n_agents(n_agents)
        super().__init__([f"solver_{k}" for k in range(n_agents)], rounds=rounds, feedback=feedback, **kwargs)

    def answering_agents(self) -> list[str]:
        return list(self.possible_agents)

    def team_answer(self, answers: dict[str, str | None]) -> str | None:
        return majority_vote([answers[a] for a in self.answering_agents()])

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        result = super().end_round(actions)
        # A debate runs all its rounds unless feedback says the vote is already right.
        done = len(self.attempts) >= self.max_rounds or (self.feedback and self.attempts[-1]["correct"])
        result.terminations = dict.fromkeys(actions, done)
        return result

    def state_text(self) -> str:
        """The global state for a centralised critic: the problem and every solver's previous answer."""
        lines = [f"Problem: {self.problem.question}"]
        if self.attempts:
            last = self.attempts[-1]["actions"]
            lines.append(f"Round {len(self.attempts)} answers:")
            lines += [f"{a}: {last[a]}" for a in self.possible_agents if a in last]
        return "\n".join(lines)

    def observe_text(self, agent: str) -> str:
        lines = [f"Problem: {self.problem.question}"]
        if self.attempts:
            last = self.attempts[-1]["actions"]
            lines.append("Answers from the previous round:")
            lines += [f"{a}: {last[a]}" for a in self.possible_agents if a != agent and a in last]
            lines.append(f"Your previous answer: {last.get(agent, '')}")
            if self.feedback:
                lines.append(self.attempts_text().splitlines()[-1])
        return "\n".join(lines)
