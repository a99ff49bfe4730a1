"""``marft/MathJigsaw-v2``: each agent sees only part of a math word problem; the team must pool them.

A task that needs its team. The problem is a short story of counts (:mod:`marft_envs.tasks.math.jigsaw_problems`)
cut into one share per agent: ``sharer_0`` sees ``Tom has 17 apples.``, ``answerer_0`` sees ``Tom buys
25 more apples. How many apples does Tom have now?``. Every share holds at least one quantity the
answer depends on, so no agent can answer from its own share: alone, it can only guess a quantity it
never saw (at least 19 values at level 1, many more at levels 2-3). The sharers pass their quantities
on; the answerer combines them and answers with ``\\boxed{}``, and its answer is the team's.

Agents: ``sharer_0 ... sharer_{n-2}, answerer_0`` (``n_agents``, default 2). Who hears whom is the
round's dependency graph (``graph=``):

- ``"chain"`` (default): each agent hears the agent before it (``sharer_0 -> sharer_1 -> ... ->
  answerer_0``), so a sharer passes on its predecessor's message as well as its own share;
- ``"star"``: every sharer -> the answerer; the sharers act independently (one layer).

Observations are text: ``Your part of the problem: ...``, the feedback on earlier attempts, then one
``Message from <agent>: <its action>`` per parent. Role prompts come from the profile
``"jigsaw-v0"`` (``marft_envs/tasks/math/profiles/jigsaw-v0.json``, for general instruct models).

Rewards: the answerer's answer is graded by :mod:`marft_envs.rewards.math` (its ``\\boxed{}``, else
the grader's fallbacks) as in every MATH env, and the team reward is 1 when it is right. ``credit``
splits it (``"team"``, ``"last"``, ``"per_agent"``). A sharer's own score (``own_correct``, its
``per_agent`` reward) is 1 when its message passes on exactly the numbers it must, as a multiset in
any order: those of its share and, in a chain, of every earlier share (its ancestors'); the answerer's
is its answer's. Numbers are read with their sign (:func:`numbers_in`): ``-27``, ``−27`` or ``minus 27``
is not the share's 27. (``marft/MathJigsaw-v0``, :mod:`marft_envs.tasks.math.jigsaw_v0`, read the
digits alone and paid ``-27`` for 27.) Infos carry ``solved``, ``team_answer`` and ``reward_components`` (``team``,
``own_correct``), and the answerer's ``answer`` (and ``parse`` when it gave none).

Options: ``n_agents``, ``graph``, ``levels`` (one or more of 1-3, default all: how many quantities
and how large; ``difficulties()`` lists them and ``reset(options={"difficulty": d})`` plays one),
``split`` (``"train"``, ``"validation"`` or ``"test"``, disjoint by arithmetic: numbers and answer), ``rounds`` and ``feedback`` (attempts
with right/wrong feedback, as MathChain), ``credit``, ``profile``, ``format_reward``,
``render_mode``, ``max_cycles``.

``marft/MathJigsaw-v1`` (:mod:`marft_envs.tasks.math.jigsaw_v1`) is this env on the uid split (train and
test only; a reordered story could fall on both sides).

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from marft_envs.core import RoundResult
from marft_envs.graph import DependencyGraph
from marft_envs.outcomes import OWN_CORRECT, REWARD_COMPONENTS
from marft_envs.tasks.math.base import MathTask
from marft_envs.tasks.math.jigsaw_problems import LEVELS, JigsawMath, JigsawProblem
from marft_envs.validation import MAX_AGENTS

GRAPHS = ("chain", "star")
MINUS_SIGNS = "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
"""Characters read as a minus sign right before a number's digits: hyphen-minus, the Unicode hyphens and
dashes, the minus sign, and their small and full-width forms."""
_NUMBER = re.compile(rf"(?:(?P<sign>[{MINUS_SIGNS}])|\b(?P<word>minus|negative)\s*)?(?P<digits>\d+)", re.IGNORECASE)


def numbers_in(message: str, *, signed: bool = True) -> list[int | str]:
    """The numbers written in ``message``, in order: runs of digits, negative after a minus sign.

    ``signed``: a minus sign (any of :data:`MINUS_SIGNS`) written right before the digits, or the word
    ``minus`` or ``negative`` before them, makes the number negative (``"-27"``, ``"minus 27"`` -> -27;
    ``"44-14"`` -> 44, -14: a sharer passes numbers on, it does not subtract them); a spaced dash
    (``"17 - 3"``, a list's ``"- 3"``) is punctuation. Unsigned (``marft/MathJigsaw-v0``): the digits
    alone. A run of digits too long for ``int`` stays a string: no quantity is that long.
    """
    out: list[int | str] = []
    for found in _NUMBER.finditer(message):
        digits = found["digits"]
        try:
            value: int | str = int(digits)
        except ValueError:  # past Python's int-from-text digit limit (4,300)
            value = digits
        negative = signed and (found["sign"] or found["word"])
        out.append((-value if isinstance(value, int) else "-" + value) if negative else value)
    return out


def passes_on(message: str, quantities: list[int], *, signed: bool = True) -> bool:
    """Whether the numbers written in ``message`` are exactly ``quantities`` (as a multiset, any order).

    ``signed``: read each number with its sign (:func:`numbers_in`), as ``marft/MathJigsaw-v1`` and ``-v2`` do.
    """
    return Counter(numbers_in(message, signed=signed)) == Counter(quantities)


class MathJigsaw(MathTask):
    """Sharers pass on their parts of a word problem; the answerer, who cannot solve it alone, answers."""

    metadata = {"name": "marft/MathJigsaw-v2", "is_parallelizable": False, "render_modes": ["human", "ansi"]}
    problem_type = JigsawProblem
    signed_numbers = True
    """Whether a sharer's numbers are read with their sign (v1 on); ``marft/MathJigsaw-v0`` read digits alone."""

    def __init__(
        self,
        n_agents: int = 2,
        graph: str = "chain",
        levels: int | tuple[int, ...] = tuple(LEVELS),
        split: str = "train",
        profile: str | Path | dict = "jigsaw-v0",
        rounds: int = 1,
        feedback: bool = True,
        credit: str = "team",
        format_reward: float = 0.0,
        render_mode: str | None = None,
        max_cycles: int | None = None,
    ):
        if not isinstance(n_agents, (int, np.integer)) or isinstance(n_agents, bool) or not 2 <= n_agents <= MAX_AGENTS:
            raise ValueError(f"n_agents must be at least 2 (sharers and one answerer) and at most {MAX_AGENTS}, got {n_agents!r}"[:200])
        if graph not in GRAPHS:
            raise ValueError(f"graph must be one of {list(GRAPHS)}, got {graph!r}")
        agents = [f"sharer_{k}" for k in range(int(n_agents) - 1)] + ["answerer_0"]
        super().__init__(
            agents,
            problems=JigsawMath(len(agents), levels, split, split_by=self.split_by),
            split=split,
            profile=profile,
            rounds=rounds,
            feedback=feedback,
            credit=credit,
            render_mode=render_mode,
            max_cycles=max_cycles,
            format_reward=format_reward,
        )
        self.graph_kind = graph
        """``"chain"`` or ``"star"``: who hears whom (the same every round)."""
        parents = {a: agents[k - 1 : k] for k, a in enumerate(agents)} if graph == "chain" else {agents[-1]: agents[:-1]}
        self._graph_all = DependencyGraph.from_parents(agents, parents)

    def reset_task(self, options: dict[str, Any]) -> None:
        super().reset_task(options)
        if len(self.problem.shares) != len(self.possible_agents):
            raise ValueError(
                f"options['problem'] has {len(self.problem.shares)} shares but the env has {len(self.possible_agents)} agents: "
                "pass a problem with one share per agent"
            )

    def round_graph(self) -> DependencyGraph:
        return self._graph_all

    def answering_agents(self) -> list[str]:
        return [self.possible_agents[-1]]

    def observe_text(self, agent: str) -> str:
        lines = [f"Your part of the problem: {self.problem.shares[self.possible_agents.index(agent)]}"]
        if self.attempts:
            lines.append(self.attempts_text())
        lines += [f"Message from {p}: {self.round_actions[p]}" for p in self._graph_all.parents(agent) if p in self.round_actions]
        return "\n".join(lines)

    def must_pass_on(self, agent: str) -> list[int]:
        """The quantities ``agent``'s message must carry: its share's and every ancestor's (what it can know)."""
        index = self.possible_agents.index
        known, stack = {agent}, [agent]
        while stack:
            for parent in self._graph_all.parents(stack.pop()):
                if parent not in known:
                    known.add(parent)
                    stack.append(parent)
        return [q for a in sorted(known, key=index) for q in self.problem.quantities[index(a)]]

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        result = super().end_round(actions)  # the answerer graded, the attempt recorded, credit assigned
        for agent in self.possible_agents[:-1]:
            if agent not in actions:
                continue
            score = float(passes_on(actions[agent], self.must_pass_on(agent), signed=self.signed_numbers))
            info = result.infos[agent]
            info[REWARD_COMPONENTS][OWN_CORRECT] = score
            info.pop("answer", None)  # a sharer gives no answer: its message is graded on what it passes on
            info.pop("parse", None)
            if self.credit == "per_agent":
                result.rewards[agent] = score
        return result
