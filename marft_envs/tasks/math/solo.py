"""``marft/MathSolo-v0``: one agent solves a math problem (the single-agent baseline).

The only agent, ``solver_0``, sees the problem (and, with several rounds, the right/wrong feedback
on its earlier attempts) and answers with ``\\boxed{}``. It has a Gymnasium view:
``gymnasium.make("marft/MathSolo-v0")``.

Options: ``problems``, ``split``, ``rounds`` and ``feedback``, ``profile``.

Version history:
    v0: first release.
    v0, fixes kept under the same id (the same observations and rewards on ordinary input): text
        crossing the env is valid UTF-8 (lone surrogates become U+FFFD); the grader reads sympy's
        ``\\left[\\begin{matrix}...\\end{matrix}\\right]`` (and ``\\left(...\\right)``) matrices as bmatrix
        (pmatrix), and its extraction is linear in the answer's length. Every step keeps the grader's
        time promise (0.1 s a call, ``marft_envs.rewards.math``): a response is read from its last
        65,536 characters and no exact value passes 4,096 bits; an action longer than the action
        space's 2^20 characters is refused (``EnvUsageError``), as is every misuse.
    v0, additions under the same id (default behaviour unchanged): ``profile="general-v0"`` selects
        role prompts written for general instruct models (the answer format stated plainly, one
        worked example); see ``marft_envs/tasks/math/profiles/``. ``problems="synthetic:0"``: level 1's
        wordings with numbers from 2 to 20 (opt-in; the default mix is unchanged).
    v0, additions under the same id (default behaviour unchanged): ``format_reward=w`` (0 by default) adds
        ``w * rewards.format.boxed_format(action)`` to each answering agent's reward (component ``format``);
        ``difficulties()`` lists the problem source's levels and ``reset(options={"difficulty": d})`` plays one.
    v0, additions under the same id (rewards unchanged): each round's infos carry ``shared_reward``
        (``marft_envs.outcomes.SHARED_REWARD``: the part of every agent's reward that all received alike,
        the team reward under ``credit="team"``), so the team's return counts it once, not once per agent.
    v0, additions under the same id (default behaviour unchanged): ``profile="general-v1"``, general-v0 with each
        example laid out as the observation is (the teammate's working on its own line, ``reasoner_0: ...``) and the
        actor told to reply with the final ``\\boxed{}`` only.
"""

from __future__ import annotations

from typing import Any

from marft_envs.tasks.math.base import MathTask


class MathSolo(MathTask):
    """One solver, one answer per attempt."""

    metadata = {"name": "marft/MathSolo-v0", "is_parallelizable": True, "render_modes": ["human", "ansi"]}

    def __init__(self, **kwargs: Any):
        super().__init__(["solver_0"], **kwargs)

    def answering_agents(self) -> list[str]:
        return ["solver_0"]

    def observe_text(self, agent: str) -> str:
        lines = [f"Problem: {self.problem.question}"]
        if self.attempts:
            lines.append(self.attempts_text())
        return "\n".join(lines)
