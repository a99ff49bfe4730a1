"""After ``init_from`` the KL reference is the run's starting adapters, not the base, and stays so on ``--resume``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards
from test_signal_train import config_for, final_adapters

import marft_envs
from marft_agents.algorithms import build_learner, config_class
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs import checkpoint as ckpt
from marft_agents.training.init_from import save_adapters_run
from marft_agents.training.trainer import build_policy, train

CHAIN = "signal_env:ParityChain"  # reasoner_0 -> actor_0, paid half the time: every update takes a step
PROMPT, RESPONSE = [[1, 5, 9, 12, 4]], [[5, 6, 7]]


def trained(policy: LaMASPolicy, seed: int = 1) -> LaMASPolicy:
    """Move every adapter away from the base (a stand-in for trained adapters)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for a in policy.adapters:
            for p in policy.parameters(a):
                p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return policy


def policy_for(model_dir, agents, mode="lora") -> LaMASPolicy:
    model, tokenizer = load_base(str(model_dir))
    return LaMASPolicy(model, tokenizer, agents, mode=mode)


@pytest.mark.parametrize("mode", ["lora", "shared", "copies"])
def test_a_frozen_reference_scores_as_the_starting_adapters_did_and_never_trains(tiny_model_dir, mode):
    policy = trained(policy_for(tiny_model_dir, ["reasoner_0", "actor_0"], mode))
    adapter = policy.adapters[-1]
    assert policy.kl_reference(adapter) is None and policy.reference_state() is None  # fresh: the base
    start, _, _ = policy.score(PROMPT, RESPONSE, adapter, 1.0)
    base, _, _ = policy.score(PROMPT, RESPONSE, None, 1.0)
    assert not torch.allclose(start, base)
    trainable = {a: list(policy.parameters(a)) for a in policy.adapters}

    policy.freeze_reference()
    ref = policy.kl_reference(adapter)
    assert ref == adapter + "-ref"
    with torch.no_grad():
        assert torch.equal(policy.score(PROMPT, RESPONSE, ref, 1.0)[0], start)  # bit for bit: kl_ref is exactly 0 at first
    assert {a: list(policy.parameters(a)) for a in policy.adapters} == trainable  # the optimizers' parameters are unchanged
    assert all(p.requires_grad for ps in trainable.values() for p in ps)
    assert not any(p.requires_grad for a in policy.adapters for p in policy.parameters(policy.kl_reference(a)))
    with policy.active(adapter):  # peft's set_adapter makes the active adapter trainable: not the copies
        pass
    policy.score(PROMPT, RESPONSE, ref, 1.0)
    assert not any(p.requires_grad for p in policy.parameters(ref))

    with torch.no_grad():  # the adapter learns; its reference stays where it started
        for p in policy.parameters(adapter):
            p.add_(0.1)
    assert torch.equal(policy.score(PROMPT, RESPONSE, ref, 1.0)[0], start)
    assert not torch.allclose(policy.score(PROMPT, RESPONSE, adapter, 1.0)[0], start)
    assert torch.equal(policy.score(PROMPT, RESPONSE, None, 1.0)[0], base)  # the critic's base is untouched

    state = policy.reference_state()  # keyed as the adapters are: a fresh policy loads it
    assert sorted(state) == sorted(policy.adapters)
    assert all(sorted(state[a]) == sorted(policy.adapter_state(a)) for a in policy.adapters)
    other = policy_for(tiny_model_dir, ["reasoner_0", "actor_0"], mode)
    other.load_reference_state(state)
    assert torch.equal(other.score(PROMPT, RESPONSE, other.kl_reference(adapter), 1.0)[0], start)
    with pytest.raises(KeyError, match="reference weights for adapters"):
        other.load_reference_state({"reasoner_0": state[policy.adapters[0]]} if mode != "shared" else {})


KL_LEARNERS = [
    ("marft", "marft/MathChain-v0", {"kl_coef": 0.1}),
    ("marft_token", "marft/MathChain-v0", {"kl_coef": 0.1}),
    ("grpo", "marft/MathChain-v0", {"kl_coef": 0.1, "group_size": 2}),
    ("cory", "marft/MathCORY-v0", {"kl_coef": 0.1}),
]


@pytest.mark.parametrize("algo_name,env_id,settings", KL_LEARNERS, ids=[c[0] for c in KL_LEARNERS])
def test_the_first_updates_kl_is_zero_against_the_starting_adapters_and_not_against_the_base(tiny_model_dir, algo_name, env_id, settings):
    kl = {}
    for frozen in (True, False):
        envs = [marft_envs.make(env_id) for _ in range(4)]
        policy = trained(policy_for(tiny_model_dir, envs[0].possible_agents))
        if frozen:
            policy.freeze_reference()
        algo = build_learner(algo_name, policy, config_class(algo_name)(minibatch_size=64, ppo_epochs=1, **settings), 1.0)
        algo.before_collect(envs, 0)
        torch.manual_seed(0)
        engine = RolloutEngine(policy, Sampling(1.0, 6), skip_ignored=algo.skips_ignored)
        episodes = plant_rewards(engine.collect(envs, range(4)))
        metrics = algo.update(episodes, 0, np.random.default_rng(0))
        kl[frozen] = {a: metrics[f"{a}/kl_ref"] for a in policy.adapters}
    for adapter in kl[True]:
        if algo_name == "cory":  # the k1 estimate on the sampled tokens: generation's and scoring's float sums differ slightly
            assert abs(kl[True][adapter]) < 1e-4 < kl[False][adapter], kl
        else:  # scored before the first step, by the same weights: exactly 0
            assert kl[True][adapter] == 0.0 < kl[False][adapter], kl


def kl_rows(run_dir) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k.endswith("kl_ref")} for r in rows]


def test_a_run_from_init_from_starts_at_kl_zero_and_keeps_its_reference_on_resume(tiny_model_dir, tmp_path, monkeypatch):
    source = config_for(tiny_model_dir, tmp_path / "source", env=CHAIN)
    start = trained(build_policy(source, ["reasoner_0", "actor_0"]))
    save_adapters_run(tmp_path / "source", source, start)
    starting = {a: start.adapter_state(a) for a in start.adapters}
    overrides = dict(env=CHAIN, init_from=str(tmp_path / "source"), checkpoint_every=1, **{"algo_args.kl_coef": 0.1})

    straight = tmp_path / "straight"
    train(config_for(tiny_model_dir, straight, updates=2, **overrides), progress=False, quiet=True)
    first = kl_rows(straight)[0]
    assert first == {"reasoner_0/kl_ref": 0.0, "actor_0/kl_ref": 0.0}  # the policy equals its reference at the start

    resumed = tmp_path / "resumed"
    train(config_for(tiny_model_dir, resumed, updates=1, **overrides), progress=False, quiet=True)  # "interrupted" after 1
    train(config_for(tiny_model_dir, resumed, updates=2, **overrides), resume=True, progress=False, quiet=True)
    assert kl_rows(resumed) == kl_rows(straight)  # the resumed run compares with the same reference
    for run in (straight, resumed):
        reference = ckpt.load_checkpoint(ckpt.latest_checkpoint(run / "checkpoints"))["algo"]["reference"]
        for adapter, weights in starting.items():
            assert all(torch.equal(reference[adapter][n], w) for n, w in weights.items())
            assert not all(torch.equal(final_adapters(run)[adapter][n], w) for n, w in weights.items())  # the adapters moved on

    # the reference it replaces: the base with adapters off would make the first update's KL > 0
    monkeypatch.setattr(LaMASPolicy, "freeze_reference", lambda self: None)
    base = tmp_path / "base"
    train(config_for(tiny_model_dir, base, updates=1, **overrides), progress=False, quiet=True)
    assert all(v > 0 for v in kl_rows(base)[0].values()), kl_rows(base)


def test_the_reference_pass_runs_as_peft_disable_adapter_and_leaves_every_adapter_as_it_was(tiny_model_dir):
    policy = trained(policy_for(tiny_model_dir, ["reasoner_0", "actor_0"]))
    tokens = torch.tensor([PROMPT[0] + RESPONSE[0]])
    with torch.no_grad():
        with policy.reference() as model:
            ours = model(tokens).logits
            assert all(p.requires_grad for a in policy.adapters for p in policy.parameters(a))  # nothing frozen
        with policy.base.disable_adapter():  # peft's own switch (it freezes every adapter on the way)
            peft_base = policy.base(tokens).logits
        with policy.active("actor_0") as model:
            adapted = model(tokens).logits
    assert torch.equal(ours, peft_base)
    assert not torch.allclose(adapted, peft_base)  # the adapters are back on
    with pytest.raises(RuntimeError, match="inside"), policy.reference():
        raise RuntimeError("inside")
    with torch.no_grad(), policy.active("actor_0") as model:
        assert torch.equal(model(tokens).logits, adapted)  # an error inside put the switches back too
    assert not policy.base._adapters_disabled
