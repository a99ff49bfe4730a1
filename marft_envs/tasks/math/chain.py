"""``marft/MathChain-v0``: a chain of agents solves a math problem (reasoner -> actor).

The MARFT setting. Each round, agent ``k`` sees the problem, the earlier attempts' feedback and the
same-round outputs of every agent before it in the chain (its parents are all earlier
agents, MARFT's ``a^{1:i-1}``); the last agent's ``\\boxed{}`` answer is
the team's. Roles come from a profile (``profile=``); ``n_agents`` makes longer chains
(``reasoner_0 -> reasoner_1 -> ... -> actor_0``) or pass ``roles=[...]`` explicitly.

Options: ``problems`` (``"synthetic"``, a file, ``"hub:<name>"``, or a ProblemSource), ``split``,
``rounds`` and ``feedback`` (single pass, or several attempts with right/wrong feedback), ``credit``
(``"team"``, ``"last"``, ``"per_agent"``).

Version history:
    v0: first release.
    v0, fixes kept under the same id (the same observations and rewards on ordinary input): text
        crossing the env is valid UTF-8 (lone surrogates become U+FFFD); the grader reads sympy's
        ``\\left[\\begin{matrix}...\\end{matrix}\\right]`` (and ``\\left(...\\right)``) matrices as bmatrix
        (pmatrix), and its extraction is linear in the answer's length. Every step keeps the grader's
        time promise (0.1 s a call, ``marft_envs.rewards.math``): a response is read from its last
        65,536 characters and no exact value passes 4,096 bits; an action longer than the action
        space's 2^20 characters is refused (``EnvUsageError``), as is every misuse; ``n_agents`` above 64 (``MAX_AGENTS``)
        or not an integer is refused in one line (it ran out of memory or failed deep inside).
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

    metadata = {"name": "marft/MathChain-v0", "is_parallelizable": False, "render_modes": ["human", "ansi"]}

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
