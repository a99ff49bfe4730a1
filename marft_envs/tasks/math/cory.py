"""``marft/MathCORY-v1``: CORY's pioneer and observer, two copies of one LLM, on a math problem.

Two agents, ``solver_0`` and ``solver_1`` (two adapters on one base: "the other you"). Each round
one of them is the **pioneer**, which sees only the problem; the other is the **observer**, which
sees the problem and the pioneer's answer as a reference (``D(pioneer, observer) = 1``). Both
receive the cooperative reward ``r(q, a_pioneer) + r(q, a_observer)``, each term grading that
agent's own answer against the problem's (never the observer's merged prompt). The team's answer
is the observer's.

The roles are state of the env, not of the agents: :meth:`MathCORY.set_pioneer` (or
``reset(options={"pioneer": ...})``) picks the pioneer, so a trainer's role swap flips the graph
between training iterations and every agent keeps its own adapter and optimizer.

Options: ``pioneer`` (the first pioneer, default ``"solver_0"``), ``reference`` (False: the empty
graph, both answer the problem alone — CORY's "no reference" ablation, and the protocol for
evaluating each policy alone), ``problems``, ``split`` (``"train"``, ``"validation"`` or ``"test"``: disjoint by
arithmetic, :mod:`marft_envs.tasks.math.synthetic`),
``rounds`` and ``feedback``, ``profile``.

``marft/MathCORY-v0`` (:mod:`marft_envs.tasks.math.cory_v0`) is this env on the first
release's leaky synthetic split by uid.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from typing import Any

from marft_envs.core import RoundResult
from marft_envs.graph import DependencyGraph
from marft_envs.outcomes import SHARED_REWARD
from marft_envs.tasks.math.base import MathTask

AGENTS = ["solver_0", "solver_1"]


class MathCORY(MathTask):
    """A pioneer answers, an observer answers with the pioneer's answer as a reference; rewards are summed."""

    metadata = {"name": "marft/MathCORY-v1", "is_parallelizable": False, "render_modes": ["human", "ansi"]}
    reset_options = ("problem", "pioneer")

    def __init__(self, pioneer: str = "solver_0", reference: bool = True, **kwargs: Any):
        super().__init__(list(AGENTS), **kwargs)
        self.reference = reference
        self.pioneer = ""
        self.set_pioneer(pioneer)
        self._episode_pioneer = pioneer  # the roles of the episode under way (fixed until reset)

    def set_pioneer(self, agent: str) -> None:
        """Make ``agent`` the pioneer (and the other the observer) from the next ``reset`` on."""
        if agent not in self.possible_agents:
            raise ValueError(f"the pioneer must be one of {self.possible_agents}, got {agent!r}")
        self.pioneer = agent

    @property
    def observer(self) -> str:
        return next(a for a in self.possible_agents if a != self._episode_pioneer)

    def reset_task(self, options: dict[str, Any]) -> None:
        super().reset_task(options)
        pioneer = options.get("pioneer", self.pioneer)
        if pioneer not in self.possible_agents:
            raise ValueError(f"options['pioneer'] must be one of {self.possible_agents}, got {pioneer!r}")
        self._episode_pioneer = pioneer

    def round_graph(self) -> DependencyGraph:
        if not self.reference:
            return DependencyGraph.empty(self.possible_agents)
        return DependencyGraph.from_parents(self.possible_agents, {self.observer: [self._episode_pioneer]})

    def answering_agents(self) -> list[str]:
        return [self._episode_pioneer, self.observer]  # the observer's answer is the team's

    def observe_text(self, agent: str) -> str:
        lines = [f"Problem: {self.problem.question}"]
        if self.attempts:
            lines.append(self.attempts_text())
        pioneer = self._episode_pioneer
        if self.reference and agent != pioneer and pioneer in self.round_actions:
            lines.append(f"{pioneer}: {self.round_actions[pioneer]}")
        return "\n".join(lines)

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        result = super().end_round(actions)
        # The cooperative reward: the sum of both agents' own task rewards, given to each of them.
        own = {a: result.infos[a]["reward_components"]["own_correct"] for a in actions}
        total = float(sum(own.values()))
        total += sum(result.infos[a]["reward_components"].get("format", 0.0) for a in actions)  # format_reward
        result.rewards = dict.fromkeys(actions, total)
        for a in actions:
            result.infos[a]["reward_components"]["cooperative"] = total
            result.infos[a][SHARED_REWARD] = total  # every agent's reward is the same sum: the team's return counts it once
            result.infos[a]["role"] = "pioneer" if a == self._episode_pioneer else "observer"
        return result
