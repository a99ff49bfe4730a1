"""What the MATH envs share: problems, graded ``\\boxed{}`` answers, and the attempts they feed back.

An episode is one problem. Each round is one attempt by the whole team (the attempts-with-feedback
protocol of :mod:`marft_envs.tasks.attempts`): with ``rounds>1`` and ``feedback=True`` the team is
told that its answer was wrong and tries again. Subclasses say who the agents are, who sees whom,
what each observes and which agents' answers count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from marft_envs.core import RoundResult
from marft_envs.rewards.math_attempt import grade_attempt
from marft_envs.tasks import profiles
from marft_envs.tasks.attempts import AttemptsTask
from marft_envs.tasks.math.problems import Problem, ProblemSource, load_problems

NO_ANSWER_NOTE = "no final answer found: give it as \\boxed{...}"


def load_profile(profile: str | Path | dict) -> dict[str, Any]:
    """Role prompts: ``"default"`` (this family's shipped one), a path to a JSON file, or a dict."""
    return profiles.load_profile(profile, "marft_envs.tasks.math")


class MathTask(AttemptsTask):
    """Base of the MATH envs: one problem per episode, graded answers, attempts with feedback."""

    profile_package = "marft_envs.tasks.math"
    problem_type = Problem
    reset_options = ("problem", "difficulty")
    split_by = "arithmetic"
    """What a ``"synthetic"`` problem spec's split hashes: its arithmetic; ``"uid"`` in the ``-v0`` ids, as released."""

    def __init__(
        self,
        possible_agents: list[str],
        *,
        problems: str | ProblemSource = "synthetic",
        split: str = "train",
        profile: str | Path | dict = "default",
        rounds: int = 1,
        feedback: bool = True,
        credit: str = "team",
        render_mode: str | None = None,
        max_cycles: int | None = None,
        format_reward: float = 0.0,
    ):
        super().__init__(
            possible_agents,
            profile=profile,
            rounds=rounds,
            feedback=feedback,
            credit=credit,
            render_mode=render_mode,
            max_cycles=max_cycles,
        )
        if isinstance(format_reward, bool) or not isinstance(format_reward, (int, float)) or not 0 <= format_reward <= 1:
            raise ValueError(f"format_reward must be a number in [0, 1] (0: off), got {format_reward!r}")
        self.problems = load_problems(problems, split=split, split_by=self.split_by)
        self.problem: Problem | None = None
        self.format_reward = float(format_reward)
        """Weight of the gold-free bonus for a parsable ``\\boxed{}`` answer (``rewards.format``); 0: off."""

    def difficulties(self) -> tuple:
        """The problem source's levels (synthetic levels, a MATH file's ``level`` column); empty if it has none."""
        return tuple(self.problems.levels)

    def problem_option(self, options: dict[str, Any]) -> Any:
        """``options["problem"]``, else a problem of ``options["difficulty"]``, else None (draw one)."""
        if options.get("problem") is None and options.get("difficulty") is not None:
            return self.problems.sample_at(self.np_random, options["difficulty"])
        return options.get("problem")

    def state_text(self) -> str:
        past = "\n".join(f"attempt {k + 1}: {a['answer']} ({'right' if a['correct'] else 'wrong'})" for k, a in enumerate(self.attempts))
        return f"Problem: {self.problem.question}\n{past}".rstrip()

    # -- what subclasses decide -------------------------------------------------------------------

    def answering_agents(self) -> list[str]:
        """Agents whose final answers count towards the team reward."""
        raise NotImplementedError

    def team_answer(self, answers: dict[str, str | None]) -> str | None:
        """The team's answer this round (default: the last answering agent's)."""
        return answers[self.answering_agents()[-1]]

    # -- grading ---------------------------------------------------------------------------------

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        # The formula is marft_envs/rewards/math_attempt.py's; here the attempt is recorded and credited.
        grade = grade_attempt(actions, self.problem.answer, self.answering_agents(), self.team_answer, self.format_reward)
        self.attempts.append({"actions": dict(actions), "answer": grade.team_answer, "correct": grade.solved})

        infos = {}
        for a in actions:
            info: dict[str, Any] = {
                "reward_components": {"team": grade.team, "own_correct": float(grade.correct[a])},
                "answer": grade.answers[a],
                "team_answer": grade.team_answer,
                "solved": grade.solved,
            }
            if grade.answers[a] is None:
                info["parse"] = NO_ANSWER_NOTE
            infos[a] = info
        result = self.attempt_result(grade.solved, grade.team, {a: float(grade.correct[a]) for a in actions}, infos)
        for a, bonus in grade.format.items():  # the answering agents' bonus for a readable box, right or wrong
            infos[a]["reward_components"]["format"] = bonus
            result.rewards[a] = result.rewards.get(a, 0.0) + bonus
        return result

    # -- text helpers ----------------------------------------------------------------------------

    def attempts_text(self) -> str:
        """Earlier attempts and their right/wrong feedback (empty on the first attempt)."""
        lines = []
        for k, att in enumerate(self.attempts):
            shown = att["answer"] if att["answer"] is not None else "no answer"
            lines.append(f"Attempt {k + 1}: the team answered {shown}, which is wrong. Try again.")
        return "\n".join(lines)
