"""MARFT action level: one update changes every trainable parameter and nothing frozen."""

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.base import flatten
from marft_agents.algorithms.marft import MARFT, MARFTConfig, compute_advantages
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine


def setup(model_dir, mode="lora", env_id="marft/MathChain-v0", **cfg):
    envs = [marft_envs.make(env_id) for _ in range(8)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents, mode=mode)
    config = MARFTConfig(minibatch_size=2)
    for name, value in cfg.items():  # set after construction: a test may step outside the ranges (kl_gate=-1)
        setattr(config, name, value)
    algo = MARFT(policy, config, temperature=1.0)
    torch.manual_seed(0)
    episodes = plant_rewards(RolloutEngine(policy, Sampling(1.0, 8)).collect(envs, range(8)))
    return policy, algo, episodes


def snapshot(policy):
    models = {id(m): m for m in [policy.base, *policy.models.values()]}.values()
    return {(id(m), n): (p.detach().clone(), p.requires_grad) for m in models for n, p in m.named_parameters()}


@pytest.mark.parametrize("mode", ["lora", "shared", "copies"])
def test_one_update_changes_every_trainable_parameter_and_no_frozen_one(tiny_model_dir, mode):
    policy, algo, episodes = setup(tiny_model_dir, mode, kl_coef=0.1)
    critic_before = {n: p.detach().clone() for n, p in algo.critic.head.named_parameters()}
    before = snapshot(policy)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    after = snapshot(policy)
    trainable = {k for k, (_, grad) in before.items() if grad}
    assert trainable, "no trainable parameters"
    unchanged = [k[1] for k in trainable if torch.equal(before[k][0], after[k][0])]
    assert not unchanged, f"trainable parameters that did not change: {unchanged[:5]}"
    changed_frozen = [k[1] for k in before.keys() - trainable if not torch.equal(before[k][0], after[k][0])]
    assert not changed_frozen, f"frozen parameters that changed: {changed_frozen[:5]}"
    assert all(not torch.equal(critic_before[n], p) for n, p in algo.critic.head.named_parameters())


def test_agent_by_agent_updates_only_the_scheduled_adapter(tiny_model_dir):
    policy, algo, episodes = setup(tiny_model_dir, agent_iteration_interval=2)
    assert algo.learning_adapters(0) == algo.learning_adapters(1) == ["reasoner_0"]
    assert algo.learning_adapters(2) == ["actor_0"]
    actor_before = [p.detach().clone() for p in policy.parameters("actor_0")]
    algo.update(episodes, 0, np.random.default_rng(0))
    assert all(torch.equal(a, b) for a, b in zip(actor_before, policy.parameters("actor_0")))


def test_first_update_ratio_is_one(tiny_model_dir):
    # Behaviour and recomputed log-probs agree, so the first minibatch is never clipped.
    policy, algo, episodes = setup(tiny_model_dir, ppo_epochs=1)
    algo.config.minibatch_size = 64
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert metrics["reasoner_0/clip_frac"] == 0.0
    assert metrics["reasoner_0/approx_kl"] == pytest.approx(0.0, abs=1e-6)


def test_kl_gate_skips_minibatches(tiny_model_dir):
    policy, algo, episodes = setup(tiny_model_dir, kl_gate=-1.0)  # every minibatch is over the gate
    before = [p.detach().clone() for p in policy.parameters("actor_0")]
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert metrics["actor_0/skipped_minibatches"] > 0
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters("actor_0")))


def test_advantages_follow_the_chain(tiny_model_dir):
    _, algo, episodes = setup(tiny_model_dir)
    steps = flatten(episodes)
    values = torch.zeros(len(steps))
    adv, ret = compute_advantages(steps, values, gamma=1.0, gamma_agent=1.0, lam=1.0)
    # With zero values and no discounting, every agent-step's advantage is its episode's remaining return.
    k = 0
    for e in episodes:
        rewards = [s.chain_reward for s in e.steps]  # a round's shared reward once
        for j in range(len(e.steps)):
            assert adv[k].item() == pytest.approx(sum(rewards[j:]))
            k += 1
