"""Token-level MARFT: hand-computed token GAE, the per-token layout, and a 2-update smoke test.

Notation of the hand computations: ``disc_k`` is ``gamma_token`` inside a response, ``gamma_agent``
at a response's last token, ``gamma`` at a round's last token (times ``1 - done``);
``delta_k = r_k + disc_k * V_{k+1} - V_k``, ``A_k = delta_k + disc_k * lam * A_{k+1}``.
"""

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards
from torch.testing import assert_close

import marft_envs
from marft_agents.algorithms.advantages import token_advantages, token_gae
from marft_agents.algorithms.marft_token import MARFTToken, MARFTTokenConfig
from marft_agents.algorithms.token_ppo import pack
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine

F, T_ = False, True


def _t(x):
    return torch.tensor(x, dtype=torch.float32)


def _b(x):
    return torch.tensor(x, dtype=torch.bool)


GAMMAS = dict(gamma=0.99, gamma_agent=0.9, gamma_token=0.5, lam=0.5)


def test_token_gae_two_agents_and_a_padded_row():
    # Row 0: agent A's tokens a0 a1, then agent B's b0 (round and episode end); reward 1 on b0.
    # Row 1: one token c0 (done), reward 2, then padding.
    adv, ret = token_gae(
        _t([[0, 0, 1], [2, 0, 0]]),
        _t([[0.1, 0.2, 0.4], [0.5, 0, 0]]),
        _b([[F, T_, T_], [T_, F, F]]),
        _b([[F, F, T_], [T_, F, F]]),
        _b([[F, F, T_], [T_, F, F]]),
        _b([[T_, T_, T_], [T_, F, F]]),
        **GAMMAS,
    )
    # b0 (done):            delta = 1 - 0.4 = 0.6                               A = 0.6
    # a1 (A's last token):  delta = 0 + 0.9*0.4 - 0.2 = 0.16;  A = 0.16 + 0.9*0.5*0.6 = 0.43
    # a0 (inside A):        delta = 0 + 0.5*0.2 - 0.1 = 0.0;   A = 0.0 + 0.5*0.5*0.43 = 0.1075
    # c0 (done):            A = 2 - 0.5 = 1.5; padding: 0
    assert_close(adv, _t([[0.1075, 0.43, 0.6], [1.5, 0, 0]]), rtol=0, atol=1e-6)
    # returns = A + V on real tokens, 0 on padding
    assert_close(ret, _t([[0.2075, 0.63, 1.0], [2.0, 0, 0]]), rtol=0, atol=1e-6)


def test_token_gae_crosses_rounds_with_gamma_and_never_into_padding():
    # x0 ends round 0 (not done), y0 ends the episode; gamma = 0.8, lam = 1.
    adv, _ = token_gae(
        _t([[0.5, 1.0]]),
        _t([[0.2, 0.3]]),
        _b([[T_, T_]]),
        _b([[T_, T_]]),
        _b([[F, T_]]),
        _b([[T_, T_]]),
        gamma=0.8,
        gamma_agent=0.9,
        gamma_token=0.5,
        lam=1.0,
    )
    # y0: 1 - 0.3 = 0.7 ; x0: delta = 0.5 + 0.8*0.3 - 0.2 = 0.54, A = 0.54 + 0.8*1*0.7 = 1.1
    assert_close(adv, _t([[1.1, 0.7]]), rtol=0, atol=1e-6)
    # An unfinished row whose next column is padding does not bootstrap from it: A = 1 - 0.25.
    adv, _ = token_gae(_t([[1.0, 9.0]]), _t([[0.25, 9.0]]), _b([[T_, F]]), _b([[T_, F]]), _b([[F, F]]), _b([[T_, F]]), **GAMMAS)
    assert_close(adv, _t([[0.75, 0.0]]), rtol=0, atol=1e-6)


def test_token_advantages_lays_steps_end_to_end_per_episode():
    # The first case above as agent-steps: episode 0 = [A (2 tokens), B (1 token)], episode 1 = [C (1 token)].
    mask = _b([[T_, T_], [T_, F], [T_, F]])
    adv, ret = token_advantages(
        _t([[0, 0], [1, 0], [2, 0]]),
        _t([[0.1, 0.2], [0.4, 0], [0.5, 0]]),
        mask,
        torch.tensor([0, 0, 1]),
        _b([F, T_, T_]),
        _b([F, T_, T_]),
        **GAMMAS,
    )
    assert_close(adv, _t([[0.1075, 0.43], [0.6, 0], [1.5, 0]]), rtol=0, atol=1e-6)
    assert_close(ret, _t([[0.2075, 0.63], [1.0, 0], [2.0, 0]]), rtol=0, atol=1e-6)


def collect(model_dir, n=4, env_id="marft/MathChain-v0"):
    envs = [marft_envs.make(env_id) for _ in range(n)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    torch.manual_seed(0)
    engine = RolloutEngine(policy, Sampling(1.0, 6))
    return policy, envs, engine


def snapshot(policy):
    return {n: (p.detach().clone(), p.requires_grad) for n, p in policy.base.named_parameters()}


def test_token_features_are_the_states_before_each_token(tiny_model_dir):
    policy, envs, engine = collect(tiny_model_dir, n=2)
    steps = [s for e in engine.collect(envs, range(2)) for s in e.steps]
    prompts, responses = [s.prompt for s in steps], [s.response for s in steps]
    feats = policy.token_features(prompts, responses)  # (B, R, d)
    for b, s in enumerate(steps):
        for k in range(len(s.response)):
            assert_close(feats[b, k], policy.features([s.prompt + s.response[:k]])[0], rtol=1e-4, atol=1e-5)


def test_two_updates_change_every_trainable_parameter_and_no_frozen_one(tiny_model_dir):
    policy, envs, engine = collect(tiny_model_dir)
    algo = MARFTToken(policy, MARFTTokenConfig(minibatch_size=2, kl_coef=0.1), temperature=1.0)
    critic_before = {n: p.detach().clone() for n, p in algo.critic.head.named_parameters()}
    before = snapshot(policy)
    for update in range(2):
        episodes = plant_rewards(engine.collect(envs, range(4 * update, 4 * update + 4)))
        metrics = algo.update(episodes, update, np.random.default_rng(update))
        assert all(np.isfinite(v) for v in metrics.values()), metrics
        assert {"reasoner_0/loss", "actor_0/loss", "critic/value_loss"} <= set(metrics)
    after = snapshot(policy)
    trainable = {n for n, (_, grad) in before.items() if grad}
    assert trainable
    assert not [n for n in trainable if torch.equal(before[n][0], after[n][0])]
    assert not [n for n in before.keys() - trainable if not torch.equal(before[n][0], after[n][0])]
    assert all(not torch.equal(critic_before[n], p) for n, p in algo.critic.head.named_parameters())


def test_first_minibatch_ratio_is_one_per_token(tiny_model_dir):
    policy, envs, engine = collect(tiny_model_dir)
    algo = MARFTToken(policy, MARFTTokenConfig(minibatch_size=64), temperature=1.0)
    episodes = plant_rewards(engine.collect(envs, range(4)))
    batch = pack([s for e in episodes for s in e.steps])
    assert batch.mask.sum() == sum(len(s.response) for e in episodes for s in e.steps)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert metrics["reasoner_0/clip_frac"] == 0.0
    assert metrics["reasoner_0/approx_kl"] == pytest.approx(0.0, abs=1e-6)
