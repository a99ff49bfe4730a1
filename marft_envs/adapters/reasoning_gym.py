"""reasoning-gym's procedural tasks as FlexEnvs (reasoning-gym==0.1.25): ``marft/ReasoningGym-v0`` and ``-Chain-v0``.

Any of reasoning-gym's datasets (``task=``, e.g. ``"basic_arithmetic"``, ``"chain_sum"``,
``"leg_counting"``; ``task_config`` passes its config fields) becomes an env; each episode is one
item, drawn from ``self.np_random`` among ``size`` items of the dataset generated with the split's
seed (``split="train"`` or ``"test"``: seeds 10^9 apart, so held-out evaluation sees other items).

- ``marft/ReasoningGym-v0``: one agent, ``solver_0`` (a Gymnasium view too), answers the question.
- ``marft/ReasoningGym-Chain-v0``: ``reasoner_0 -> actor_0`` as in ``marft/MathChain-v0``: the
  reasoner works the problem, the actor sees its text this round and gives the answer.

The answer is what the graded agent puts in ``<answer>...</answer>`` (reasoning-gym's
``extract_answer``; with ``answer_tag=None`` the whole reply); the reward is reasoning-gym's own
``score_answer`` for that item, in [0, 1], and ``solved`` is a score of 1. ``credit`` (``"team"``,
``"last"``, ``"per_agent"``) says who of the chain gets it. One round per episode.

Registered only where ``reasoning_gym`` is importable (:func:`register_envs`, through this
package's ``marft.envs`` entry point, or ``import marft_envs.adapters.reasoning_gym``); reasoning-gym
itself is imported when an env is built (it takes seconds), never by ``import marft_envs``.

Version history:
    v0: first release (reasoning-gym 0.1.25).
    v0, additions under the same id (rewards unchanged): each round's infos carry ``shared_reward``
        (``marft_envs.outcomes.SHARED_REWARD``: the part of every agent's reward that all received alike,
        the team reward under ``credit="team"``), so the team's return counts it once, not once per agent.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from marft_envs import outcomes
from marft_envs.core import FlexEnv, RoundResult
from marft_envs.graph import DependencyGraph
from marft_envs.registration import register
from marft_envs.rewards.credit import assign_credit, shared_part

SPLIT_SEEDS = {"train": 0, "test": 1_000_000_000}
"""The dataset seed of each split. reasoning-gym draws item ``idx`` from ``Random(seed + idx)``, so the
splits' seeds are far apart: their items come from disjoint random streams for any ``size`` below 10^9."""

REASONER_INSTRUCTIONS = "Work the problem out step by step. Another agent reads your reasoning and gives the final answer."


class ReasoningGymTask(FlexEnv):
    """One reasoning-gym item per episode, answered by the last agent of a chain (one agent by default)."""

    metadata = {"name": "marft/ReasoningGym-v0", "is_parallelizable": False, "render_modes": ["human", "ansi"]}
    reset_options = ()

    def __init__(
        self,
        task: str = "basic_arithmetic",
        task_config: dict[str, Any] | None = None,
        agents: tuple[str, ...] = ("solver_0",),
        split: str = "train",
        size: int = 1000,
        answer_tag: str | None = "answer",
        credit: str = "team",
        render_mode: str | None = None,
    ):
        if importlib.util.find_spec("reasoning_gym") is None:
            raise ImportError("reasoning-gym envs need reasoning_gym: pip install 'marft[adapters]' (reasoning-gym==0.1.25)")
        import reasoning_gym
        from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer

        if split not in SPLIT_SEEDS:
            raise ValueError(f"split must be one of {sorted(SPLIT_SEEDS)}, got {split!r}")
        if not isinstance(size, int) or not 1 <= size <= SPLIT_SEEDS["test"]:
            raise ValueError(f"size must be an int in [1, {SPLIT_SEEDS['test']}], got {size!r}")
        if task not in reasoning_gym.factory.DATASETS:
            raise ValueError(
                f"unknown reasoning-gym task {task!r}; e.g. basic_arithmetic, chain_sum, leg_counting "
                f"(all {len(reasoning_gym.factory.DATASETS)}: reasoning_gym.factory.DATASETS)"
            )
        try:
            self.dataset = reasoning_gym.create_dataset(task, **{**dict(task_config or {}), "seed": SPLIT_SEEDS[split], "size": size})
        except (TypeError, ValueError, AssertionError) as err:
            raise ValueError(f"task_config for {task!r} is not valid: {err}") from None
        super().__init__(list(agents), render_mode=render_mode)
        self.task, self.split, self.answer_tag, self.credit = task, split, answer_tag, credit
        self._system_prompt, self._extract = SYSTEM_PROMPTS["default"], extract_answer
        self.entry: dict[str, Any] | None = None

    def reset_task(self, options: dict[str, Any]) -> None:
        self.entry = self.dataset[int(self.np_random.integers(len(self.dataset)))]

    def instructions(self, agent: str) -> str:
        return self._system_prompt if agent == self.possible_agents[-1] else REASONER_INSTRUCTIONS

    def observe_text(self, agent: str) -> str:
        lines = [f"Question: {self.entry['question']}"]
        for parent in self.possible_agents[: self.possible_agents.index(agent)]:  # its chain parents, this round
            if parent in self.round_actions:
                lines.append(f"{parent}: {self.round_actions[parent]}")
        return "\n".join(lines)

    def round_graph(self) -> DependencyGraph:
        return DependencyGraph.chain(self.possible_agents)

    def answer(self, reply: str) -> str | None:
        """The answer in a reply: the last ``<answer_tag>`` block (None without one), or the whole reply."""
        return reply.strip() if self.answer_tag is None else self._extract(reply, tag_name=self.answer_tag)

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        graded = self.possible_agents[-1]
        score = float(self.dataset.score_answer(self.answer(actions[graded]), self.entry))
        rewards = assign_credit(self.credit, self.possible_agents, score, {graded: score})
        infos = outcomes.outcome_infos(
            actions,
            solved=score == 1.0,
            own_correct={graded: score},
            components={"score": score},
            **{outcomes.SHARED_REWARD: shared_part(self.credit, score)},
        )
        return RoundResult(rewards=rewards, terminations=dict.fromkeys(actions, True), infos=infos)

    def state_text(self) -> str:
        return f"Question: {self.entry['question']}\nAnswer: {self.entry['answer']}"


class ReasoningGymChain(ReasoningGymTask):
    """A reasoner and an actor on one reasoning-gym item: the actor sees the reasoning and answers."""

    metadata = {"name": "marft/ReasoningGym-Chain-v0", "is_parallelizable": False, "render_modes": ["human", "ansi"]}

    def __init__(self, **kwargs: Any):
        super().__init__(agents=("reasoner_0", "actor_0"), **kwargs)


def register_envs() -> list[str]:
    """Register the reasoning-gym ids if reasoning_gym is importable (without importing it)."""
    if importlib.util.find_spec("reasoning_gym") is None:
        return []
    register("marft/ReasoningGym-v0", ReasoningGymTask, gym=True, eval_kwargs={"split": "test"})
    register("marft/ReasoningGym-Chain-v0", ReasoningGymChain, eval_kwargs={"split": "test"})
    return ["marft/ReasoningGym-v0", "marft/ReasoningGym-Chain-v0"]


register_envs()
