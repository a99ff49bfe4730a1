"""``marft/MathCORY-v0``: CORY's pioneer and observer, two copies of one LLM, on a math problem.

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
evaluating each policy alone), ``problems``, ``split``, ``rounds`` and ``feedback``, ``profile``.

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

from marft_envs.core import RoundResult
from marft_envs.graph import DependencyGraph
from marft_envs.outcomes import SHARED_REWARD
from marft_envs.tasks.math.base import MathTask

AGENTS = ["solver_0", "solver_1"]


class MathCORY(MathTask):
    """A pioneer answers, an observer answers with the pioneer's answer as a reference; rewards are summed."""

    metadata = {"name": "marft/MathCORY-v0", "is_parallelizable": False, "render_modes": ["human", "ansi"]}
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
