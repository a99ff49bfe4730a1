"""What the MATH envs share: problems, role prompts, attempts with feedback, grading and credit.

An episode is one problem. Each round is one attempt by the whole team. With ``rounds=1`` (single
pass) the episode ends after the first attempt; with ``rounds>1`` and ``feedback=True`` the team
is told whether its answer was right and tries again until it is right or out of attempts (the
MARFT paper's protocol). Subclasses say who the agents are, who sees whom, what each observes and
which agents' answers count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from marft_envs.core import FlexEnv, RoundResult
from marft_envs.tasks import profiles
from marft_envs.tasks.profiles import role_of
from marft_envs.rewards.credit import CREDIT_MODES, assign_credit
from marft_envs.rewards.math import answers_match, extract_answer
from marft_envs.tasks.math.problems import Problem, ProblemSource, load_problems

NO_ANSWER_NOTE = "no final answer found: give it as \\boxed{...}"


def load_profile(profile: str | Path | dict) -> dict[str, Any]:
    """Role prompts: ``"default"`` (this family's shipped one), a path to a JSON file, or a dict."""
    return profiles.load_profile(profile, "marft_envs.tasks.math")


class MathTask(FlexEnv):
    """Base of the MATH envs: one problem per episode, graded answers, attempts with feedback."""

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
    ):
        super().__init__(possible_agents, render_mode=render_mode)
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        if credit not in CREDIT_MODES:
            raise ValueError(f"unknown credit mode {credit!r}: use one of {list(CREDIT_MODES)}")
        self.problems = load_problems(problems, split=split)
        self.profile = load_profile(profile)
        missing = sorted({role_of(a) for a in possible_agents} - set(self.profile["roles"]))
        if missing:
            raise ValueError(f"the profile has no prompt for roles {missing}; add them under 'roles'")
        self.max_rounds = rounds
        self.feedback = feedback
        self.credit = credit
        self.problem: Problem | None = None
        self.attempts: list[dict[str, Any]] = []

    # -- FlexEnv hooks shared by the family -------------------------------------------------------

    def reset_task(self, options: dict[str, Any]) -> None:
        problem = options.get("problem")
        if problem is not None and not isinstance(problem, Problem):
            raise TypeError(f"options['problem'] must be a Problem, got {type(problem).__name__}")
        self.problem = problem or self.problems.sample(self.np_random)
        self.attempts = []

    def instructions(self, agent: str) -> str:
        return self.profile["roles"][role_of(agent)]

    def state_text(self) -> str:
        past = "\n".join(f"attempt {k + 1}: {a['answer']} ({'right' if a['correct'] else 'wrong'})"
                         for k, a in enumerate(self.attempts))
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

        done = solved or len(self.attempts) >= self.max_rounds or not self.feedback
        order = list(self.graph.order())
        rewards = assign_credit(self.credit, order, team_reward, {a: float(correct[a]) for a in order})
        infos = {}
        for a in order:
            info: dict[str, Any] = {
                "reward_components": {"team": team_reward, "own_correct": float(correct[a])},
                "answer": extracted[a],
                "team_answer": answer,
                "solved": solved,
            }
            if extracted[a] is None:
                info["parse"] = NO_ANSWER_NOTE
            infos[a] = info
        return RoundResult(rewards=rewards, terminations=dict.fromkeys(order, done), infos=infos)

    # -- text helpers ----------------------------------------------------------------------------

    def attempts_text(self) -> str:
        """Earlier attempts and their right/wrong feedback (empty on the first attempt)."""
        lines = []
        for k, att in enumerate(self.attempts):
            shown = att["answer"] if att["answer"] is not None else "no answer"
            lines.append(f"Attempt {k + 1}: the team answered {shown}, which is wrong. Try again.")
        return "\n".join(lines)
