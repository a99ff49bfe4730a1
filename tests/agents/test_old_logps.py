"""``old_logps="learner"``: until an adapter's first step of an update, the PPO ratio's pi_old is the learner's own."""

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.base import flatten
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.algorithms.marft_token import MARFTToken, MARFTTokenConfig
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine


def setup(model_dir, noise=0.0, **cfg):
    """A MARFT learner and 8 chain episodes; ``noise``: each sampled token log-prob moved by up to that much, as a
    sampler that rounds otherwise than the learner (bf16) reports them."""
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(8)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = MARFT(policy, MARFTConfig(minibatch_size=64, **cfg), temperature=1.0)
    torch.manual_seed(0)
    episodes = plant_rewards(RolloutEngine(policy, Sampling(1.0, 8)).collect(envs, range(8)))
    generator = torch.Generator().manual_seed(1)
    for s in flatten(episodes):
        s.token_logps = s.token_logps + noise * (2 * torch.rand(s.token_logps.shape, generator=generator) - 1)
    return policy, algo, episodes


def weights(policy):
    return {a: [p.detach().clone() for p in policy.parameters(a)] for a in policy.adapters}


def test_the_learners_own_log_probs_make_the_first_ratio_one_where_the_sampled_ones_are_off(tiny_model_dir):
    _, sampled, episodes = setup(tiny_model_dir, noise=0.5)
    off = sampled.update(episodes, 0, np.random.default_rng(0))
    policy, learner, episodes = setup(tiny_model_dir, noise=0.5, old_logps="learner")
    before = weights(policy)
    own = learner.update(episodes, 0, np.random.default_rng(0))
    for agent in ("reasoner_0", "actor_0"):
        assert off[f"{agent}/clip_frac"] > 0.2  # 0.5 nats a token: most actions' ratios are far from 1
        assert own[f"{agent}/clip_frac"] == 0.0 and own[f"{agent}/approx_kl"] == 0.0
    after = weights(policy)  # one step from LoRA's start: B moves (A's gradient is B's, still 0)
    assert all(any(not torch.equal(b, a) for b, a in zip(before[agent], after[agent])) for agent in before)


def test_in_float32_it_changes_nothing(tiny_model_dir):
    # the sampler's numbers are the learner's to ~1e-6: both settings take the same step
    policy_s, sampled, episodes_s = setup(tiny_model_dir)
    sampled.update(episodes_s, 0, np.random.default_rng(0))
    policy_l, learner, episodes_l = setup(tiny_model_dir, old_logps="learner")
    learner.update(episodes_l, 0, np.random.default_rng(0))
    for agent in policy_s.adapters:
        for s, ll in zip(policy_s.parameters(agent), policy_l.parameters(agent)):
            torch.testing.assert_close(ll, s, atol=1e-6, rtol=1e-5)


def test_after_the_first_step_the_sampled_log_probs_are_pi_old(tiny_model_dir):
    # 2 epochs: the second epoch's ratios are against the sampled log-probs, 0.5 nats off, so the clip binds
    _, learner, episodes = setup(tiny_model_dir, noise=0.5, old_logps="learner", ppo_epochs=2)
    metrics = learner.update(episodes, 0, np.random.default_rng(0))
    assert 0.0 < metrics["reasoner_0/clip_frac"]  # the mean of the first epoch's 0 and the second's


def test_the_token_level_learners_refuse_it(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["reasoner_0", "actor_0"])
    with pytest.raises(ValueError, match="marft_token.old_logps"):
        MARFTToken(policy, MARFTTokenConfig(old_logps="learner"), temperature=1.0)
