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
from marft_envs.rewards.format import boxed_format
from marft_envs.rewards.math import answers_match, extract_answer
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
        self.problems = load_problems(problems, split=split)
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
        gold = self.problem.answer
        extracted = {a: extract_answer(text) for a, text in actions.items()}
        correct = {a: ans is not None and answers_match(ans, gold) for a, ans in extracted.items()}
        answering = [a for a in self.answering_agents() if a in actions]
        team_reward = sum(correct[a] for a in answering) / max(len(answering), 1)
        answer = self.team_answer({a: extracted[a] for a in answering})
        solved = answer is not None and answers_match(answer, gold)
        self.attempts.append({"actions": dict(actions), "answer": answer, "correct": solved})

        infos = {}
        for a in actions:
            info: dict[str, Any] = {
                "reward_components": {"team": team_reward, "own_correct": float(correct[a])},
                "answer": extracted[a],
                "team_answer": answer,
                "solved": solved,
            }
            if extracted[a] is None:
                info["parse"] = NO_ANSWER_NOTE
            infos[a] = info
        result = self.attempt_result(solved, team_reward, {a: float(correct[a]) for a in actions}, infos)
        if self.format_reward > 0:  # the answering agents' bonus for a readable box, right or wrong
            for a in answering:
                bonus = self.format_reward * boxed_format(actions[a])
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
