"""``generation.merge_lora``: generating with the adapter merged into the base, which comes back bit-identical."""

import json

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.engines import make_engine
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import ConfigError, TrainConfig, load, validate
from marft_agents.training.trainer import build_policy, train

AGENTS = ["reasoner_0", "actor_0"]


def trained_policy(model_dir):
    """A policy whose two adapters are far from their no-op start (so a merge moves the weights)."""
    policy = build_policy(TrainConfig(model=str(model_dir)), AGENTS)
    with torch.no_grad():
        torch.manual_seed(1)
        for a in policy.adapters:
            for p in policy.parameters(a):
                p.add_(0.3 * torch.randn_like(p))
    return policy


def snapshot(policy):
    return {n: p.detach().clone() for n, p in policy.base.named_parameters()}


def prompts(policy, n=3):
    env = marft_envs.make("marft/MathChain-v0")
    out = []
    for seed in range(n):
        env.reset(seed=seed)
        out.append(policy.prompt(env.observe("reasoner_0")))
    return out


def logits(model, prompt):
    return model(input_ids=torch.tensor([prompt])).logits[0]  # (T, V)


def test_the_merged_model_computes_what_the_adapter_does(tiny_model_dir):
    policy = trained_policy(tiny_model_dir)
    prompt = prompts(policy, 1)[0]
    with torch.no_grad():
        with policy.active("actor_0") as model:
            want = logits(model, prompt)
        with policy.merged("actor_0") as model:
            got = logits(model, prompt)
        with policy.reference() as model:
            base = logits(model, prompt)
    assert (want - base).abs().max() > 1e-2  # the adapter matters here
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_the_base_comes_back_bit_identical_and_the_adapters_stay_trainable(tiny_model_dir):
    policy = trained_policy(tiny_model_dir)
    before = snapshot(policy)
    trainable = {n for n, p in policy.base.named_parameters() if p.requires_grad}
    for _ in range(5):  # repeated merges: nothing may drift
        for a in policy.adapters:
            policy.generate(prompts(policy), a, Sampling(1.0, 6), merge=True)
    after = snapshot(policy)
    assert not [n for n in before if not torch.equal(before[n], after[n])]
    assert {n for n, p in policy.base.named_parameters() if p.requires_grad} == trainable


def test_the_base_comes_back_when_generation_fails(tiny_model_dir):
    policy = trained_policy(tiny_model_dir)
    before = snapshot(policy)
    with pytest.raises(RuntimeError, match="stop"), policy.merged("reasoner_0"):
        raise RuntimeError("stop")
    assert all(torch.equal(before[n], p) for n, p in policy.base.named_parameters())


def test_untuned_adapters_merge_to_exactly_the_base(tiny_model_dir):
    policy = build_policy(TrainConfig(model=str(tiny_model_dir)), AGENTS)  # lora_B = 0: a no-op
    ps = prompts(policy)
    greedy = Sampling(0.0, 8)
    assert policy.generate(ps, "reasoner_0", greedy, merge=True).responses == policy.generate(ps, "reasoner_0", greedy).responses


def test_an_update_on_merged_rollouts_changes_every_trainable_parameter_and_no_frozen_one(tiny_model_dir):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    policy = build_policy(TrainConfig(model=str(tiny_model_dir)), envs[0].possible_agents)
    engine = make_engine("hf", policy, merge_lora=True)
    torch.manual_seed(0)
    episodes = plant_rewards(
        RolloutEngine(policy, Sampling(1.0, 8), engine=engine).collect(envs, range(4))
    )  # returns that differ: a policy step
    before = {n: (p.detach().clone(), p.requires_grad) for n, p in policy.base.named_parameters()}
    MARFT(policy, MARFTConfig(minibatch_size=2), temperature=1.0).update(episodes, 0, np.random.default_rng(0))
    after = dict(policy.base.named_parameters())
    trainable = {n for n, (_, grad) in before.items() if grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert not [n for n in trainable if torch.equal(before[n][0], after[n])], "a trainable parameter did not move"
    assert not [n for n in before.keys() - trainable if not torch.equal(before[n][0], after[n])]


def test_a_run_with_merge_lora_trains_and_records_it(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    config = load(overrides=[f"model={tiny_model_dir}", f"run_dir={run}", "generation.merge_lora=true"])
    config.updates, config.episodes_per_update, config.eval_episodes, config.eval_rounds, config.max_new_tokens = 1, 4, 4, 0, 6
    summary = train(config, progress=False, quiet=True)
    assert json.loads((run / "config.json").read_text())["generation"]["merge_lora"] is True
    assert summary["updates"] == 1


@pytest.mark.parametrize("overrides", [["generation.engine=vllm"], ["distributed.workers=2"]])
def test_merge_lora_is_refused_where_it_would_not_apply(overrides):
    with pytest.raises(ConfigError, match="generation.merge_lora merges adapters for the in-process hf engine") as err:
        validate(load(overrides=["generation.merge_lora=true", *overrides]))
    assert "\n" not in str(err.value)
