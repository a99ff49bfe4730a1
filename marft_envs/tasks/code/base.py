"""What the code-repair envs share: tasks, sandboxed grading of patches, and the attempts they feed back.

An episode is one task (a buggy program and its tests). Each round is one attempt by the team (the
attempts-with-feedback protocol of :mod:`marft_envs.tasks.attempts`): the team's patch is applied to
the buggy program and the tests run in the sandbox (:mod:`marft_envs.sandbox`, through a process-wide
cached :class:`~marft_envs.tasks.code.harness.TestRunner`). With ``rounds>1`` and ``feedback=True``
the agents see how the attempt did (tests passed, the first shown test that failed, the patch) and
try again until the bug is fixed or the attempts run out.

Roles and what each is graded on (``info["reward_components"]``, also ``own`` for ``credit="per_agent"``):

========  =================================================  ============================================
role      answers with                                       own score
========  =================================================  ============================================
locator   the wrong lines, ``Lines: 3, 7``                   F1 of its lines against the bug's lines
tester    extra ``assert`` lines                             fraction that pass on the fix and fail on the bug
fixer     the whole corrected function, or a unified diff    its own patch's reward
reviewer  ``ACCEPT`` or ``REJECT`` of the fixer's patch      1 if the verdict matches the tests
========  =================================================  ============================================

A tester's asserts run where neither program's text can be read (the judge's guarded mode), so its
score measures the programs' behaviour only.

The team reward is the team patch's :func:`~marft_envs.rewards.code.repair_reward`: the fraction of
tests passing (``reward="partial"``) or 1 only when all pass (``reward="resolved"``); a patch that does
not apply or parse, crashes or times out scores 0 and says why in ``info["status"]`` / ``info["reason"]``.

``env.branch()`` (tree sampling) copies only the episode (the task, the attempts, this round's
answers): the runner and its sandbox pool are process-wide and are never copied, and their cache
holds reports that depend only on the program and the tests.
"""

from __future__ import annotations

import ast
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marft_envs.core import RoundResult
from marft_envs.rewards.code import REWARD_MODES, extra_tests_score, locate_scores, parse_lines, parse_verdict, repair_reward, review_score
from marft_envs.sandbox import Limits
from marft_envs.tasks import profiles
from marft_envs.tasks.attempts import AttemptsTask
from marft_envs.tasks.code.harness import TestReport, TestRunner, runner_for
from marft_envs.tasks.code.patches import PatchError, apply_patch, extract_patch
from marft_envs.tasks.code.tasks import CodeTask, load_tasks
from marft_envs.tasks.profiles import role_of

ROLES = ("locator", "tester", "fixer", "reviewer")
MAX_FEEDBACK_PATCH_CHARS = 2000  # a runaway answer must not flood the next observation


def load_profile(profile: str | Path | dict) -> dict[str, Any]:
    """Role prompts: ``"default"`` (this family's shipped one), a path to a JSON file, or a dict."""
    return profiles.load_profile(profile, "marft_envs.tasks.code")


@dataclass
class Graded:
    """A patch's outcome: the program it made, its test report and its reward components."""

    status: str
    """``ok`` (the tests ran), ``no_patch``, ``syntax_error``, ``import_error``, ``missing_entry_point``,
    ``timeout`` or ``crash``."""
    reason: str = ""
    program: str | None = None
    report: TestReport | None = None
    components: dict[str, float] = field(default_factory=dict)

    @property
    def resolved(self) -> bool:
        return self.components.get("resolved", 0.0) == 1.0


class CodeRepairTask(AttemptsTask):
    """Base of the code-repair envs: one task per episode, sandboxed grading, attempts with feedback."""

    profile_package = "marft_envs.tasks.code"
    problem_type = CodeTask
    reset_options = ("problem", "task")

    def __init__(
        self,
        possible_agents: list[str],
        *,
        tasks: str | Any = "corpus",
        split: str = "train",
        profile: str | Path | dict = "default",
        rounds: int = 1,
        feedback: bool = True,
        credit: str = "team",
        reward: str = "partial",
        visible_tests: int = 3,
        timeout_s: float = 5.0,
        memory_mb: int = 512,
        render_mode: str | None = None,
        max_cycles: int | None = None,
    ):
        if reward not in REWARD_MODES:
            raise ValueError(f"unknown reward mode {reward!r}: use one of {list(REWARD_MODES)}")
        if visible_tests < 0:
            raise ValueError(f"visible_tests must be at least 0, got {visible_tests}")
        unknown = sorted({role_of(a) for a in possible_agents} - set(ROLES))
        if unknown:
            raise ValueError(f"unknown roles {unknown}: use {list(ROLES)}")
        super().__init__(
            possible_agents,
            profile=profile,
            rounds=rounds,
            feedback=feedback,
            credit=credit,
            render_mode=render_mode,
            max_cycles=max_cycles,
        )
        self.limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb)
        self.problems = load_tasks(tasks, split=split)
        self.reward_mode = reward
        self.visible_tests = visible_tests
        self.problem: CodeTask | None = None

    @property
    def runner(self) -> TestRunner:
        """The process-wide runner for this env's limits (not stored: copies of the env share it)."""
        return runner_for(self.limits)

    def problem_option(self, options: dict[str, Any]) -> CodeTask | None:
        """``options["problem"]``, or its other name here, ``options["task"]``."""
        return options.get("problem", options.get("task"))

    def state_text(self) -> str:
        return "\n".join([self.task_text(), *self.feedback_lines()])

    # -- what subclasses decide -------------------------------------------------------------------

    def team_patch(self, actions: dict[str, str]) -> tuple[str | None, Graded, dict[str, Graded]]:
        """The team's patch text this round (``None``: nobody gave one), its grade, and each fixer's grade."""
        raise NotImplementedError

    # -- observations -----------------------------------------------------------------------------

    def task_text(self) -> str:
        """The task as every agent sees it: the numbered program and the shown tests."""
        task = self.problem
        width = len(str(len(task.buggy.splitlines())))
        numbered = "\n".join(f"{k:>{width}} | {line}" for k, line in enumerate(task.buggy.splitlines(), 1))
        shown = self.shown_tests()
        lines = [f"Fix the bug in `{task.entry_point}` so that it passes its tests.", "", "Program:", numbered]
        if shown:
            lines += ["", f"Some of its tests ({len(shown)} of {len(task.tests)}):", *(task.tests[i] for i in shown)]
        return "\n".join(lines)

    def shown_tests(self) -> list[int]:
        """Indices of the tests shown to the agents: the failing ones first."""
        task = self.problem
        order = list(range(len(task.tests)))
        if task.fail_to_pass is not None:
            order = list(task.fail_to_pass) + [i for i in order if i not in task.fail_to_pass]
        return order[: self.visible_tests]

    def feedback_lines(self) -> list[str]:
        """How the earlier attempts went (empty on the first attempt or without feedback)."""
        if not self.feedback:
            return []
        lines = []
        for k, att in enumerate(self.attempts, 1):
            graded: Graded = att["graded"]
            if graded.status == "ok":
                report = graded.report
                line = f"Attempt {k}: the team's patch passed {sum(report.passed)} of {len(report.passed)} tests."
                failed = [i for i in self.shown_tests() if not report.passed[i]]
                if failed:
                    line += f" A shown test failed: {self.problem.tests[failed[0]]} ({report.messages[failed[0]]})"
            else:
                line = f"Attempt {k}: the team's patch scored 0: {graded.status.replace('_', ' ')} ({graded.reason})."
            lines.append(line)
        if self.attempts and self.attempts[-1]["patch"] is not None:
            lines += ["The team's last patch:", self.attempts[-1]["patch"][:MAX_FEEDBACK_PATCH_CHARS]]
        return lines

    # -- grading ----------------------------------------------------------------------------------

    def grade(self, patch_text: str | None) -> Graded:
        """Apply a patch to the buggy program and run the tests in the sandbox (cached)."""
        task = self.problem
        if patch_text is None:
            return Graded("no_patch", "no fixer answered", components=self._zero())
        patch = extract_patch(patch_text)
        try:
            program = apply_patch(task.buggy, patch, task.entry_point)
        except SyntaxError as err:
            return Graded("syntax_error", f"line {err.lineno}: {err.msg}", components=self._zero())
        except PatchError as err:
            return Graded("no_patch", str(err), components=self._zero())
        report = self.runner.run(program, task.tests, task.entry_point, task.setup, context=task.buggy)
        components = repair_reward(report.status, report.passed, task.fail_to_pass, task.pass_to_pass, self.reward_mode)
        return Graded(report.status, report.reason, program, report, components)

    def _zero(self) -> dict[str, float]:
        task = self.problem
        return repair_reward("none", [], task.fail_to_pass, task.pass_to_pass, self.reward_mode)

    def own_scores(self, actions: dict[str, str], team: Graded, graded: dict[str, Graded]) -> dict[str, dict]:
        """Per agent: ``own`` (its own score) and ``own_correct`` (1.0 when it got its job exactly right)."""
        task = self.problem
        out = {}
        for agent, text in actions.items():
            role = role_of(agent)
            if role == "locator":
                scores = locate_scores(parse_lines(text), task.bug_lines)
                out[agent] = {**scores, "own": scores["locate_f1"], "own_correct": scores["locate_exact"]}
            elif role == "tester":
                score = self._extra_tests_score(text)
                out[agent] = {"own": score, "own_correct": float(score == 1.0)}
            elif role == "reviewer":
                score = review_score(parse_verdict(text), team.resolved)
                out[agent] = {"own": score, "own_correct": score}
            else:
                mine = graded.get(agent) or self.grade(text)
                out[agent] = {"own": mine.components["reward"], "own_correct": float(mine.resolved)}
        return out

    def _extra_tests_score(self, text: str) -> float:
        task = self.problem
        tests = assert_lines(text)
        if not tests or task.solution is None:
            return 0.0
        # The asserts are the model's, the programs are the task's: each assert runs alone, in a process
        # that never held either program's text (judge.py), and in a random order of the two programs, so
        # that an assert that notices it ran before (a sandbox worker keeps earlier runs' output) learns nothing.
        programs = {"solution": task.solution, "buggy": task.buggy}
        order = ["solution", "buggy"] if secrets.randbelow(2) else ["buggy", "solution"]
        reports = {name: self.runner.run(programs[name], tests, task.entry_point, task.setup, untrusted="tests") for name in order}
        on_solution, on_buggy = reports["solution"], reports["buggy"]
        if on_solution.status != "ok":
            return 0.0
        buggy_passed = on_buggy.passed if on_buggy.status == "ok" else (False,) * len(tests)
        return extra_tests_score(on_solution.passed, buggy_passed)

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        patch, team, graded = self.team_patch(actions)
        own = self.own_scores(actions, team, graded)
        self.attempts.append({"actions": dict(actions), "patch": patch, "graded": team})
        team_reward = team.components["reward"]
        infos = {}
        for a in actions:
            infos[a] = {
                "reward_components": {"team": team_reward, **{k: v for k, v in team.components.items() if k != "reward"}, **own[a]},
                "status": team.status,
                "reason": team.reason,
                "solved": team.resolved,
            }
        return self.attempt_result(team.resolved, team_reward, {a: own[a]["own"] for a in actions}, infos)


def assert_lines(text: str) -> list[str]:
    """The test statements in a tester's answer: its code block's top-level statements that assert."""
    code = extract_patch(text).text
    try:
        tree = ast.parse(code)
        statements = [ast.get_source_segment(code, s) or ast.unparse(s) for s in tree.body]
    except SyntaxError:  # keep the lines that parse on their own
        statements = []
        for line in code.splitlines():
            try:
                ast.parse(line.strip())
                statements.append(line.strip())
            except SyntaxError:
                pass
    return [s for s in statements if s.lstrip().startswith("assert")]
