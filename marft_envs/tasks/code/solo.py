"""``marft/CodeRepairSolo-v0``: one agent repairs a buggy Python function (the single-agent baseline).

The only agent, ``fixer_0``, sees the numbered buggy program, a few of its tests (the failing ones
first) and, with several rounds, the feedback on its earlier attempts; it answers with the whole
corrected function or a unified diff. It has a Gymnasium view: ``gymnasium.make("marft/CodeRepairSolo-v0")``.

Options: ``tasks``, ``split``, ``rounds`` and ``feedback``, ``reward``, ``visible_tests``,
``timeout_s``, ``memory_mb``, ``profile``.

Version history: the family's, in :mod:`marft_envs.tasks.code`.
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
