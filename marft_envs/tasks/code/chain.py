"""``marft/CodeRepair-v0``: a chain of agents repairs a buggy Python function (locator -> fixer).

Each round, agent ``k`` sees the task — the numbered buggy program and a few of its tests (the
failing ones first) — the feedback on earlier attempts, and the same-round answers of every agent
before it in the chain. The last fixer's answer is the team's patch; the tests run in the sandbox.
``roles`` makes other chains, e.g. ``["locator", "tester", "fixer", "reviewer"]`` (a tester's asserts
and a locator's lines reach the fixer; a reviewer judges the patch). See
:mod:`marft_envs.tasks.code.base` for what each role is graded on.

Options: ``tasks`` (``"corpus"``, ``"humaneval"``, a file, or a TaskSource), ``split``, ``roles``,
``rounds`` and ``feedback``, ``credit`` (``"team"``, ``"last"``, ``"per_agent"``), ``reward``
(``"partial"``, ``"resolved"``), ``visible_tests``, ``timeout_s``, ``memory_mb`` (per test run), ``profile``.

Version history: the family's, in :mod:`marft_envs.tasks.code`.
"""

from __future__ import annotations

from typing import Any

from marft_envs.graph import DependencyGraph
from marft_envs.tasks.code.base import CodeRepairTask, Graded, role_of
from marft_envs.tasks.math.chain import agent_ids


class CodeRepairChain(CodeRepairTask):
    """Agents in a chain, each seeing its predecessors' answers; the last fixer's patch is graded."""

    metadata = {"name": "marft/CodeRepair-v0", "is_parallelizable": False, "render_modes": ["human", "ansi"]}

    def __init__(self, roles: list[str] | None = None, **kwargs: Any):
        roles = list(roles) if roles is not None else ["locator", "fixer"]
        if "fixer" not in roles:
            raise ValueError(f"roles {roles} have no 'fixer': someone must write the patch")
        if "reviewer" in roles and roles.index("reviewer") < roles.index("fixer"):
            raise ValueError(f"roles {roles}: a reviewer must come after a fixer, whose patch it reviews")
        super().__init__(agent_ids(roles), **kwargs)
        agents = self.possible_agents
        self._graph_all = DependencyGraph.from_parents(agents, {a: agents[:k] for k, a in enumerate(agents)})

    def round_graph(self) -> DependencyGraph:
        return self._graph_all

    def team_patch(self, actions: dict[str, str]) -> tuple[str | None, Graded, dict[str, Graded]]:
        last_fixer = [a for a in self.possible_agents if role_of(a) == "fixer" and a in actions][-1]
        team = self.grade(actions[last_fixer])
        return actions[last_fixer], team, {last_fixer: team}

    def observe_text(self, agent: str) -> str:
        lines = [self.task_text(), *self.feedback_lines()]
        said = [f"{p}: {self.round_actions[p]}" for p in self._graph_all.parents(agent) if p in self.round_actions]
        return "\n".join(lines + ([""] + said if said else []))
