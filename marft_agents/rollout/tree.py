"""Tree rollouts: at every agent node of the round graph, K candidates from one context (``grpo.grouping=tree``).

The plain rollout engine (:mod:`marft_agents.rollout.layered`) plays G whole episodes per problem, so a later
agent almost never sees the same context twice and its "group" compares answers to different
questions. A tree rollout plays one *trunk* per problem and branches it at every agent node
(:meth:`marft_envs.core.FlexEnv.branch`):

1. Layer by layer through each round's graph, every ready agent of every live trunk gets ``width``
   (K) candidates sampled from its one observation — one batched generate for all nodes of all trees
   (the engine groups requests by adapter).
2. Each candidate is played on its own branch of the trunk. A candidate whose action closes the round
   is scored by that round's team reward (the sum of every agent's reward, as GRPO's reward-to-go
   scores a step); an upstream candidate (the round goes on after it) is scored by the mean team
   reward of ``continuations`` (M) cheap downstream continuations: its branch copied M times and the
   rest of the round sampled once per copy (TreeRPO: a node's value is the mean of its children's).
3. The continuations' first layer (the agents that act right after the candidate) is kept: the M
   samples of one downstream agent after one upstream candidate share that exact prompt, so they form
   one sibling group of that agent, key ``(problem, round, agent, node, k)`` (``node`` the upstream
   node, ``k`` its candidate), each scored by its copy's team reward. Later continuation layers see
   contexts that differ copy by copy (groups of one, no signal): their tokens are counted, not kept.
4. The trunk continues from one candidate (``pick``): ``"best"`` takes the highest score — a closing
   candidate's own reward, an upstream one's mean continuation reward — ties broken at random;
   ``"random_upstream"`` takes the best closing candidate but a uniformly random upstream one (the
   upstream choice stays a sample of the policy); ``"sample"`` always takes a random one.

Every candidate and kept continuation becomes an :class:`~marft_agents.rollout.episode.AgentStep` with its
exact token ids and behaviour log-probs, tagged with its sibling group — siblings share the exact prompt —
and its ``score``. A tree is returned as one :class:`~marft_agents.rollout.episode.Episode`: ``steps`` is
the chosen path (rewards and infos from the env, as a plain rollout records them) and ``branches`` the
candidates that were not chosen and the kept continuations; ``extra_tokens`` counts the continuation
tokens no agent-step holds. Later rounds are played from the chosen candidate only, so a sibling's score
is its own round's reward.

Episode indices come in consecutive groups of ``width`` (the trainer's ``group_size``), one tree per
group, reset with ``seed_of`` of the group's first index (the index the tree's episode keeps).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marft_agents.models.sampling import Generation, Request
from marft_agents.rollout.episode import AgentStep, Episode, text_fields
from marft_agents.rollout.layered import RolloutEngine
from marft_envs.branching import checked_branch, require_branching
from marft_envs.outcomes import SOLVED

PURPOSE = "grpo.grouping=tree"
"""What an env that cannot branch is refused for, in its one-line error."""
PICKS = ("best", "random_upstream", "sample")
"""How the trunk continues from a node's candidates (see the module docstring)."""


def is_continuation(step: AgentStep) -> bool:
    """Whether ``step`` is a kept continuation sample (its group names the upstream candidate), not a node's
    candidate."""
    return step.group is not None and len(step.group) == 5


@dataclass
class _Tree:
    """One problem's trunk while it is being played."""

    index: int
    """The episode index the tree keeps (the first of its group of ``width``)."""
    env: Any
    """The env the chosen path is in (a branch of the slot's env after the first node)."""
    rng: np.random.Generator
    """Draws the picks (seeded from the tree's seed, so a run replays)."""
    steps: list[AgentStep] = field(default_factory=list)
    round_steps: list[AgentStep] = field(default_factory=list)
    branches: list[AgentStep] = field(default_factory=list)
    nodes: int = 0
    extra_tokens: int = 0
    owned: bool = False
    """Whether ``env`` is a branch this walk made (closed when replaced), not one of the caller's envs."""


@dataclass
class _Node:
    """One agent node of one tree: its observation and the candidates drawn for it."""

    tree: _Tree
    agent: str
    observation: Any
    prompt: list[int]
    state: str | None
    first: int
    """Index of the node's first candidate in the layer's generation."""


class TreeRollout:
    """Collect one tree per problem: ``width`` candidates at every agent node, the trunk going on from one."""

    def __init__(self, rollout: RolloutEngine, *, width: int, continuations: int, pick: str = "best"):
        if width < 2:
            raise ValueError(f"tree sampling needs at least 2 candidates per node (grpo.group_size), got {width}")
        if continuations < 1:
            raise ValueError(
                "grpo.tree_continuations must be at least 1 (an upstream candidate is scored by its continuations), "
                f"got {continuations}"
            )
        if pick not in PICKS:
            raise ValueError(f"grpo.tree_pick must be one of {list(PICKS)}, got {pick!r}")
        self.rollout = rollout
        self.width = width
        self.continuations = continuations
        self.pick = pick

    @property
    def timings(self) -> dict[str, float]:
        """Seconds generating, building prompts and stepping envs (the wrapped engine's counters)."""
        return self.rollout.timings

    def reset_timings(self) -> None:
        self.rollout.reset_timings()

    def collect(
        self,
        envs: Sequence[Any],
        episodes: Sequence[int],
        *,
        seed_of: Callable[[int], int] = lambda e: e,
        options_of: Callable[[int], dict | None] = lambda e: None,
        progress: Callable[[int], None] | None = None,
    ) -> list[Episode]:
        """One tree per ``width`` consecutive indices of ``episodes``, at most ``len(envs)`` trees at a time."""
        indices = list(episodes)
        if len(indices) % self.width:
            raise ValueError(
                f"tree sampling: {len(indices)} episodes do not split into trees of {self.width} "
                "candidates; set episodes_per_update to a multiple of grpo.group_size"
            )
        for env in envs:
            require_branching(env, PURPOSE)
        roots = indices[:: self.width]
        finished: list[Episode] = []
        for start in range(0, len(roots), len(envs)):
            wave = roots[start : start + len(envs)]
            trees = []
            for env, index in zip(envs, wave):
                env.reset(seed=seed_of(index), options=options_of(index))
                trees.append(_Tree(index=index, env=env, rng=np.random.default_rng(seed_of(index))))
            finished += self._walk(trees, progress)
        finished.sort(key=lambda e: e.index)
        return finished

    # -- the walk ------------------------------------------------------------------------------------

    def _walk(self, trees: list[_Tree], progress: Callable[[int], None] | None) -> list[Episode]:
        live, finished = list(trees), []
        while live:
            # One layer: every ready agent of every live trunk, ``width`` identical requests each.
            nodes: list[_Node] = []
            requests: list[Request] = []
            t0 = time.perf_counter()
            for tree in live:
                env = tree.env
                state = env.state() if self.rollout.record_state else None
                for agent in sorted(env.ready_agents(), key=env.possible_agents.index):
                    observation = env.observe(agent)
                    prompt = self.rollout.policy.prompt(observation, agent)
                    nodes.append(_Node(tree, agent, observation, prompt, state, len(requests)))
                    requests += [self.rollout.request(prompt, agent, episode=tree.index)] * self.width
            self.timings["prompts"] += time.perf_counter() - t0
            gen = self.rollout.generate_layer(requests)
            # Agents of one layer do not see each other: expand the j-th node of every tree together,
            # so the j+1-th branches from a trunk that holds the j-th's chosen action.
            slot: dict[int, int] = {}
            by_slot: list[list[_Node]] = []
            for node in nodes:
                j = slot.setdefault(id(node.tree), 0)
                slot[id(node.tree)] += 1
                if j == len(by_slot):
                    by_slot.append([])
                by_slot[j].append(node)
            for group in by_slot:
                self._expand(group, gen)
            for tree in list(live):
                if not tree.env.agents:
                    live.remove(tree)
                    finished.append(self._finish(tree))
                    if progress:
                        progress(self.width)
        return finished

    def _expand(self, nodes: list[_Node], gen: Generation) -> None:
        """Play every candidate of ``nodes`` on its own branch, score it, and move each trunk on."""
        version = self.rollout.engine.version
        t0 = time.perf_counter()
        played = []  # per node: [(branch, step, round result or None)] for its candidates
        for node in nodes:
            tree = node.tree
            key = (tree.index // self.width, tree.env.round, node.agent, tree.nodes)
            tree.nodes += 1
            siblings = []
            for k in range(node.first, node.first + self.width):
                branch = checked_branch(tree.env, PURPOSE)
                step = AgentStep(
                    episode=tree.index,
                    round=tree.env.round,
                    agent=node.agent,
                    prompt=node.prompt,
                    response=gen.responses[k],
                    token_logps=gen.token_logps[k],
                    text=gen.texts[k],
                    state=node.state,
                    version=version,
                    observation=text_fields(node.observation),
                    group=key,
                )
                result = branch.step({node.agent: step.text})
                if result is not None:  # this candidate closed the round: it has a reward of its own
                    step.score = float(sum(result.rewards.values()))
                    step.reward = result.rewards.get(node.agent, 0.0)
                    step.info = result.infos.get(node.agent, {})
                siblings.append((branch, step, result))
            played.append(siblings)
        self.timings["env"] += time.perf_counter() - t0
        upstream = [
            (branch, step, node.tree, (*step.group[:2], step.group[3], k))
            for node, siblings in zip(nodes, played)
            for k, (branch, step, result) in enumerate(siblings)
            if result is None
        ]
        scores = self._continue([u[0] for u in upstream], [u[2] for u in upstream], [u[3] for u in upstream])
        for (_, step, _, _), score in zip(upstream, scores):
            step.score = score
        for node, siblings in zip(nodes, played):
            self._move_on(node.tree, siblings)

    def _move_on(self, tree: _Tree, siblings: list) -> None:
        """Continue ``tree`` from the picked candidate; the others become ``branches``."""
        upstream = any(result is None for _, _, result in siblings)
        if self.pick == "best" or (self.pick == "random_upstream" and not upstream):
            scores = np.array([step.score for _, step, _ in siblings])
            chosen = int(tree.rng.choice(np.flatnonzero(scores == scores.max())))
        else:
            chosen = int(tree.rng.integers(len(siblings)))
        for k, (branch, step, _) in enumerate(siblings):
            if k != chosen:
                tree.branches.append(step)
                branch.close()
        branch, step, result = siblings[chosen]
        if tree.owned:
            tree.env.close()
        tree.env, tree.owned = branch, True
        tree.round_steps.append(step)
        if result is not None:  # the round is over on the trunk: attach its rewards as a plain rollout does
            for s in tree.round_steps:
                s.reward = result.rewards.get(s.agent, 0.0)
                s.info = result.infos.get(s.agent, {})
            tree.round_steps[-1].round_end = True
            tree.steps += tree.round_steps
            tree.round_steps = []

    def _continue(self, branches: list[Any], owners: list[_Tree], places: list[tuple]) -> list[float]:
        """Mean team reward of the rest of the round, sampled ``continuations`` times from each branch.

        ``owners[i]`` is the tree of ``branches[i]`` and ``places[i]`` its candidate's ``(problem, round, node, k)``.
        The first layer of every copy joins the owner's ``branches``: the M samples of one agent after one candidate
        share its prompt, a sibling group ``(problem, round, agent, node, k)`` scored by each copy's team reward.
        Later layers' tokens (contexts that differ copy by copy) count in the owner's ``extra_tokens``.
        """
        policy, version = self.rollout.policy, self.rollout.engine.version
        totals = np.zeros(len(branches))
        copies = [(i, checked_branch(b, PURPOSE)) for i, b in enumerate(branches) for _ in range(self.continuations)]
        kept: list[list[AgentStep]] = [[] for _ in copies]  # per copy: its first layer's steps
        live = list(range(len(copies)))  # indices into copies still inside their round
        first = True
        while live:
            batch, requests = [], []
            t0 = time.perf_counter()
            for c in live:
                i, env = copies[c]
                state = env.state() if first and self.rollout.record_state else None
                for agent in sorted(env.ready_agents(), key=env.possible_agents.index):
                    observation = env.observe(agent)
                    prompt = policy.prompt(observation, agent)
                    batch.append((c, agent, prompt, observation, state))
                    requests.append(self.rollout.request(prompt, agent, episode=owners[i].index))
            self.timings["prompts"] += time.perf_counter() - t0
            gen = self.rollout.generate_layer(requests)
            t0 = time.perf_counter()
            actions: dict[int, dict[str, str]] = {}
            for k, (c, agent, prompt, observation, state) in enumerate(batch):
                actions.setdefault(c, {})[agent] = gen.texts[k]
                i = copies[c][0]
                if not first:
                    owners[i].extra_tokens += len(gen.responses[k])
                    continue
                problem, round_, node, candidate = places[i]
                kept[c].append(
                    AgentStep(
                        episode=owners[i].index,
                        round=round_,
                        agent=agent,
                        prompt=prompt,
                        response=gen.responses[k],
                        token_logps=gen.token_logps[k],
                        text=gen.texts[k],
                        state=state,
                        version=version,
                        observation=text_fields(observation),
                        group=(problem, round_, agent, node, candidate),
                    )
                )
            still = []
            for c in live:
                i, env = copies[c]
                if c not in actions:  # would loop forever: the env broke the layered contract
                    raise RuntimeError(
                        f"tree sampling: a continuation of {type(env).__name__} has no ready agent but its round has "
                        "not ended"
                    )
                result = env.step(actions[c])
                if result is None:
                    still.append(c)
                    continue
                team = float(sum(result.rewards.values()))
                totals[i] += team
                for s in kept[c]:  # the copy's round is over: its first-layer steps are scored by it
                    s.score, s.reward, s.info = team, result.rewards.get(s.agent, 0.0), result.infos.get(s.agent, {})
                env.close()
            live = still
            first = False
            self.timings["env"] += time.perf_counter() - t0
        for c, (i, _) in enumerate(copies):
            owners[i].branches += kept[c]
        return list(totals / self.continuations)

    def _finish(self, tree: _Tree) -> Episode:
        if tree.steps:
            tree.steps[-1].done = True
        if tree.owned:
            tree.env.close()
        solved = tree.steps[-1].info.get(SOLVED) if tree.steps else None
        return Episode(
            index=tree.index,
            steps=tree.steps,
            solved=None if solved is None else bool(solved),
            branches=tree.branches,
            extra_tokens=tree.extra_tokens,
        )
