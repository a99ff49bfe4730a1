"""The shared base of the algorithms: the Learner's declared members, build_learner, minibatches, apply."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import marft_envs
from marft_agents import algorithms
from marft_agents.algorithms.base import Learner, apply, by_adapter, minibatches
from marft_agents.algorithms.losses import NonFiniteLossError
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine


class Noop(Learner):
    """A learner that learns nothing."""

    def update(self, episodes, update, rng):
        return {}


@dataclasses.dataclass
class GroupConfig:
    """A config with the two fields the trainer reads through the learner."""

    group_size: int = 3
    """Episodes per problem."""
    minibatch_size: int = 5
    """Responses per forward pass."""


NO_ADAPTERS = SimpleNamespace(adapters=[], reference_state=lambda: None)  # no adapters, the base as the KL reference


def test_a_learner_declares_its_optimizers_and_reads_group_and_batch_sizes_from_its_config():
    bare = Noop(NO_ADAPTERS, object(), 1.0)
    assert (bare.optimizers, bare.group_size, bare.score_batch_size, bare.tis_cap) == ({}, 1, 64, None)
    state = bare.state_dict()  # a learner that made no optimizers still checkpoints
    assert state == {"adapters": {}, "optimizers": {}}
    bare.load_state_dict(state)
    grouped = Noop(NO_ADAPTERS, GroupConfig(), 1.0, tis_cap=2.0)
    assert (grouped.group_size, grouped.score_batch_size, grouped.tis_cap) == (3, 5, 2.0)

    class Pairs(Noop):
        group_size = 2  # a class attribute still counts when the config has no such field

    assert Pairs(NO_ADAPTERS, object(), 1.0).group_size == 2
    with pytest.raises(ValueError, match=r"GroupConfig.group_size must be an integer >= 1, got 0"):
        Noop(NO_ADAPTERS, GroupConfig(group_size=0), 1.0)


def test_build_learner_passes_tis_cap_and_refuses_what_the_trainer_could_not_use():
    class OldStyle(Noop):
        def __init__(self, policy, config, temperature):
            super().__init__(policy, config, temperature)

    class NoGroups(Noop):
        def __init__(self, policy, config, temperature, tis_cap=None):
            super().__init__(policy, config, temperature, tis_cap)
            self.group_size = 0

    try:
        algorithms.register("base_test", GroupConfig, Noop)
        assert algorithms.build_learner("base_test", NO_ADAPTERS, GroupConfig(), 1.0, 2.0).tis_cap == 2.0
        algorithms.register("base_test", GroupConfig, OldStyle)
        with pytest.raises(TypeError, match=r"OldStyle.__init__ must take tis_cap=None"):
            algorithms.build_learner("base_test", NO_ADAPTERS, GroupConfig(), 1.0)
        algorithms.register("base_test", GroupConfig, NoGroups)
        with pytest.raises(ValueError, match=r"group_size must be an integer >= 1, got 0"):
            algorithms.build_learner("base_test", NO_ADAPTERS, GroupConfig(), 1.0)
    finally:
        algorithms._registered.pop("base_test", None)


def test_minibatches_shuffle_with_the_rng_and_score_each_minibatch(tiny_model_dir):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(5)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    torch.manual_seed(0)
    steps, idx_of = by_adapter(policy, RolloutEngine(policy, Sampling(1.0, 6)).collect(envs, range(5)))
    idx = idx_of["actor_0"]
    assert idx == [i for i, s in enumerate(steps) if s.agent == "actor_0"] and len(idx) == 5
    batches = list(
        minibatches(policy, "actor_0", steps, idx, np.random.default_rng(7), temperature=1.0, minibatch_size=2, epochs=2, reference=True)
    )
    rng = np.random.default_rng(7)  # the same draws as a plain loop over epochs
    expected = np.concatenate([rng.permutation(idx), rng.permutation(idx)])
    assert [len(mb.rows) for mb in batches] == [2, 2, 1, 2, 2, 1]
    assert np.array_equal(np.concatenate([mb.rows for mb in batches]), expected)
    mb = batches[0]
    assert [s is steps[i] for s, i in zip(mb.steps, mb.rows)] == [True, True]
    logp, entropy, mask = policy.score([s.prompt for s in mb.steps], [s.response for s in mb.steps], "actor_0", 1.0)
    assert torch.equal(mb.logp_tok, logp) and torch.equal(mb.entropy_tok, entropy) and torch.equal(mb.mask, mask)
    assert mb.logp_tok.requires_grad and not mb.ref_tok.requires_grad
    in_order = list(minibatches(policy, "actor_0", steps, idx, None, temperature=1.0, minibatch_size=2))
    assert [list(mb.rows) for mb in in_order] == [idx[0:2], idx[2:4], idx[4:]]
    assert all(mb.ref_tok is None for mb in in_order)  # no reference pass unless asked


def test_apply_takes_one_clipped_step_and_refuses_a_non_finite_loss_before_any_change():
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    optimizer = torch.optim.SGD([w], lr=0.1)
    apply(optimizer, (w * torch.tensor([3.0, 4.0])).sum(), [w], max_grad_norm=1.0, name="a")
    # gradient (3, 4) has norm 5, clipped to norm 1: (0.6, 0.8); one SGD step of 0.1
    torch.testing.assert_close(w.detach(), torch.tensor([0.94, 1.92]))
    before = w.detach().clone()
    with pytest.raises(NonFiniteLossError, match=r"a/loss is nan"):
        apply(optimizer, w.sum() * float("nan"), [w], max_grad_norm=1.0, name="a")
    assert torch.equal(w.detach(), before)
