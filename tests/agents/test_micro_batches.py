"""Micro-batches (issue 52, memory): a minibatch scored and back-propagated in parts of at most ``micro_batch_tokens``
padded tokens steps as the whole minibatch would, to float32 summation order."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.data_parallel import WHOLE, Share, passes, pieces
from marft_agents.algorithms.grpo import GRPO, GRPOConfig
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.algorithms.marft_token import MARFTToken, MARFTTokenConfig
from marft_agents.algorithms.ppo import PPO, PPOConfig
from marft_agents.algorithms.ppo_settings import micro_batch_tokens
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import ConfigError, load, validate


@pytest.mark.parametrize(
    ("lengths", "max_tokens", "expected"),
    [
        ((10, 30, 20, 50, 5), 60, [[0, 1], [2], [3], [4]]),  # 2 x 30 fits; 3 x 30 does not; 50 alone; 2 x 50 does not
        ((10, 30, 20, 50, 5), 100, [[0, 1, 2], [3, 4]]),  # 3 x 30 = 90; then 2 x 50 = 100 fits exactly
        ((10, 30, 20, 50, 5), 0, [[0, 1, 2, 3, 4]]),  # 0: the whole minibatch
        ((200, 10), 100, [[0], [1]]),  # a row longer than the cap runs alone
        ((10, 10, 10, 10), 40, [[0, 1, 2, 3]]),  # 4 x 10 fits
    ],
)
def test_pieces_cut_rows_in_order_at_rows_times_their_longest_length(lengths, max_tokens, expected):
    parts = pieces(np.arange(len(lengths)), np.asarray(lengths), max_tokens)
    assert [p.tolist() for p in parts] == expected


def test_a_minibatch_cut_in_micro_batches_shares_its_step_by_rows_and_tokens():
    # prompt + response lengths 10, 30, 20, 50 (responses 1, 2, 3, 4 tokens); one minibatch of 4 rows, at most 60 tokens
    steps = [SimpleNamespace(prompt=[0] * (n - r), response=[0] * r) for n, r in ((10, 1), (30, 2), (20, 3), (50, 4))]
    parts = list(passes(steps, [0, 1, 2, 3], None, minibatch_size=4, epochs=1, max_tokens=60))
    assert [rows.tolist() for rows, _ in parts] == [[0, 1], [2], [3]]
    assert [share for _, share in parts] == [
        Share(rows=2 / 4, tokens=3 / 10, first=True, last=False),
        Share(rows=1 / 4, tokens=3 / 10, first=False, last=False),
        Share(rows=1 / 4, tokens=4 / 10, first=False, last=True),
    ]
    whole = list(passes(steps, [0, 1, 2, 3], None, minibatch_size=4, epochs=1, max_tokens=1000))
    assert [(rows.tolist(), share) for rows, share in whole] == [([0, 1, 2, 3], WHOLE)]


LEARNERS = {
    "marft": (MARFT, MARFTConfig, "marft/MathChain-v0"),
    "marft_token": (MARFTToken, MARFTTokenConfig, "marft/MathChain-v0"),
    "grpo": (GRPO, GRPOConfig, "marft/MathChain-v0"),
    "ppo": (PPO, PPOConfig, "marft/MathSolo-v0"),
}


@pytest.mark.parametrize("name", list(LEARNERS))
def test_micro_batches_step_as_their_whole_minibatch(tiny_model_dir, name):
    torch.set_num_threads(1)
    learner_cls, config_cls, env_id = LEARNERS[name]
    envs = [marft_envs.make(env_id) for _ in range(4)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    torch.manual_seed(0)
    engine = RolloutEngine(policy, Sampling(1.0, 6), skip_ignored=False)
    episodes = plant_rewards(engine.collect(envs, range(4), seed_of=lambda i: i // 2))  # GRPO's groups of 2
    start = {a: policy.adapter_state(a) for a in policy.adapters}
    longest = max(len(s.prompt) + len(s.response) for e in episodes for s in e.steps)
    scored: list[int] = []
    score = policy.score

    def counted(prompts, *args, **kwargs):
        scored.append(len(prompts))
        return score(prompts, *args, **kwargs)

    policy.score = counted

    def weights_after(micro_batch_tokens: int) -> dict[str, torch.Tensor]:
        for a in policy.adapters:
            policy.load_adapter_state(a, start[a])
        options = dict(minibatch_size=4, micro_batch_tokens=micro_batch_tokens, entropy_coef=0.01)
        config = config_cls(**options, **({"group_size": 2} if name == "grpo" else {}))
        torch.manual_seed(1)  # the same critic head for every learner
        learner = learner_cls(policy, config, temperature=1.0)
        scored.clear()
        metrics = learner.update(copy.deepcopy(episodes), 0, np.random.default_rng(0))
        assert all(np.isfinite(v) for v in metrics.values())
        return {f"{a}:{n}": w for a in policy.adapters for n, w in policy.adapter_state(a).items()}

    whole = weights_after(0)
    whole_passes = list(scored)
    micro = weights_after(longest)  # at most one row of the longest length: every minibatch in parts
    assert len(scored) > len(whole_passes) and max(scored) < max(whole_passes)  # the minibatches did run in parts
    moved = max(float((whole[k] - start[k.split(":")[0]][k.split(":", 1)[1]]).abs().max()) for k in whole)
    assert moved > 1e-5  # the update stepped
    # The same step, to float32 summation order. Adam's first step moves each weight by about lr (3e-4) times
    # g / (|g| + eps): where a weight's gradient sums to nearly 0 the order's rounding is a large part of it, and its
    # step moved by up to 1.5e-6 between two runs of this test (a machine's worker processes); a part counted with
    # the wrong share of rows or tokens moves the steps by about lr.
    for k in whole:
        torch.testing.assert_close(micro[k], whole[k], rtol=0, atol=1e-5)


def chain_batch(model_dir, n: int) -> tuple[LaMASPolicy, list, list[int]]:
    """A policy of the model at ``model_dir``, ``n`` of its MathChain episodes with rewards, and the list its scoring
    passes append their rows' count to."""
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(n)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    torch.manual_seed(0)
    episodes = plant_rewards(RolloutEngine(policy, Sampling(1.0, 6), skip_ignored=False).collect(envs, range(n)))
    scored: list[int] = []
    score = policy.score
    policy.score = lambda prompts, *a, **k: scored.append(len(prompts)) or score(prompts, *a, **k)
    return policy, episodes, scored


def test_under_the_kl_gate_minibatches_run_whole(tiny_model_dir):
    # the gate judges a whole minibatch's KL before its step: a micro-batch cannot be judged alone
    policy, episodes, scored = chain_batch(tiny_model_dir, 4)
    config = MARFTConfig(minibatch_size=4, micro_batch_tokens=1, kl_gate=1e9)
    MARFT(policy, config, temperature=1.0).update(episodes, 0, np.random.default_rng(0))
    assert scored and all(n == 4 for n in scored)  # each agent's 4 steps in one pass


def test_a_negative_micro_batch_size_is_one_line_naming_its_key():
    with pytest.raises(ConfigError, match=r"^marft\.micro_batch_tokens must be >= 0, got -1$"):
        validate(load(overrides=["marft.micro_batch_tokens=-1"]))


def _config(hidden: int, layers: int, vocab: int) -> SimpleNamespace:
    return SimpleNamespace(hidden_size=hidden, num_hidden_layers=layers, vocab_size=vocab)


@pytest.mark.parametrize(
    ("setting", "config", "expected"),
    [
        (0, _config(128, 4, 868), 0),  # given: kept (0: whole minibatches)
        (2048, _config(128, 4, 868), 2048),
        (None, _config(576, 30, 49152), 1024),  # SmolLM2-135M: 576 x 30 + 49152 = 66432, the reference width
        (None, _config(288, 30, 24576), 2048),  # 8640 + 24576 = 33216: half as wide, twice the tokens
        (None, _config(128, 4, 868), 49294),  # the embedded model: 512 + 868 = 1380; 1024 x 66432 / 1380 = 49294.5
        (None, _config(896, 24, 151936), 1024),  # Qwen2.5-0.5B: 173440, wider: never below 1024 (392 unrounded)
        (None, None, 1024),  # no config: the default
        (None, SimpleNamespace(hidden_size=576), 1024),  # no width to read
    ],
)
def test_the_default_micro_batch_scales_up_for_a_model_narrower_than_smollm2(setting, config, expected):
    assert micro_batch_tokens(setting, config) == expected


def test_by_default_a_narrow_model_runs_whole_minibatches_that_256_tokens_cut(tiny_model_dir):
    policy, episodes, scored = chain_batch(tiny_model_dir, 8)
    longest = max(len(s.prompt) + len(s.response) for e in episodes for s in e.steps)
    assert 8 * longest > 256  # 8 rows of a minibatch would not fit in 256 tokens
    for setting, whole in ((None, True), (256, False)):
        scored.clear()
        config = MARFTConfig(minibatch_size=8, micro_batch_tokens=setting)
        MARFT(policy, config, temperature=1.0).update(episodes, 0, np.random.default_rng(0))
        assert scored and all(n == 8 for n in scored) == whole, (setting, scored)
