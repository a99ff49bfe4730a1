"""``marft/MathChain-v1``: a chain of agents solves a math problem (reasoner -> actor).

The MARFT setting. Each round, agent ``k`` sees the problem, the earlier attempts' feedback and the
same-round outputs of every agent before it in the chain (its parents are all earlier
agents, MARFT's ``a^{1:i-1}``); the last agent's ``\\boxed{}`` answer is
the team's. Roles come from a profile (``profile=``); ``n_agents`` makes longer chains
(``reasoner_0 -> reasoner_1 -> ... -> actor_0``) or pass ``roles=[...]`` explicitly.

Options: ``problems`` (``"synthetic"``, a file, ``"hub:<name>"``, or a ProblemSource), ``split``
(``"train"``, ``"validation"`` or ``"test"``: disjoint by arithmetic, :mod:`marft_envs.tasks.math.synthetic`),
``rounds`` and ``feedback`` (single pass, or several attempts with right/wrong feedback), ``credit``
(``"team"``, ``"last"``, ``"per_agent"``).

``marft/MathChain-v0`` (:mod:`marft_envs.tasks.math.chain_v0`) is this env on the first
release's leaky synthetic split by uid.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from marft_envs.graph import DependencyGraph
from marft_envs.tasks.math.base import MathTask
from marft_envs.validation import MAX_AGENTS, check_n_agents


def agent_ids(roles: list[str]) -> list[str]:
    """Number agents per role in order: ``["reasoner", "reasoner", "actor"]`` -> ``reasoner_0, reasoner_1, actor_0``."""
    seen: Counter[str] = Counter()
    ids = []
    for role in roles:
        ids.append(f"{role}_{seen[role]}")
        seen[role] += 1
    return ids


class MathChain(MathTask):
    """Agents in a chain, each seeing its predecessors' outputs; the last one answers."""

    metadata = {"name": "marft/MathChain-v1", "is_parallelizable": False, "render_modes": ["human", "ansi"]}

    def __init__(self, n_agents: int | None = None, roles: list[str] | None = None, **kwargs: Any):
        if roles is None:
            n = check_n_agents(2 if n_agents is None else n_agents)
            roles = ["reasoner"] * (n - 1) + ["actor"]
        elif n_agents is not None and n_agents != len(roles):
            raise ValueError(f"n_agents={n_agents} but {len(roles)} roles were given; pass one of them")
        elif len(roles) > MAX_AGENTS:
            raise ValueError(f"{len(roles)} roles: a chain holds at most {MAX_AGENTS} agents")
        super().__init__(agent_ids(list(roles)), **kwargs)
        # Agent k sees every earlier agent's output, a^{1:k-1}, as in MARFT's sequential decomposition.
        agents = self.possible_agents
        self._graph_all = DependencyGraph.from_parents(agents, {a: agents[:k] for k, a in enumerate(agents)})

    def round_graph(self) -> DependencyGraph:
        return self._graph_all

    def answering_agents(self) -> list[str]:
        return [self.possible_agents[-1]]

    def observe_text(self, agent: str) -> str:
        lines = [f"Problem: {self.problem.question}"]
        if self.attempts:
            lines.append(self.attempts_text())
        lines += [f"{p}: {self.round_actions[p]}" for p in self._graph_all.parents(agent) if p in self.round_actions]
        return "\n".join(lines)
