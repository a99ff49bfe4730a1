"""``marft/CodeRepairVote-v0``: independent fixers each write a patch, then the patches vote.

Every round's dependency graph is empty — the fixers act independently on the same observation — so
this is a Dec-POMDP and has a PettingZoo Parallel view. The team's patch is the majority among the
fixers' candidate programs, compared by their syntax trees (formatting and comments do not split a
vote; patches that do not apply or parse abstain; ties go to the earliest fixer). The team reward is
the voted patch's reward; each fixer's own score is its own patch's reward (``credit="per_agent"``).
From the second round on (``rounds>1``), each fixer also sees the others' previous patches.

Options: ``n_agents`` (fixers, default 3), ``rounds``, ``feedback``, ``tasks``, ``split``, ``credit``,
``reward``, ``visible_tests``, ``timeout_s``, ``memory_mb``, ``profile``.

Version history: the family's, in :mod:`marft_envs.tasks.code`.
"""

from __future__ import annotations

import ast
from typing import Any

from marft_envs.tasks.code.base import MAX_FEEDBACK_PATCH_CHARS, CodeRepairTask, Graded
from marft_envs.validation import check_n_agents


def vote(programs: list[str | None]) -> int | None:
    """Index of the winning program: most votes by syntax tree, ties to the earliest; ``None`` if all abstain."""
    groups: dict[str, list[int]] = {}
    for k, program in enumerate(programs):
        if program is None:
            continue
        try:
            key = ast.dump(ast.parse(program))
        except SyntaxError:
            continue
        groups.setdefault(key, []).append(k)
    if not groups:
        return None
    return max(groups.values(), key=lambda members: (len(members), -members[0]))[0]


class CodeRepairVote(CodeRepairTask):
    """N fixers patch independently; the patches vote; everyone sees the others' patches next round."""

    metadata = {"name": "marft/CodeRepairVote-v0", "is_parallelizable": True, "render_modes": ["human", "ansi"]}

    def __init__(self, n_agents: int = 3, **kwargs: Any):
        n_agents = check_n_agents(n_agents)
        super().__init__([f"fixer_{k}" for k in range(n_agents)], **kwargs)

    def team_patch(self, actions: dict[str, str]) -> tuple[str | None, Graded, dict[str, Graded]]:
        fixers = [a for a in self.possible_agents if a in actions]
        graded = {a: self.grade(actions[a]) for a in fixers}  # the same program runs once (cached)
        winner = vote([graded[a].program for a in fixers])
        chosen = fixers[0 if winner is None else winner]  # all abstained: the first patch, graded as it is
        return actions[chosen], graded[chosen], graded

    def observe_text(self, agent: str) -> str:
        lines = [self.task_text(), *self.feedback_lines()]
        if self.attempts:
            last = self.attempts[-1]["actions"]
            others = [a for a in self.possible_agents if a != agent and a in last]
            if others:
                lines.append("The other fixers' previous patches:")
                lines += [f"{a}: {last[a][:MAX_FEEDBACK_PATCH_CHARS]}" for a in others]
        return "\n".join(lines)
