"""``marft/MathSolo-v1``: one agent solves a math problem (the single-agent baseline).

The only agent, ``solver_0``, sees the problem (and, with several rounds, the right/wrong feedback
on its earlier attempts) and answers with ``\\boxed{}``. It has a Gymnasium view:
``gymnasium.make("marft/MathSolo-v1")``.

Options: ``problems``, ``split`` (``"train"``, ``"validation"`` or ``"test"``: disjoint by arithmetic,
:mod:`marft_envs.tasks.math.synthetic`), ``rounds`` and ``feedback``, ``profile``.

``marft/MathSolo-v0`` (:mod:`marft_envs.tasks.math.solo_v0`) is this env on the first
release's leaky synthetic split by uid.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from typing import Any

from marft_envs.tasks.math.base import MathTask


class MathSolo(MathTask):
    """One solver, one answer per attempt."""

    metadata = {"name": "marft/MathSolo-v1", "is_parallelizable": True, "render_modes": ["human", "ansi"]}

    def __init__(self, **kwargs: Any):
        super().__init__(["solver_0"], **kwargs)

    def answering_agents(self) -> list[str]:
        return ["solver_0"]

    def observe_text(self, agent: str) -> str:
        lines = [f"Problem: {self.problem.question}"]
        if self.attempts:
            lines.append(self.attempts_text())
        return "\n".join(lines)
