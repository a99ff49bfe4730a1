"""IPPO and MAPPO: per-agent GAE by hand, the critics' inputs, CPU smoke tests on MathDebate."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from agent_helpers import episode, plant_rewards
from torch.testing import assert_close

import marft_envs
from marft_agents.algorithms.base import flatten
from marft_agents.algorithms.critic import ValueHeads
from marft_agents.algorithms.ippo_mappo import IPPO, MAPPO, IPPOConfig, MAPPOConfig, agent_streams, per_agent_gae
from marft_agents.cli import main as cli
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine

# ------------------------------------------------------------------------------------------- maths


def test_agent_streams_put_each_agents_rounds_together():
    episodes = [episode(0, [[("a", 0), ("b", 0)], [("a", 1), ("b", 0)]]), episode(1, [[("a", 0), ("b", 1)]])]
    order, dones = agent_streams(episodes)
    # flatten: 0=a@0, 1=b@0, 2=a@1, 3=b@1 | 4=a@0, 5=b@0  ->  streams a:[0, 2], b:[1, 3], a:[4], b:[5]
    assert order == [0, 2, 1, 3, 4, 5]
    assert dones == [False, True, False, True, True, True]


def test_per_agent_gae_hand_computed():
    episodes = [episode(0, [[("a", 0.0), ("b", 0.0)], [("a", 1.0), ("b", 0.0)]])]
    steps = flatten(episodes)
    values = torch.tensor([0.5, 0.4, 0.2, 0.1])  # a@0, b@0, a@1, b@1
    adv, ret = per_agent_gae(steps, episodes, values, gamma=0.9, lam=0.5)
    # a: t=1 (done) delta = 1 - 0.2 = 0.8 ; t=0 delta = 0 + 0.9*0.2 - 0.5 = -0.32 ; A = -0.32 + 0.9*0.5*0.8 = 0.04
    # b: t=1 (done) delta = 0 - 0.1 = -0.1 ; t=0 delta = 0 + 0.9*0.1 - 0.4 = -0.31 ; A = -0.31 + 0.45*(-0.1) = -0.355
    # (MARFT's chain GAE would instead link a@0 -> b@0 inside the round)
    assert_close(adv, torch.tensor([0.04, -0.355, 0.8, -0.1]))
    assert_close(ret, torch.tensor([0.54, 0.045, 1.0, 0.0]))  # A + V


def test_value_heads_route_each_row_to_its_head():
    torch.manual_seed(0)
    heads = ValueHeads(3, 2)
    x = torch.randn(4, 3)
    out = heads(x, torch.tensor([0, 1, 1, 0]))
    assert_close(out[[0, 3]], heads.heads[0].forward(x[[0, 3]]))
    assert_close(out[[1, 2]], heads.heads[1].forward(x[[1, 2]]))


def test_debate_state_holds_every_solvers_previous_answer():
    env = marft_envs.make("marft/MathDebate-v0", n_agents=2, rounds=2)
    env.reset(seed=0)
    first = env.state_text()
    assert first.startswith("Problem: ") and "solver_0" not in first
    env.step({"solver_0": "\\boxed{1}", "solver_1": "\\boxed{2}"})
    assert "solver_0: \\boxed{1}" in env.state_text() and "solver_1: \\boxed{2}" in env.state_text()


# ------------------------------------------------------------------------------------- smoke tests


def snapshot(policy):
    models = {id(m): m for m in [policy.base, *policy.models.values()]}.values()
    return {(id(m), n): (p.detach().clone(), p.requires_grad) for m in models for n, p in m.named_parameters()}


@pytest.mark.parametrize("algo_cls, config_cls, n_heads", [(IPPO, IPPOConfig, 2), (MAPPO, MAPPOConfig, 1)])
def test_two_updates_change_every_trainable_parameter_and_no_frozen_one(tiny_model_dir, algo_cls, config_cls, n_heads):
    torch.set_num_threads(1)
    envs = [marft_envs.make("marft/MathDebate-v0", n_agents=2, rounds=2) for _ in range(4)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = algo_cls(policy, config_cls(minibatch_size=4, kl_coef=0.1), temperature=1.0)
    assert len(algo.critic.head.heads) == n_heads
    engine = RolloutEngine(policy, Sampling(1.0, 8), record_state=algo.needs_state)
    torch.manual_seed(0)
    critic_before = {n: p.detach().clone() for n, p in algo.critic.head.named_parameters()}
    before = snapshot(policy)
    rng = np.random.default_rng(0)
    for update in range(2):
        episodes = plant_rewards(engine.collect(envs, range(4 * update, 4 * update + 4)))
        metrics = algo.update(episodes, update, rng)
        assert all(np.isfinite(v) for v in metrics.values()), metrics
    if algo.needs_state:  # the solvers of one round saw one global state
        steps = flatten(episodes)
        assert steps[0].state == steps[1].state and steps[0].state != steps[2].state
    assert {"solver_0/loss", "solver_1/loss", "critic/value_loss"} <= set(metrics)
    after = snapshot(policy)
    trainable = {k for k, (_, grad) in before.items() if grad}
    unchanged = [k[1] for k in trainable if torch.equal(before[k][0], after[k][0])]
    assert trainable and not unchanged, f"trainable parameters that did not change: {unchanged[:5]}"
    changed_frozen = [k[1] for k in before.keys() - trainable if not torch.equal(before[k][0], after[k][0])]
    assert not changed_frozen, f"frozen parameters that changed: {changed_frozen[:5]}"
    assert all(not torch.equal(critic_before[n], p) for n, p in algo.critic.head.named_parameters())


def test_mappo_without_recorded_state_says_what_to_do(tiny_model_dir):
    envs = [marft_envs.make("marft/MathDebate-v0", n_agents=2, rounds=1) for _ in range(2)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = MAPPO(policy, MAPPOConfig(), temperature=1.0)
    episodes = RolloutEngine(policy, Sampling(1.0, 4)).collect(envs, range(2))
    with pytest.raises(ValueError, match="record_state=True"):
        algo.update(episodes, 0, np.random.default_rng(0))


def test_trainer_records_the_state_for_mappo(tiny_model_dir, tmp_path):
    run = tmp_path / "mappo"
    argv = [
        "train",
        "--algo",
        "mappo",
        "--no-progress",
        "env=marft/MathDebate-v0",
        'env_kwargs={"n_agents": 2}',
        f"model={tiny_model_dir}",
        f"run_dir={run}",
        "updates=2",
        "episodes_per_update=2",
        "eval_episodes=2",
        "eval_rounds=0",
        "max_new_tokens=6",
        "threads=1",
    ]
    assert cli(argv) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(np.isfinite(r["critic/value_loss"]) for r in rows)
