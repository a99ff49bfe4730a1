"""Tree sampling (``grpo.grouping=tree``): the sibling advantages by hand, the tree walk, the refusal, a training run.

Every expected number is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import marft_envs
from marft_agents.algorithms.advantages import agent_scaled
from marft_agents.algorithms.grpo import grpo_advantages, training_steps, tree_group_stats, tree_groups
from marft_agents.engines.base import Engine
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Generation, Sampling
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.rollout.tree import TreeRollout
from marft_envs import DependencyGraph, FlexEnv, RoundResult

EPS = 1e-6


class ParityChain(FlexEnv):
    """writer_0 -> judge_0 for two rounds; the team scores 1 when the judge's answer has an even length.

    A reward every random model spreads (response lengths vary), so trees have signal without a trained model.
    """

    metadata = {"name": "tests/ParityChain-v0", "is_parallelizable": False, "render_modes": ["ansi"]}

    def __init__(self, render_mode=None):
        super().__init__(["writer_0", "judge_0"], render_mode=render_mode)

    def reset_task(self, options):
        self.topic, self.turn = int(self.np_random.integers(1, 10)), 0

    def observe_text(self, agent):
        if agent == "writer_0":
            return f"Write about {self.topic} (turn {self.turn})."
        return f"The writer said: {self.round_actions.get('writer_0', '')}. Judge it."

    def round_graph(self):
        return DependencyGraph.from_parents(self.possible_agents, {"judge_0": ["writer_0"]})

    def end_round(self, actions):
        self.turn += 1
        reward = float(len(actions["judge_0"]) % 2 == 0)
        return RoundResult(
            rewards=dict.fromkeys(actions, reward), terminations=dict.fromkeys(actions, self.turn == 2), infos={a: {} for a in actions}
        )


class RemoteChain(ParityChain):
    """The same task whose state cannot be copied (as a remote session's)."""

    metadata = {**ParityChain.metadata, "name": "tests/RemoteChain-v0"}
    branchable = False


class ParityPair(FlexEnv):
    """voter_0 and voter_1 act at once (an empty graph), one round; the team scores 1 when their lengths sum even."""

    metadata = {"name": "tests/ParityPair-v0", "is_parallelizable": True, "render_modes": ["ansi"]}

    def __init__(self, render_mode=None):
        super().__init__(["voter_0", "voter_1"], render_mode=render_mode)

    def reset_task(self, options):
        self.topic = int(self.np_random.integers(1, 10))

    def observe_text(self, agent):
        return f"Vote on {self.topic}."

    def round_graph(self):
        return DependencyGraph.from_parents(self.possible_agents, {})

    def end_round(self, actions):
        reward = float(sum(len(a) for a in actions.values()) % 2 == 0)
        return RoundResult(
            rewards=dict.fromkeys(actions, reward), terminations=dict.fromkeys(actions, True), infos={a: {} for a in actions}
        )


marft_envs.register("tests/ParityChain-v0", ParityChain)
marft_envs.register("tests/RemoteChain-v0", RemoteChain)
marft_envs.register("tests/ParityPair-v0", ParityPair)


# ------------------------------------------------------------------------------------------- maths


def step(tree: int, agent: str, node: int, score: float, prompt=(1,)) -> AgentStep:
    return AgentStep(
        episode=tree,
        round=0,
        agent=agent,
        prompt=list(prompt),
        response=[],
        token_logps=torch.zeros(0),
        text="",
        group=(tree, 0, agent, node),
        score=score,
    )


def two_trees() -> list[Episode]:
    """Two trees of K=3 on a writer -> judge chain; the first sibling of each node is the chosen one."""
    scores = {0: {"writer_0": [2.0, 0.0, 1.0], "judge_0": [2.0, 2.0, 0.0]}, 1: {"writer_0": [0.0, 0.0, 0.0], "judge_0": [2.0, 0.0, 0.0]}}
    episodes = []
    for tree, nodes in scores.items():
        siblings = {a: [step(tree, a, n, x, prompt=(n, tree)) for x in xs] for n, (a, xs) in enumerate(nodes.items())}
        episodes.append(
            Episode(
                index=tree,
                steps=[siblings["writer_0"][0], siblings["judge_0"][0]],
                solved=None,
                branches=siblings["writer_0"][1:] + siblings["judge_0"][1:],
            )
        )
    return episodes


def test_tree_advantages_hand_computed():
    episodes = two_trees()
    agents = [s.agent for s in training_steps(episodes)]
    # training order per tree: chosen writer, chosen judge, then the branches (writer 2, writer 3, judge 2, judge 3)
    assert agents == ["writer_0", "judge_0", "writer_0", "writer_0", "judge_0", "judge_0"] * 2
    adv = grpo_advantages(episodes, group_size=3, grouping="tree", gamma=1.0, eps=EPS)
    # tree 0 writer [2, 0, 1]: mean 1, std sqrt(2/3) = 0.8164966 -> [1, -1, 0] / 0.8164966 = [1.2247449, -1.2247449, 0]
    # tree 0 judge  [2, 2, 0]: mean 4/3, std sqrt(8/9) = 0.9428090 -> [2/3, 2/3, -4/3] / 0.9428090
    #                                                               = [0.7071068, 0.7071068, -1.4142136]
    # tree 1 writer [0, 0, 0]: no spread -> exactly 0
    # tree 1 judge  [2, 0, 0]: mean 2/3, std 0.9428090 -> [1.4142136, -0.7071068, -0.7071068]
    w, j1, j2 = 1 / (0.8164966 + EPS), (2 / 3) / (0.9428090 + EPS), (4 / 3) / (0.9428090 + EPS)
    expected = [w, j1, -w, 0.0, j1, -j2, 0.0, j2, 0.0, 0.0, -j1, -j1]
    assert_close(adv, torch.tensor(expected), atol=1e-5, rtol=0)

    per_agent = grpo_advantages(episodes, group_size=3, grouping="tree", gamma=1.0, eps=EPS, normalize="agent")
    # the baselines stay the sibling means; the scale is each agent's std over the whole batch:
    # writer scores [2, 0, 1, 0, 0, 0]: mean 0.5, var (2.25 + 0.25 + 0.25 + 3 * 0.25) / 6 = 0.5833333, std 0.7637626
    # judge scores  [2, 2, 0, 2, 0, 0]: mean 1, std 1
    w = 1 / (0.7637626 + EPS)
    a, b = (2 / 3) / (1 + EPS), (4 / 3) / (1 + EPS)
    expected = [w, a, -w, 0.0, a, -b, 0.0, b, 0.0, 0.0, -a, -a]
    assert_close(per_agent, torch.tensor(expected), atol=1e-5, rtol=0)


def test_agent_scaled_hand_computed():
    rewards = torch.tensor([1.0, 0.0, 3.0, 3.0])
    groups = torch.tensor([0, 0, 1, 1])
    agents = torch.tensor([0, 0, 0, 1])
    # centred by group: [0.5, -0.5, 0, 0]; agent 0's rewards [1, 0, 3]: mean 4/3, std sqrt(14/9) = 1.2472191
    # agent 1 has one reward: std 0 -> its centred 0 stays 0 (0 / eps)
    s = 1.2472191 + EPS
    assert_close(agent_scaled(rewards, groups, agents, EPS), torch.tensor([0.5 / s, -0.5 / s, 0.0, 0.0]), atol=1e-6, rtol=0)


def test_agent_normalisation_with_agent_round_grouping_hand_computed():
    from agent_helpers import episode

    episodes = [
        episode(0, [[("a", 1.0), ("b", 1.0)]]),
        episode(1, [[("a", 0.0), ("b", 0.0)]]),  # problem 0
        episode(2, [[("a", 1.0), ("b", 1.0)]]),
        episode(3, [[("a", 1.0), ("b", 1.0)]]),
    ]  # problem 1
    # scores (the round's sum): problem 0 -> 2, 0 for each agent ; problem 1 -> 2, 2
    # group (problem 0, a, round 0): [2, 0] centred [1, -1] ; problem 1's groups: no spread -> 0
    # agent a's scores over the batch [2, 0, 2, 2]: mean 1.5, std sqrt((0.25 + 2.25 + 0.25 + 0.25) / 4) = 0.8660254
    adv = grpo_advantages(episodes, group_size=2, grouping="agent_round", gamma=1.0, eps=EPS, normalize="agent")
    x = 1 / (0.8660254 + EPS)
    assert_close(adv, torch.tensor([x, x, -x, -x, 0.0, 0.0, 0.0, 0.0]), atol=1e-5, rtol=0)
    # the group's own std (1) gives +-1 instead
    group = grpo_advantages(episodes, group_size=2, grouping="agent_round", gamma=1.0, eps=EPS)
    assert_close(group, torch.tensor([1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 0.0]), atol=1e-5, rtol=0)


def test_grpo_refuses_unknown_tree_options(tiny_policy):
    from marft_agents.algorithms.grpo import GRPO, GRPOConfig

    with pytest.raises(ValueError, match="GRPOConfig.normalize must be one of"):
        GRPO(tiny_policy, GRPOConfig(normalize="batch"), temperature=1.0)
    with pytest.raises(ValueError, match="normalize=agent needs grpo.grouping=agent_round or tree"):
        GRPO(tiny_policy, GRPOConfig(normalize="agent"), temperature=1.0)
    with pytest.raises(ValueError, match="GRPOConfig.tree_pick must be one of"):
        GRPO(tiny_policy, GRPOConfig(grouping="tree", tree_pick="worst"), temperature=1.0)
    algo = GRPO(tiny_policy, GRPOConfig(grouping="tree", group_size=3, tree_continuations=1), temperature=1.0)
    rollout = RolloutEngine(tiny_policy, Sampling(1.0, 4))
    tree = algo.collector(rollout)
    assert isinstance(tree, TreeRollout) and (tree.width, tree.continuations, tree.pick) == (3, 1, "best")
    assert GRPO(tiny_policy, GRPOConfig(), temperature=1.0).collector(rollout) is rollout


def test_a_sibling_group_with_different_prompts_is_refused():
    episodes = two_trees()
    episodes[0].branches[0].prompt = [99]
    with pytest.raises(ValueError, match="holds different prompts"):
        grpo_advantages(episodes, group_size=3, grouping="tree", gamma=1.0)
    plain = [Episode(index=0, steps=[AgentStep(0, 0, "writer_0", [], [], torch.zeros(0), "")], solved=None)]
    with pytest.raises(ValueError, match="needs episodes from a tree rollout"):
        grpo_advantages(plain, group_size=3, grouping="tree", gamma=1.0)


def test_a_hand_made_tree_with_continuation_groups_hand_computed():
    # One tree, K = 2, M = 2, one round of writer -> judge. The writer's candidates w0, w1 were each continued by
    # two judge samples: w0's scored [2, 0] (mean 1), w1's [0, 0] (mean 0), so the trunk went on from w0, whose
    # node then drew two judge candidates scored [0, 2].
    def cont(k, score):
        s = step(0, "judge_0", 0, score, prompt=(7, k))
        s.group = (0, 0, "judge_0", 0, k)  # (problem, round, agent, upstream node, candidate)
        return s

    w0, w1 = step(0, "writer_0", 0, 1.0), step(0, "writer_0", 0, 0.0)
    j0, j1 = step(0, "judge_0", 1, 0.0, prompt=(7, 0)), step(0, "judge_0", 1, 2.0, prompt=(7, 0))
    conts = [cont(0, 2.0), cont(0, 0.0), cont(1, 0.0), cont(1, 0.0)]
    tree = Episode(index=0, steps=[w0, j0], solved=None, branches=[w1, j1, *conts])
    steps = training_steps([tree])
    assert steps == [w0, j0, w1, j1, *conts]
    adv = grpo_advantages([tree], group_size=2, grouping="tree", gamma=1.0, eps=EPS)
    # writer node [1, 0]: mean 0.5, std 0.5 -> [+1, -1]; judge node [0, 2]: mean 1, std 1 -> [-1, +1];
    # w0's continuations [2, 0]: mean 1, std 1 -> [+1, -1]; w1's [0, 0]: no spread -> [0, 0]
    x, y = 0.5 / (0.5 + EPS), 1 / (1 + EPS)
    assert_close(adv, torch.tensor([x, -y, -x, y, y, -y, 0.0, 0.0]), atol=1e-6, rtol=0)
    scores, groups = tree_groups(steps)
    stats = tree_group_stats(steps, scores, groups, ["writer_0", "judge_0"])
    # 4 groups: writer node, judge node, two continuation groups; only w1's continuations have no spread
    assert stats == {
        "grpo/zero_spread_groups": 0.25,
        "tree/nodes": 2.0,
        "tree/continuation_groups": 2.0,
        "tree/informative_groups/writer_0": 1.0,
        "tree/informative_groups/judge_0": 2.0,
    }
    # the run's signal diagnostics (and its no-signal warning) read the same sibling groups, not the one trunk per problem
    from marft_agents.signal.diagnostics import signal_metrics

    assert signal_metrics([tree], group_size=2)["signal/zero_spread_frac"] == 0.25


# ------------------------------------------------------------------------------------------- the walk


class Scripted(Engine):
    """Answers every request with ``texts[k % len(texts)]`` (k: its place in the call); log-probs of zero."""

    def __init__(self, tokenizer, texts: list[str]):
        super().__init__()
        self.tokenizer, self.texts, self.sizes = tokenizer, texts, []

    def generate(self, requests, sampling):
        self.calls += 1
        self.sizes.append(len(requests))
        texts = [self.texts[k % len(self.texts)] for k in range(len(requests))]
        ids = [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        return Generation(responses=ids, token_logps=[torch.zeros(len(i)) for i in ids], texts=texts)


@pytest.fixture(scope="module")
def tiny_policy(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    return LaMASPolicy(model, tokenizer, ["writer_0", "judge_0"])


def test_tree_walk_tags_siblings_batches_layers_and_continues_from_the_best(tiny_policy):
    K, M = 3, 2
    # In a call of K requests per node, the k-th candidate of every node says texts[k]: "ab" (even: reward 1),
    # "a" and "abc" (odd: 0). A continuation call answers its first request "a", the next "ab", ...
    engine = Scripted(tiny_policy.tokenizer, ["a", "ab", "abc"])
    rollout = RolloutEngine(tiny_policy, Sampling(1.0, 8), engine=engine)
    envs = [marft_envs.make("tests/ParityChain-v0") for _ in range(2)]
    trees = TreeRollout(rollout, width=K, continuations=M, pick="best").collect(envs, range(2 * K), seed_of=lambda i: i // K)
    assert [e.index for e in trees] == [0, K]
    # per round: one call for the writers' layer (2 trees x K), one for their continuations
    # (2 trees x K candidates x M copies), one for the judges' layer; two rounds
    assert engine.sizes == [2 * K, 2 * K * M, 2 * K] * 2
    size = {t: len(tiny_policy.tokenizer.encode(t, add_special_tokens=False)) for t in ("a", "ab", "abc")}
    for p, e in enumerate(trees):
        assert [(s.agent, s.round) for s in e.steps] == [("writer_0", 0), ("judge_0", 0), ("writer_0", 1), ("judge_0", 1)]
        assert e.steps[-1].done and [s.round_end for s in e.steps] == [False, True, False, True]
        # branches: 4 nodes x (K - 1) unchosen candidates, then 2 rounds x K writer candidates x M judge continuations
        assert len(e.branches) == 4 * (K - 1) + 2 * K * M
        groups: dict[tuple, list[AgentStep]] = {}
        for s in training_steps([e]):
            groups.setdefault(s.group, []).append(s)
        # 4 nodes of K siblings; per round, one judge group of M continuations per writer candidate
        # (the writer node is node 0 in round 0 and node 2 in round 1)
        nodes = {(p, r, a, n) for r, a, n in [(0, "writer_0", 0), (0, "judge_0", 1), (1, "writer_0", 2), (1, "judge_0", 3)]}
        continuations = {(p, r, "judge_0", n, k) for r, n in [(0, 0), (1, 2)] for k in range(K)}
        assert set(groups) == nodes | continuations
        assert all(len(groups[g]) == K for g in nodes) and all(len(groups[g]) == M for g in continuations)
        for members in groups.values():
            assert all(m.prompt == members[0].prompt for m in members)  # siblings share the exact context
        for g in nodes:
            assert sorted(m.text for m in groups[g]) == ["a", "ab", "abc"]
        # continuation copies c = 0..11 of one round's call answer texts[c % 3]; tree p's candidate k owns
        # copies 6p + 2k, 6p + 2k + 1 -> k=0: "a", "ab"; k=1: "abc", "a"; k=2: "ab", "abc" (in both trees)
        for r, n in [(0, 0), (1, 2)]:
            texts = [[s.text for s in groups[(p, r, "judge_0", n, k)]] for k in range(K)]
            assert texts == [["a", "ab"], ["abc", "a"], ["ab", "abc"]]
            scores = [[s.score for s in groups[(p, r, "judge_0", n, k)]] for k in range(K)]
            assert scores == [[0.0, 2.0], [0.0, 0.0], [2.0, 0.0]]  # each copy's team reward: 2 for "ab"
            rewards = [[s.reward for s in groups[(p, r, "judge_0", n, k)]] for k in range(K)]
            assert rewards == [[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]]
            # each continuation's prompt holds its own writer candidate's text (k-th node sibling says texts[k])
            writer = {s.text for s in groups[(p, r, "writer_0", n)]}
            for k, text in enumerate(["a", "ab", "abc"]):
                assert text in writer and all(
                    s.observation["text"].startswith(f"The writer said: {text}.") for s in groups[(p, r, "judge_0", n, k)]
                )
        # the writer's candidates are scored by the mean of their continuations: a 1, ab 0, abc 1
        for r, n in [(0, 0), (1, 2)]:
            assert {s.text: s.score for s in groups[(p, r, "writer_0", n)]} == {"a": 1.0, "ab": 0.0, "abc": 1.0}
        # the trunk goes on from a best-scoring writer candidate ("a" or "abc", the tie broken by the rng), never "ab"
        assert e.steps[0].text in ("a", "abc") and e.steps[2].text in ("a", "abc")
        for s in e.steps:
            if s.agent == "judge_0":  # a judge closes the round: the best candidate is the even one
                assert s.text == "ab" and s.score == 2.0 and s.reward == 1.0
        assert all(s.score == 0.0 and s.reward == 0.0 for g in nodes if g[2] == "judge_0" for s in groups[g] if s.text != "ab")
        assert e.solved is None
        # every continuation token is held by a kept step: none left over in extra_tokens
        assert e.extra_tokens == 0
        assert sum(len(s.response) for g in continuations for s in groups[g]) == 2 * 2 * sum(size.values())
    # the caller's envs are left at the tree's root: only branches were stepped
    assert all(env.round == 0 and env.ready_agents() == ["writer_0"] for env in envs)


def test_agents_of_one_layer_share_its_call_and_the_later_one_branches_after_the_earlier_ones_pick(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["voter_0", "voter_1"])
    K, M = 3, 2
    engine = Scripted(tokenizer, ["a", "ab", "abc"])
    rollout = RolloutEngine(policy, Sampling(1.0, 8), engine=engine)
    (tree,) = TreeRollout(rollout, width=K, continuations=M).collect([marft_envs.make("tests/ParityPair-v0")], range(K))
    # one call for the layer (both voters' nodes, K each), one for voter_0's continuations (K * M voter_1
    # actions); voter_1's candidates close the round themselves
    assert engine.sizes == [2 * K, K * M]
    voter_0 = {s.text: s.score for s in training_steps([tree]) if s.agent == "voter_0"}
    # candidate k's continuations are copies 2k, 2k+1 of the call, answered texts[c % 3]:
    # "a" (1) + "a" (1) even -> 2, + "ab" (2) odd -> 0: mean 1 ; "ab" + "abc"/"a" -> odd, odd: 0 ;
    # "abc" (3) + "ab" odd -> 0, + "abc" even -> 2: mean 1
    assert voter_0 == {"a": 1.0, "ab": 0.0, "abc": 1.0}
    chosen_0, chosen_1 = tree.steps
    assert [chosen_0.agent, chosen_1.agent] == ["voter_0", "voter_1"] and chosen_1.round_end and chosen_1.done
    # voter_1 was played on branches of a trunk that already held voter_0's pick: its best closes the round even
    assert (len(chosen_0.text) + len(chosen_1.text)) % 2 == 0 and chosen_1.score == 2.0
    assert chosen_0.reward == chosen_1.reward == 1.0  # the trunk's round rewards, as a plain rollout records them
    voter_1 = sorted(s.score for s in training_steps([tree]) if s.group == chosen_1.group)
    assert voter_1 == ([0.0, 2.0, 2.0] if len(chosen_0.text) % 2 else [0.0, 0.0, 2.0])
    # voter_0's continuations are voter_1's sibling groups, one per voter_0 candidate k (its copies 2k, 2k+1):
    # k=0 "a": "a" (even, 2), "ab" (odd, 0); k=1 "ab": "abc", "a" (odd, odd); k=2 "abc": "ab" (odd), "abc" (even)
    continued: dict[tuple, list] = {}
    for s in training_steps([tree]):
        if len(s.group) == 5:
            continued.setdefault(s.group, []).append((s.text, s.score))
    assert continued == {
        (0, 0, "voter_1", 0, 0): [("a", 2.0), ("ab", 0.0)],
        (0, 0, "voter_1", 0, 1): [("abc", 0.0), ("a", 0.0)],
        (0, 0, "voter_1", 0, 2): [("ab", 0.0), ("abc", 2.0)],
    }
    assert chosen_0.text in ("a", "abc")  # the best-scoring voter_0 candidates (a tie)


def test_pick_sample_and_config_errors(tiny_policy):
    rollout = RolloutEngine(tiny_policy, Sampling(1.0, 8), engine=Scripted(tiny_policy.tokenizer, ["a", "ab"]))
    with pytest.raises(ValueError, match="at least 2 candidates"):
        TreeRollout(rollout, width=1, continuations=1)
    with pytest.raises(ValueError, match="tree_continuations must be at least 1"):
        TreeRollout(rollout, width=2, continuations=0)
    with pytest.raises(ValueError, match="tree_pick must be one of"):
        TreeRollout(rollout, width=2, continuations=1, pick="worst")
    tree = TreeRollout(rollout, width=2, continuations=1, pick="sample")
    with pytest.raises(ValueError, match="multiple of grpo.group_size"):
        tree.collect([marft_envs.make("tests/ParityChain-v0")], range(3))
    from marft_envs.branching import NotBranchableError

    with pytest.raises(NotBranchableError, match="branchable = False"):
        tree.collect([marft_envs.make("tests/RemoteChain-v0")], range(2))
    # "sample" picks at random: the same seeds give the same trees
    a = tree.collect([marft_envs.make("tests/ParityChain-v0")], range(4), seed_of=lambda i: i)
    b = tree.collect([marft_envs.make("tests/ParityChain-v0")], range(4), seed_of=lambda i: i)
    assert [[s.text for s in e.steps] for e in a] == [[s.text for s in e.steps] for e in b]


class ByCall(Engine):
    """Answers the n-th call's k-th request with ``scripts[n % len(scripts)][k % ...]``; log-probs of zero."""

    def __init__(self, tokenizer, scripts: list[list[str]]):
        super().__init__()
        self.tokenizer, self.scripts = tokenizer, scripts

    def generate(self, requests, sampling):
        script = self.scripts[self.calls % len(self.scripts)]
        self.calls += 1
        texts = [script[k % len(script)] for k in range(len(requests))]
        ids = [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        return Generation(responses=ids, token_logps=[torch.full((len(i),), -1.0) for i in ids], texts=texts)


def test_best_pick_follows_the_continuations_and_random_upstream_keeps_the_old_random_pick(tiny_policy):
    def trunks(pick):
        rollout = RolloutEngine(tiny_policy, Sampling(1.0, 8), engine=Scripted(tiny_policy.tokenizer, ["a", "ab", "abc"]))
        envs = [marft_envs.make("tests/ParityChain-v0") for _ in range(8)]
        trees = TreeRollout(rollout, width=3, continuations=2, pick=pick).collect(envs, range(24), seed_of=lambda i: i // 3)
        return [s.text for e in trees for s in e.steps if s.agent == "writer_0"]

    # tree p's writer candidate k is continued by copies 6p + 2k, 6p + 2k + 1 of a call answering texts[c % 3]:
    # "a" -> ("a", "ab") mean 1, "ab" -> ("abc", "a") 0, "abc" -> ("ab", "abc") 1: "best" never continues from "ab"
    best = trunks("best")
    assert len(best) == 16 and "ab" not in best and {"a", "abc"} <= set(best)  # ties go either way
    assert "ab" in trunks("random_upstream")  # the old pick: uniform over upstream candidates, whatever they scored


def test_an_update_trains_the_downstream_agent_on_its_continuations(tiny_model_dir):
    from marft_agents.algorithms.grpo import GRPO, GRPOConfig

    torch.set_num_threads(1)
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["writer_0", "judge_0"])
    # calls of a round: the writers' layer (K = 2), their continuations (K * M = 4), the judges' layer (2).
    # writer candidate "w" is continued by judges "ab", "a" (team rewards 2, 0: mean 1), candidate "wx" by
    # "a", "abc" (0, 0: mean 0), so the trunk goes on from "w"; its judge node draws "a", "abc": both 0.
    engine = ByCall(tokenizer, [["w", "wx"], ["ab", "a", "a", "abc"], ["a", "abc"]])
    algo = GRPO(policy, GRPOConfig(grouping="tree", group_size=2, tree_continuations=2, kl_coef=0.0, minibatch_size=16), temperature=1.0)
    (tree,) = algo.collector(RolloutEngine(policy, Sampling(1.0, 8), engine=engine)).collect(
        [marft_envs.make("tests/ParityChain-v0")], range(2)
    )
    assert [s.text for s in tree.steps][::2] == ["w", "w"]  # the judges' pick is a tie, broken by the rng
    steps = training_steps([tree])
    assert [(s.group, s.score) for s in steps if len(s.group) == 5 and s.round == 0] == [
        ((0, 0, "judge_0", 0, 0), 2.0),
        ((0, 0, "judge_0", 0, 0), 0.0),
        ((0, 0, "judge_0", 0, 1), 0.0),
        ((0, 0, "judge_0", 0, 1), 0.0),
    ]
    before = {a: [p.detach().clone() for p in policy.parameters(a)] for a in policy.adapters}
    metrics = algo.update([tree], 0, np.random.default_rng(0))
    # per round: the writer node [1, 0] and the first continuation group [2, 0] carry signal; the judge node
    # [0, 0] and the second continuation group [0, 0] do not -> 2 rounds x 4 groups, half with no spread
    assert metrics["tree/informative_groups/writer_0"] == 2.0 and metrics["tree/informative_groups/judge_0"] == 2.0
    assert metrics["grpo/zero_spread_groups"] == 0.5 and metrics["tree/nodes"] == 4.0 and metrics["tree/continuation_groups"] == 4.0
    # every generated token is counted: per round 2 writer + 4 continuation + 2 judge responses
    tokens = {t: len(tokenizer.encode(t, add_special_tokens=False)) for t in ("w", "wx", "ab", "a", "abc")}
    continuation = 2 * (tokens["ab"] + 2 * tokens["a"] + tokens["abc"])
    assert metrics["tree/continuation_tokens"] == continuation
    assert metrics["tree/generated_tokens"] == continuation + 2 * (tokens["w"] + tokens["wx"] + tokens["a"] + tokens["abc"])
    # the judge's only signal is its continuations: its adapter moves, as the writer's does
    for adapter, params in before.items():
        assert any(not torch.equal(p, q) for p, q in zip(params, policy.parameters(adapter))), f"{adapter} did not move"


# ------------------------------------------------------------------------------------- the refusal


def test_cli_refuses_tree_sampling_on_an_env_that_cannot_branch_before_any_work(tmp_path, capsys):
    from marft_agents.cli import main as cli

    run = tmp_path / "run"
    common = [
        "train",
        "--algo",
        "grpo",
        "--no-progress",
        "grpo.grouping=tree",
        "model=/nonexistent/model",
        f"run_dir={run}",
        "updates=1",
        "episodes_per_update=4",
        "grpo.group_size=2",
    ]
    assert cli([*common, "env=tests/RemoteChain-v0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "grpo.grouping=tree needs an env that can copy its state mid-episode" in err
    assert "tests/RemoteChain-v0 (RemoteChain) declares branchable = False" in err
    assert not run.exists()  # refused before the model was loaded or a file was written
    assert cli([*common, "env=tests/ParityChain-v0", "distributed.workers=2"]) == 2
    assert "use distributed.workers=0" in capsys.readouterr().err
    assert not run.exists()


# ------------------------------------------------------------------------------------- a training run


def tree_config(model_dir, run_dir, *, updates: int):
    from marft_agents.training.config import from_dict

    return from_dict(
        {
            "algo": "grpo",
            "env": "tests/ParityChain-v0",
            "model": str(model_dir),
            "run_dir": str(run_dir),
            "updates": updates,
            "episodes_per_update": 6,
            "grpo.group_size": 3,
            "grpo.grouping": "tree",
            "grpo.tree_continuations": 1,
            "grpo.minibatch_size": 8,
            "grpo.kl_coef": 0.1,
            "temperature": 1.0,
            "eval_episodes": 2,
            "eval_rounds": 0,
            "eval_every": 0,
            "max_new_tokens": 6,
            "checkpoint_every": 1,
            "threads": 1,
        }
    )


def test_trainer_runs_tree_grpo_and_changes_every_trainable_parameter_only(tiny_model_dir, tmp_path, monkeypatch):
    from marft_agents.training import run_parts, trainer

    torch.set_num_threads(1)
    built = {}
    build_policy = run_parts.build_policy

    def keep(config, agents):  # the trainer's policy, and its parameters as they started
        policy = built["policy"] = build_policy(config, agents)
        models = {id(m): m for m in [policy.base, *policy.models.values()]}.values()
        built["before"] = {(id(m), n): (p.detach().clone(), p.requires_grad) for m in models for n, p in m.named_parameters()}
        return policy

    monkeypatch.setattr(run_parts, "build_policy", keep)
    run = tmp_path / "tree"
    config = tree_config(tiny_model_dir, run, updates=2)
    trainer.train(config, progress=False, quiet=True)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for r in rows:
        # 2 trees x 2 rounds x 2 agents = 8 nodes of 3 candidates; 1 continuation per writer candidate
        # and per round, one judge group of 1 continuation per writer candidate: 2 trees x 2 rounds x 3
        assert r["tree/nodes"] == 8.0 and r["tree/continuation_groups"] == 12.0 and r["tree/continuation_tokens"] > 0
        assert {"tree/informative_groups/writer_0", "tree/informative_groups/judge_0"} <= set(r)
        assert r["tree/generated_tokens"] > r["tree/continuation_tokens"]
        assert 0.0 <= r["grpo/zero_spread_groups"] < 1.0 and np.isfinite(r["writer_0/loss"])
    before = built["before"]
    policy = built["policy"]
    models = {id(m): m for m in [policy.base, *policy.models.values()]}.values()
    after = {(id(m), n): p.detach() for m in models for n, p in m.named_parameters()}
    trainable = {k for k, (_, grad) in before.items() if grad}
    assert trainable
    unchanged = [k[1] for k in trainable if torch.equal(before[k][0], after[k])]
    assert not unchanged, f"trainable parameters that did not change: {unchanged[:5]}"
    changed_frozen = [k[1] for k in before.keys() - trainable if not torch.equal(before[k][0], after[k])]
    assert not changed_frozen, f"frozen parameters that changed: {changed_frozen[:5]}"


def test_a_resumed_tree_run_ends_with_the_same_metrics(tiny_model_dir, tmp_path):
    from marft_agents.training.trainer import train

    torch.set_num_threads(1)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(tree_config(tiny_model_dir, straight, updates=2), progress=False, quiet=True)
    train(tree_config(tiny_model_dir, resumed, updates=1), progress=False, quiet=True)  # "interrupted" after 1
    train(tree_config(tiny_model_dir, resumed, updates=2), resume=True, progress=False, quiet=True)

    def rows(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/")} for line in lines]

    assert len(rows(straight)) == 2 and rows(straight) == rows(resumed)  # the picks and samples replay
