"""``lora_compute``: on a bf16 base the LoRA branches compute in bf16 ("base") or in float32 (peft's "float32")."""

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import ConfigError, TrainConfig, load, validate
from marft_agents.training.trainer import build_policy

AGENTS = ["reasoner_0", "actor_0"]
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [5, 6, 7, 12, 13]]
RESPONSES = [[20, 21, 22, 23], [24, 25]]


def bf16_policy(tiny_model_dir, lora_compute: str):
    torch.manual_seed(0)  # LoRA's A matrices are drawn at construction: both policies get the same
    policy = build_policy(TrainConfig(model=str(tiny_model_dir), dtype="bfloat16", lora_compute=lora_compute), AGENTS)
    with torch.no_grad():  # LoRA B starts at zero: give every branch an output, so the branches' dtype matters
        for n, p in policy.base.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    return policy


def saved_float32_bytes(policy) -> int:
    """Bytes of float32 tensors autograd keeps for backward while the reasoner's adapter scores ``RESPONSES``."""
    kept = []

    def pack(t):
        if t.dtype == torch.float32 and not isinstance(t, torch.nn.Parameter):
            kept.append(t.numel() * 4)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        policy.score(PROMPTS, RESPONSES, "reasoner_0", 1.0)
    return sum(kept)


def test_base_compute_keeps_no_float32_copy_of_the_inputs_and_scores_as_float32_does(tiny_model_dir):
    base, peft = bf16_policy(tiny_model_dir, "base"), bf16_policy(tiny_model_dir, "float32")
    assert base.autocast is torch.bfloat16 and peft.autocast is None
    # peft's way keeps a float32 copy of every adapted layer's input: 7 layers x hidden (and intermediate) per
    # position, over both decoder layers; the base's way keeps only the chunked log-softmax's float32 rows
    assert saved_float32_bytes(base) < saved_float32_bytes(peft) / 2
    a, _, mask = base.score(PROMPTS, RESPONSES, "reasoner_0", 1.0)
    b, _, _ = peft.score(PROMPTS, RESPONSES, "reasoner_0", 1.0)
    assert a.dtype == b.dtype == torch.float32
    # the same weights; only the branch's rounding differs (bf16's 2^-8 on a small delta)
    assert torch.allclose(a[mask], b[mask], atol=0.05), (a[mask] - b[mask]).abs().max()


def test_without_grad_the_branches_compute_what_autocast_computes_and_the_weights_come_back(tiny_model_dir):
    policy = bf16_policy(tiny_model_dir, "base")
    weights = {n: p.detach().clone() for n, p in policy.base.named_parameters() if "lora_" in n}
    with torch.no_grad():  # bf16 copies of the adapter's weights
        fast, _, mask = policy.score(PROMPTS, RESPONSES, "reasoner_0", 1.0)
    cast, _, _ = policy.score(PROMPTS, RESPONSES, "reasoner_0", 1.0)  # grad on: autocast
    assert torch.equal(fast[mask], cast.detach()[mask])  # the old log-probs of a PPO ratio: exactly 1 before a step
    after = dict(policy.base.named_parameters())
    assert all(after[n].dtype == torch.float32 and torch.equal(after[n], w) for n, w in weights.items())


def test_base_compute_samples_what_it_scores(tiny_model_dir):
    policy = bf16_policy(tiny_model_dir, "base")
    torch.manual_seed(1)
    out = policy.generate(PROMPTS, "actor_0", Sampling(1.0, 6))
    logp, _, mask = policy.score(PROMPTS, out.responses, "actor_0", 1.0)
    sampled = torch.zeros_like(logp)
    for i, row in enumerate(out.token_logps):
        sampled[i, : len(row)] = torch.as_tensor(row, dtype=torch.float32)
    # the sampler and the learner run the same bf16 branches: their log-probs differ only by batch rounding
    assert torch.allclose(logp[mask], sampled[mask], atol=0.05), (logp[mask] - sampled[mask]).abs().max()


def test_a_base_compute_update_moves_every_adapter_weight_in_float32_and_no_frozen_one(tiny_model_dir):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    policy = build_policy(TrainConfig(model=str(tiny_model_dir), dtype="bfloat16"), envs[0].possible_agents)
    assert policy.autocast is torch.bfloat16  # the default
    algo = MARFT(policy, MARFTConfig(minibatch_size=2), temperature=1.0)
    torch.manual_seed(0)
    episodes = plant_rewards(RolloutEngine(policy, Sampling(1.0, 8)).collect(envs, range(4)))
    before = {n: (p.detach().clone(), p.requires_grad) for n, p in policy.base.named_parameters()}
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    after = dict(policy.base.named_parameters())
    trainable = {n for n, (_, grad) in before.items() if grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert not [n for n in trainable if torch.equal(before[n][0], after[n])], "a trainable parameter did not move"
    assert not [n for n in before.keys() - trainable if not torch.equal(before[n][0], after[n])]
    assert {after[n].dtype for n in trainable} == {torch.float32}
    assert not torch.is_autocast_enabled("cpu")  # the learner left no autocast behind


def test_a_float32_base_computes_as_before(tiny_model_dir):
    policy = build_policy(TrainConfig(model=str(tiny_model_dir), dtype="float32"), AGENTS)
    assert policy.autocast is None


def test_an_unknown_value_is_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        validate(load(overrides=["lora_compute=bf16"]))
    assert "lora_compute" in str(err.value) and "\n" not in str(err.value)
