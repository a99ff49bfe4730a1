"""``marft/CodeRepairSolo-v0``: one agent repairs a buggy Python function (the single-agent baseline).

The only agent, ``fixer_0``, sees the numbered buggy program, a few of its tests (the failing ones
first) and, with several rounds, the feedback on its earlier attempts; it answers with the whole
corrected function or a unified diff. It has a Gymnasium view: ``gymnasium.make("marft/CodeRepairSolo-v0")``.

Options: ``tasks``, ``split``, ``rounds`` and ``feedback``, ``reward``, ``visible_tests``,
``timeout_s``, ``memory_mb``, ``profile``.

Version history:
    v0: first release.
    v0, fixes kept under the same id (the same rewards for fixes that use the standard library): a
        program runs in a root of its own (the standard library and its working directory; no
        third-party packages, task data or checkout), under a syscall filter; text crossing the env is
        valid UTF-8.
    v0, additions under the same id (rewards unchanged): each round's infos carry ``shared_reward``
        (``marft_envs.outcomes.SHARED_REWARD``: the part of every agent's reward that all received alike,
        the team reward under ``credit="team"``), so the team's return counts it once, not once per agent.
    v0, the judge hardened (issue 38; every shipped task's solution and buggy program score as
        before): one of the program's objects is never compared with plain data nor asked whether it
        is true, and arithmetic on it stays its object (a value that says yes to every comparison no
        longer passes tolerance tests).
"""

from __future__ import annotations

from typing import Any

from marft_envs.tasks.code.base import CodeRepairTask, Graded


class CodeRepairSolo(CodeRepairTask):
    """One fixer, one patch per attempt."""

    metadata = {"name": "marft/CodeRepairSolo-v0", "is_parallelizable": True, "render_modes": ["human", "ansi"]}

    def __init__(self, **kwargs: Any):
        super().__init__(["fixer_0"], **kwargs)

    def team_patch(self, actions: dict[str, str]) -> tuple[str | None, Graded, dict[str, Graded]]:
        team = self.grade(actions["fixer_0"])
        return actions["fixer_0"], team, {"fixer_0": team}

    def observe_text(self, agent: str) -> str:
        return "\n".join([self.task_text(), *self.feedback_lines()])
