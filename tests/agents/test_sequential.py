"""The sequential trust-region update: hand-computed weights, the weights class, and MARFT with it on."""

import math

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards
from torch.testing import assert_close

import marft_envs
from marft_agents.algorithms import action_ppo
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.algorithms.marft_token import MARFTToken, MARFTTokenConfig
from marft_agents.algorithms.sequential import (
    SequentialConfig,
    SequentialWeights,
    accumulate,
    agent_order,
    clipped_weight,
    round_index,
    round_robin,
)
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine


def test_clipped_weight_clips_the_product_in_log_space():
    log_m = torch.tensor([0.0, math.log(2.0), math.log(0.5), math.log(1.1), -1000.0], dtype=torch.float64)
    # exp(0) = 1; 2 -> 1.2; 0.5 -> 0.8; 1.1 stays; exp(-1000) would vanish, clipped to 0.8
    assert_close(clipped_weight(log_m, 0.2), torch.tensor([1.0, 1.2, 0.8, 1.1, 0.8], dtype=torch.float64))


def test_accumulate_adds_each_agents_log_ratio_to_its_round():
    log_m = torch.zeros(3, dtype=torch.float64)
    # two steps in round 0 (e.g. a shared adapter playing two agents), one in round 2
    out = accumulate(log_m, torch.tensor([0, 0, 2]), torch.tensor([0.1, 0.2, -0.3]))
    assert_close(out, torch.tensor([0.3, 0.0, -0.3], dtype=torch.float64))


def test_round_index_and_agent_order():
    ids, n = round_index([(0, 0), (0, 0), (0, 1), (1, 0), (1, 0)])
    assert ids.tolist() == [0, 0, 1, 2, 2] and n == 3
    assert agent_order(["a", "b", "c"], "fixed", np.random.default_rng(0)) == ["a", "b", "c"]
    orders = {tuple(agent_order(["a", "b", "c"], "random", np.random.default_rng(s))) for s in range(20)}
    assert len(orders) > 1 and all(sorted(o) == ["a", "b", "c"] for o in orders)
    with pytest.raises(ValueError, match="random"):
        agent_order(["a"], "alphabetical", np.random.default_rng(0))


def test_round_robin_picks_all_or_one_adapter_in_turn():
    assert round_robin(["a", "b"], 5, 0) == ["a", "b"]
    assert [round_robin(["a", "b"], u, 2) for u in range(5)] == [["a"], ["a"], ["b"], ["b"], ["a"]]


def test_sequential_weights_weight_later_agents_by_earlier_ratios():
    # Steps: a acts in rounds 0 and 1, b in rounds 0 and 1, c in round 0 only.
    agents = ["a", "a", "b", "b", "c"]
    keys = [(0, 0), (0, 1), (0, 0), (0, 1), (0, 0)]  # (episode, round)
    log_ratio = {"a": torch.tensor([math.log(1.1), math.log(0.95)]), "b": torch.tensor([math.log(1.05), math.log(0.5)])}
    trust = SequentialWeights(keys, clip=0.2)
    seen = {}
    for adapter in ["a", "b", "c"]:
        seen[adapter] = trust.weights()
        if adapter in log_ratio:
            trust.record([i for i, x in enumerate(agents) if x == adapter], log_ratio[adapter])
    assert_close(seen["a"], torch.ones(5))  # the first agent: M = 1
    # b: round 0 -> 1.1, round 1 -> 0.95
    assert_close(seen["b"], torch.tensor([1.1, 0.95, 1.1, 0.95, 1.1]))
    # c: round 0 -> 1.1 * 1.05 = 1.155; round 1 -> 0.95 * 0.5 = 0.475, clipped to 0.8
    assert_close(seen["c"], torch.tensor([1.155, 0.8, 1.155, 0.8, 1.155]))
    assert seen["c"].dtype == torch.float32 and trust.log_m.dtype == torch.float64  # the product in float64


def setup(model_dir, cls, config):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = cls(policy, config, temperature=1.0)
    torch.manual_seed(0)
    engine = RolloutEngine(policy, Sampling(1.0, 6))
    return policy, algo, engine, envs


@pytest.mark.parametrize("cls, config_cls", [(MARFT, MARFTConfig), (MARFTToken, MARFTTokenConfig)])
def test_sequential_marft_two_updates_change_every_trainable_parameter(tiny_model_dir, cls, config_cls):
    config = config_cls(minibatch_size=2, sequential=SequentialConfig(enabled=True, order="fixed"))
    policy, algo, engine, envs = setup(tiny_model_dir, cls, config)
    before = {n: (p.detach().clone(), p.requires_grad) for n, p in policy.base.named_parameters()}
    for update in range(2):
        episodes = plant_rewards(engine.collect(envs, range(4 * update, 4 * update + 4)))
        metrics = algo.update(episodes, update, np.random.default_rng(update))
        assert all(np.isfinite(v) for v in metrics.values()), metrics
        assert metrics["reasoner_0/sequential_weight"] == 1.0  # first in the fixed order
        assert metrics["actor_0/sequential_position"] == 1.0
        assert 0.8 <= metrics["actor_0/sequential_weight"] <= 1.2
    trainable = {n for n, (_, grad) in before.items() if grad}
    after = dict(policy.base.named_parameters())
    assert not [n for n in trainable if torch.equal(before[n][0], after[n])]
    assert not [n for n in before.keys() - trainable if not torch.equal(before[n][0], after[n])]


@pytest.mark.parametrize("cls, config_cls", [(MARFT, MARFTConfig), (MARFTToken, MARFTTokenConfig)])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_log_ratios_are_zero_before_any_step(tiny_model_dir, cls, config_cls, reduction):
    policy, algo, engine, envs = setup(tiny_model_dir, cls, config_cls(minibatch_size=3, logp_reduction=reduction))
    steps = [s for e in engine.collect(envs, range(4)) for s in e.steps]
    idx = [i for i, s in enumerate(steps) if s.agent == "actor_0"]

    def log_ratios():  # what both MARFTs record for the sequential weight after an adapter's step
        scoring = dict(temperature=1.0, minibatch_size=3, reduction=reduction)
        return algo.log_ratios("actor_0", steps, idx) if cls is MARFT else action_ppo.log_ratios(policy, "actor_0", steps, idx, **scoring)

    ratios = log_ratios()  # minibatches of 3 in idx order
    assert ratios.shape == (len(idx),) and not ratios.requires_grad
    assert_close(ratios, torch.zeros(len(idx)), rtol=0, atol=1e-4)
    with torch.no_grad():  # after a change to the adapter, the ratio of every step moves
        for p in policy.parameters("actor_0"):
            p.add_(0.05)
    assert (log_ratios().abs() > 1e-4).all()
