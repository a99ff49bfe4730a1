"""The causal-LM mechanics (``marft_agents.models.lm``), and numbers pinned from the embedded model.

The pinned numbers were recorded from the policy before its mechanics moved into ``lm.py``: the
tokens it generates (greedy and sampled with a fixed seed), their behaviour log-probs, the scores and
the critic features must stay what they were.
"""

import pytest
import torch

import marft_envs
from marft_agents.models import lm
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling


def test_left_pad_puts_padding_first():
    ids, mask = lm.left_pad([[1, 2, 3], [4], [5, 6]], pad_token_id=0)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4], [0, 5, 6]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1], [0, 1, 1]]
    assert ids.dtype == mask.dtype == torch.long


@pytest.mark.parametrize(
    "mask, offset, expected",
    [
        ([[0, 0, 1, 1]], 0, [[0, 0, 0, 1]]),  # left padding: real tokens count from 0
        ([[0, 0, 1, 1]], 5, [[5, 5, 5, 6]]),  # after a 5-token prefix
        ([[1, 1, 0, 0]], 0, [[0, 1, 1, 1]]),  # right padding: a pad repeats the last real position
        ([[0, 1, 1, 0, 1, 1]], 2, [[2, 2, 3, 3, 4, 5]]),  # a gap between prompt and response
    ],
)
def test_position_ids_count_real_tokens(mask, offset, expected):
    assert lm.position_ids(torch.tensor(mask), offset).tolist() == expected


@pytest.mark.parametrize(
    "seqs, min_length, expected",
    [
        ([list(range(12)), list(range(10)) + [99]], 8, 10),
        ([list(range(10)), list(range(10))], 8, 9),  # one token of each must stay after the prefix
        ([list(range(10)), list(range(5)) + [99] * 5], 8, 0),  # 5 shared tokens: below the minimum
        ([list(range(10)), list(range(5)) + [99] * 5], 2, 5),
        ([[1, 2, 3]], 1, 2),
    ],
)
def test_common_prefix_length(seqs, min_length, expected):
    assert lm.common_prefix_length(seqs, min_length) == expected


def test_response_lengths_end_at_the_first_eos():
    eos, pad = 2, 0
    new = torch.tensor([[5, eos, pad], [7, 8, 9], [eos, 3, 3], [pad, 4, eos]])
    assert lm.response_lengths(new, eos) == [2, 3, 1, 3]


def test_sampling_config_pins_every_knob():
    config = lm.sampling_config(12, 0.7, pad_token_id=0, eos_token_id=2, output_logits=True)
    assert (config.do_sample, config.temperature, config.max_new_tokens) == (True, 0.7, 12)
    assert config.top_k is config.top_p is config.min_p is config.typical_p is config.repetition_penalty is None
    assert config.output_logits and config.return_dict_in_generate
    greedy = lm.sampling_config(12, 0.0, pad_token_id=0, eos_token_id=2)
    assert (greedy.do_sample, greedy.temperature, greedy.output_logits) == (False, None, False)


def test_generate_ignores_the_checkpoints_sampling_settings(tiny_model_dir):
    # A checkpoint's generation_config.json may ask for top-k, top-p or a repetition penalty; the
    # pinned config must override them, or behaviour log-probs would be of another distribution.
    model, tok = load_base(str(tiny_model_dir))
    model.generation_config.update(do_sample=True, top_k=2, top_p=0.05, repetition_penalty=3.0)
    prompts = [[5, 6, 7, 8], [9, 10]]
    torch.manual_seed(0)
    responses, token_logps = lm.generate(
        model, prompts, temperature=1.0, max_new_tokens=6, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id
    )
    ranks = []
    for prompt, response, logps in zip(prompts, responses, token_logps):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1]  # (R, V)
        target = torch.tensor(response)
        torch.testing.assert_close(torch.log_softmax(logits, -1).gather(-1, target[:, None])[:, 0], logps, atol=1e-5, rtol=1e-5)
        ranks += (logits > logits.gather(-1, target[:, None])).sum(-1).tolist()
    assert max(ranks) >= 2  # top-k 2 would only ever sample the two likeliest tokens


def test_generate_prefills_a_shared_prefix_once_and_samples_what_plain_forward_passes_give(tiny_model_dir):
    model, tok = load_base(str(tiny_model_dir))
    prefix = list(range(20, 32))  # an agent's role prompt: longer than MIN_SHARED_PREFIX
    prompts = [prefix + [40, 41, 42], prefix + [43], prefix + [44, 45]]
    shapes = []
    hook = model.register_forward_pre_hook(lambda m, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    torch.manual_seed(0)
    try:
        responses, token_logps = lm.generate(
            model, prompts, temperature=1.0, max_new_tokens=6, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id
        )
    finally:
        hook.remove()
    assert shapes[:2] == [(1, len(prefix)), (3, 3)]  # the prefix once, then each prompt's rest, left-padded
    for prompt, response, logps in zip(prompts, responses, token_logps):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1]  # (R, V)
        target = torch.tensor(response)
        torch.testing.assert_close(torch.log_softmax(logits, -1).gather(-1, target[:, None])[:, 0], logps, atol=1e-5, rtol=1e-5)


def test_a_roomy_cache_layer_writes_in_place_and_reads_as_a_growing_one():
    keys = torch.arange(12.0).reshape(2, 1, 3, 2)  # (B, H, L, D)
    layer = lm._RoomyLayer(keys, -keys, room=2)
    assert layer.get_seq_length() == 3 and layer._keys.shape == (2, 1, 5, 2)
    step = torch.full((2, 1, 1, 2), 100.0)
    k, v = layer.update(step, -step)
    torch.testing.assert_close(k, torch.cat([keys, step], dim=-2), rtol=0, atol=0)
    torch.testing.assert_close(v, -torch.cat([keys, step], dim=-2), rtol=0, atol=0)
    assert k.data_ptr() == layer._keys.data_ptr()  # a view of the buffer: nothing copied
    layer.batch_select_indices(torch.tensor([1]))  # row 0 finished
    assert layer.keys.shape == (1, 1, 4, 2) and layer.keys[0, 0, :, 0].tolist() == [6.0, 8.0, 10.0, 100.0]
    layer.update(step[:1] + 1, -step[:1])  # the last place of room
    k, _ = layer.update(step[:1] + 2, -step[:1])  # past it: grows
    assert k[0, 0, :, 0].tolist() == [6.0, 8.0, 10.0, 100.0, 101.0, 102.0] and layer.get_seq_length() == 6


def test_generate_samples_the_same_with_a_roomy_cache_as_with_a_growing_one(tiny_model_dir, monkeypatch):
    model, tok = load_base(str(tiny_model_dir))
    prompts = [[5, 6, 7, 8], [9], [10, 11]]

    def sample(eos):
        torch.manual_seed(0)
        return lm.generate(model, prompts, temperature=1.0, max_new_tokens=12, pad_token_id=tok.pad_token_id, eos_token_id=eos)

    free, _ = sample(-1)  # no end: every row runs all 12 steps
    ends = (-1, free[1][3])  # with the token row 1 drew 4th as the end, row 1 leaves the batch by then
    roomy = [sample(eos) for eos in ends]
    monkeypatch.setattr(lm, "with_room", lambda cache, room: cache)
    growing = [sample(eos) for eos in ends]
    assert len(roomy[1][0][1]) <= 4
    for (responses, logps), (plain_responses, plain_logps) in zip(roomy, growing):
        assert responses == plain_responses
        for a, b in zip(logps, plain_logps):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_the_last_positions_logits_take_one_matmul_not_a_copy_of_the_output_layer_per_row(tiny_model_dir):
    model, _ = load_base(str(tiny_model_dir))
    V = model.config.vocab_size
    prefix, rests = list(range(20, 32)), [[40, 41, 42], [43], [44, 45]]
    ids, attn = lm.left_pad(rests, pad_token_id=0)  # (3, 3)
    with torch.no_grad(), torch.profiler.profile(record_shapes=True) as prof:
        last = lm.forward_after_prefix(model, prefix, ids, attn, logits_to_keep=1).logits  # (3, 1, V)
    # an int logits_to_keep slices a strided view, and F.linear on it broadcasts the (d, V) weight over the batch
    broadcast = [e for e in prof.events() if e.name in ("aten::bmm", "aten::copy_") and any(V in s for s in e.input_shapes if s)]
    assert last.shape == (3, 1, V) and not broadcast
    with torch.no_grad():
        for b, rest in enumerate(rests):
            plain = model(input_ids=torch.tensor([prefix + rest])).logits[0, -1]
            torch.testing.assert_close(last[b, 0], plain, atol=1e-5, rtol=1e-5)
    assert lm.last_positions(2).tolist() == [-2, -1]


def test_generate_greedy_has_no_logps_and_stops_at_eos(tiny_model_dir):
    model, tok = load_base(str(tiny_model_dir))
    responses, token_logps = lm.generate(
        model, [[5, 6, 7]], temperature=0.0, max_new_tokens=5, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id
    )
    assert token_logps[0].numel() == 0
    assert 1 <= len(responses[0]) <= 5 and tok.eos_token_id not in responses[0][:-1]
    # greedy: each token is the argmax after the ones before it
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[5, 6, 7] + responses[0]])).logits[0, 2:-1]
    assert logits.argmax(-1).tolist() == responses[0]


def test_forward_after_prefix_equals_full_forward_passes(tiny_model_dir):
    model, _ = load_base(str(tiny_model_dir))
    prefix = list(range(20, 30))
    rests = [[31, 32, 33], [34], [35, 36]]
    ids, attn = lm.left_pad(rests, pad_token_id=0)  # (3, 3)
    with torch.no_grad():
        fast = lm.forward_after_prefix(model, prefix, ids, attn).logits  # (3, 3, V)
        for b, rest in enumerate(rests):
            plain = model(input_ids=torch.tensor([prefix + rest])).logits[0, -len(rest) :]
            torch.testing.assert_close(fast[b, -len(rest) :], plain, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def embedded_policy():
    torch.manual_seed(0)  # LoRA's A matrices are drawn at construction
    model, tokenizer = load_base("embedded")
    env = marft_envs.make("marft/MathChain-v0")
    policy = LaMASPolicy(model, tokenizer, env.possible_agents)
    prompts = []
    for seed in range(3):
        env.reset(seed=seed)
        prompts.append(policy.prompt(env.observe("reasoner_0")))
    return policy, prompts


def test_pinned_greedy_generation(embedded_policy):
    policy, prompts = embedded_policy
    assert [len(p) for p in prompts] == [71, 71, 80]
    gen = policy.generate(prompts, "reasoner_0", Sampling(0.0, 24))
    assert gen.responses == [
        [23, 20, 28, 15, 26, 34, 22, 21, 20, 28, 2],
        [28, 27, 16, 30, 26, 34, 22, 27, 22, 2],
        [22, 20, 24, 16, 26, 20, 27, 34, 22, 24, 20, 22, 23, 2],
    ]
    assert gen.texts == ["2/7*5=10/7", "76+95=161", "1/3+5/6=13/12"]
    assert all(t.numel() == 0 for t in gen.token_logps)


@pytest.mark.parametrize(
    "temperature, seed, responses, logp_sums",
    [
        (
            0.7,
            1,
            [
                [23, 20, 28, 15, 26, 34, 23, 694, 23, 20, 24, 2],
                [28, 27, 16, 30, 26, 34, 22, 28, 22, 2],
                [22, 20, 24, 16, 26, 20, 27, 34, 22, 24, 20, 24, 2],
            ],
            [-10.61143, -2.100577, -4.855],
        ),
        (
            1.0,
            2,
            [
                [23, 20, 28, 15, 26, 34, 25, 20, 28, 2],
                [28, 27, 16, 30, 26, 34, 22, 28, 22, 2],
                [22, 20, 24, 16, 26, 20, 27, 34, 28, 20, 22, 23, 2],
            ],
            [-2.501376, -2.001048, -3.738495],
        ),
    ],
)
def test_pinned_sampled_generation(embedded_policy, temperature, seed, responses, logp_sums):
    # pinned from marft's decode loop (inverse-CDF draws, 2026-12-06); the learner's scoring of the same responses
    # gives the same sums (below), which is what makes the pins right rather than merely recorded
    policy, prompts = embedded_policy
    torch.manual_seed(seed)
    gen = policy.generate(prompts, "reasoner_0", Sampling(temperature, 24))
    assert gen.responses == responses
    torch.testing.assert_close(torch.stack([t.sum() for t in gen.token_logps]), torch.tensor(logp_sums), atol=2e-5, rtol=0)
    with torch.no_grad():
        logp, _, mask = policy.score(prompts, responses, "reasoner_0", temperature)
    torch.testing.assert_close((logp * mask).sum(-1), torch.tensor(logp_sums), atol=2e-5, rtol=0)


def test_pinned_scores_and_features(embedded_policy):
    policy, prompts = embedded_policy
    responses = [
        [23, 20, 28, 15, 26, 34, 23, 2],
        [28, 27, 16, 30, 26, 34, 22, 27, 22, 2],
        [22, 20, 24, 16, 26, 20, 27, 34, 23, 22, 20, 22, 23, 2],
    ]
    with torch.no_grad():
        logp, entropy, mask = policy.score(prompts, responses, None, 0.7)
        features = policy.features(prompts)
        token_features = policy.token_features(prompts, responses)
    assert mask.sum(-1).tolist() == [8, 10, 14]
    torch.testing.assert_close((logp * mask).sum(-1), torch.tensor([-1.397575, -0.624762, -5.168759]), atol=2e-5, rtol=0)
    torch.testing.assert_close((entropy * mask).sum(-1), torch.tensor([2.238785, 1.549622, 5.661491]), atol=2e-5, rtol=0)
    assert features.shape == (3, 128)
    torch.testing.assert_close(
        features[:, :3].flatten(),
        torch.tensor([-1.267886, 0.513917, 3.548304, -0.522351, -0.602468, 0.847631, 2.130107, -1.926023, 0.536113]),
        atol=2e-5,
        rtol=0,
    )
    assert token_features.shape == (3, 14, 128)
    torch.testing.assert_close(token_features[:, 1, 0], torch.tensor([1.727089, -1.786824, 2.68676]), atol=2e-5, rtol=0)


def test_score_layout_aligns_every_response_at_one_column():
    prefix = list(range(10, 20))  # 10 shared tokens: split off
    prompts = [prefix + [1, 2], prefix + [3]]
    P, ids, attn, mask = lm.score_layout(prompts, [[7], [8, 9, 6]], pad_token_id=0)
    assert P == 10
    assert ids.tolist() == [[1, 2, 7, 0, 0], [0, 3, 8, 9, 6]]  # rests end at column 2, responses start there
    assert attn.tolist() == [[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]]
    assert mask.tolist() == [[True, False, False], [True, True, True]]
    P, ids, attn, mask = lm.score_layout([[1, 2, 3], [4]], [[], []], pad_token_id=0)  # short prompts: no prefix
    assert (P, ids.tolist(), attn.tolist(), mask.shape) == (0, [[1, 2, 3], [0, 0, 4]], [[1, 1, 1], [0, 0, 1]], (2, 0))
