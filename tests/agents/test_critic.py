"""The critic's inputs are standardised per feature, and its epochs are its own setting in every critic learner."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import marft_envs
from marft_agents.algorithms import build_learner, config_class
from marft_agents.algorithms.critic import CLIP, STD_FLOOR, FeatureScaler, ValueHead, fit_critic
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine

X = torch.tensor([[1.0, 2.0, 7.0], [3.0, 2.0, 7.0], [5.0, 8.0, 7.0]])  # (3 rows, 3 features); the last is constant


def test_standardisation_of_a_small_feature_matrix_by_hand():
    # column 0: mean 3, population variance (4 + 0 + 4) / 3 = 8/3; column 1: mean 4, variance (4 + 4 + 16) / 3 = 8;
    # column 2: constant 7, variance 0, divided by the floor STD_FLOOR = 0.01
    scaler = FeatureScaler(3)
    scaler.observe(X)
    assert scaler.count.item() == 3
    assert scaler.mean.tolist() == pytest.approx([3.0, 4.0, 7.0])
    assert scaler.variance().tolist() == pytest.approx([8 / 3, 8.0, 0.0])
    a, b = 2 / math.sqrt(8 / 3), 1 / math.sqrt(2)  # 1.2247..., 0.7071...
    expected = [[-a, -b, 0.0], [0.0, -b, 0.0], [a, 2 * b, 0.0]]
    assert scaler(X).tolist() == [pytest.approx(row, abs=1e-6) for row in expected]
    # a constant feature: (7.005 - 7) / 0.01 = 0.5; anything beyond 7 + CLIP * 0.01 is clipped to CLIP
    assert STD_FLOOR == 0.01 and CLIP == 10.0
    assert scaler(torch.tensor([[3.0, 4.0, 7.005]])).tolist()[0] == pytest.approx([0.0, 0.0, 0.5], abs=1e-4)
    assert scaler(torch.tensor([[3.0, 4.0, 9.0]])).tolist()[0] == pytest.approx([0.0, 0.0, CLIP])
    # (N, R, d) inputs standardise along the last dim
    assert scaler(X.unsqueeze(0)).shape == (1, 3, 3)


def test_statistics_merged_batch_by_batch_equal_those_of_all_rows_at_once():
    scaler = FeatureScaler(3)
    scaler.observe(X[:2])
    assert scaler.mean.tolist() == pytest.approx([2.0, 2.0, 7.0]) and scaler.variance().tolist() == pytest.approx([1.0, 0.0, 0.0])
    scaler.observe(X[2:])
    scaler.observe(X[:0])  # an empty batch changes nothing
    assert scaler.count.item() == 3
    assert scaler.mean.tolist() == pytest.approx([3.0, 4.0, 7.0])
    assert scaler.variance().tolist() == pytest.approx([8 / 3, 8.0, 0.0])


def test_a_value_head_scales_its_inputs_and_checkpoints_the_statistics():
    torch.manual_seed(0)
    head = ValueHead(3, hidden=4)
    raw = head.net(X).squeeze(-1)
    assert torch.equal(head(X), raw)  # nothing observed yet: features pass through
    head.observe(X.unsqueeze(0).expand(2, 3, 3), mask=torch.tensor([[True, True, True], [False, False, False]]))  # real tokens only
    assert head.scale.count.item() == 3
    assert torch.allclose(head(X), head.net(head.scale(X)).squeeze(-1))
    assert not torch.allclose(head(X), raw)
    copy = ValueHead(3, hidden=4)
    copy.load_state_dict(head.state_dict())  # the buffers travel with the weights: --resume scales alike
    assert torch.equal(copy(X), head(X))
    assert {"scale.count", "scale.mean", "scale.m2"} <= set(head.state_dict())


def test_fit_critic_takes_one_step_per_minibatch_per_epoch():
    torch.manual_seed(0)
    head = ValueHead(3, hidden=4)
    optimizer = torch.optim.AdamW(head.parameters(), lr=1e-3)
    steps = []
    step = optimizer.step
    optimizer.step = lambda *a, **k: (steps.append(1), step(*a, **k))[1]
    x = torch.randn(5, 3)
    fit_critic(
        head,
        optimizer,
        (x,),
        torch.zeros(5),
        torch.ones(5),
        np.random.default_rng(0),
        epochs=3,
        minibatch_size=2,
        value_clip=None,
        max_grad_norm=1.0,
    )
    assert len(steps) == 3 * 3  # 3 epochs of ceil(5 / 2) = 3 minibatches


# every learner with a value head: (algo, env, env kwargs)
CRITIC_LEARNERS = [
    ("marft", "marft/MathChain-v0", {}),
    ("marft_token", "marft/MathChain-v0", {}),
    ("ppo", "marft/MathSolo-v0", {}),
    ("ippo", "marft/MathDebate-v0", {"n_agents": 2, "rounds": 1}),
    ("mappo", "marft/MathDebate-v0", {"n_agents": 2, "rounds": 1}),
    ("cory", "marft/MathCORY-v0", {}),
]


@pytest.mark.parametrize("algo_name,env_id,env_kwargs", CRITIC_LEARNERS, ids=[c[0] for c in CRITIC_LEARNERS])
def test_critic_epochs_is_the_number_of_passes_of_every_critic_learner(tiny_model_dir, algo_name, env_id, env_kwargs):
    envs = [marft_envs.make(env_id, **env_kwargs) for _ in range(2)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    config = config_class(algo_name)(ppo_epochs=1, critic_epochs=3, minibatch_size=64)
    algo = build_learner(algo_name, policy, config, 1.0)
    optimizers = list(algo.critic_optimizers.values()) if algo_name == "cory" else [algo.critic.optimizer]
    counts = [0] * len(optimizers)
    for k, optimizer in enumerate(optimizers):
        step = optimizer.step

        def counted(*a, k=k, step=step, **kw):
            counts[k] += 1
            return step(*a, **kw)

        optimizer.step = counted
    algo.before_collect(envs, 0)
    torch.manual_seed(0)
    engine = RolloutEngine(policy, Sampling(1.0, 4), record_state=algo.needs_state, skip_ignored=algo.skips_ignored)
    episodes = engine.collect(envs, range(2))
    algo.update(episodes, 0, np.random.default_rng(0))
    assert counts == [3] * len(optimizers)  # one minibatch per pass (<= 64 steps), 3 passes, whatever ppo_epochs says
    critics = list(algo.critics.values()) if algo_name == "cory" else [algo.critic.head]
    assert all(m.count.item() > 0 for c in critics for m in c.modules() if isinstance(m, FeatureScaler))  # inputs observed
