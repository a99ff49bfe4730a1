"""The lean decode step (``models/decode.py``) computes what the model's own forward computes, for every adapter."""

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from marft_agents.models import lm
from marft_agents.models.decode import DecodeStep

VOCAB = 97
LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def llama(kv_heads=1):
    """A random Llama with grouped-query attention (4 query heads share ``kv_heads``)."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=kv_heads, max_position_embeddings=128, tie_word_embeddings=False,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def qwen2():
    """A random Qwen2: biases on q/k/v."""
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    return Qwen2ForCausalLM(config).eval()


def with_adapters(model, targets=LINEARS, dtype=None):
    """``model`` under peft with two adapters far from their no-op start; "b" active."""
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=targets, lora_dropout=0.0), "a")
    peft.add_adapter("b", LoraConfig(r=2, lora_alpha=4, target_modules=targets, lora_dropout=0.0))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_" in name:
                p.add_(0.3 * torch.randn_like(p))
    if dtype is not None:
        peft.to(dtype)
    peft.set_adapter("b")
    return peft.eval()


PROMPTS = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 3], [5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 4], [5, 6, 7, 8, 9, 10, 11, 12, 2]]
"""Unequal lengths (left padding) sharing an eight-token prefix (prefilled once)."""


def sample(model, lean, eos=-1, tokens=12, temperature=0.9):
    generators = [torch.Generator().manual_seed(10 + i) for i in range(len(PROMPTS))]
    return lm.generate(
        model, PROMPTS, temperature=temperature, max_new_tokens=tokens, pad_token_id=0, eos_token_id=eos,
        generators=generators, lean_decode=lean,
    )  # fmt: skip


MODELS = {
    "llama, grouped-query": lambda: llama(),
    "llama, a head per key": lambda: llama(kv_heads=4),
    "llama + LoRA on every linear": lambda: with_adapters(llama()),
    "llama + LoRA on q and v": lambda: with_adapters(llama(), ["q_proj", "v_proj"]),
    "qwen2 + LoRA": lambda: with_adapters(qwen2()),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_float32_draws_the_same_tokens_with_the_same_logps(name):
    model = MODELS[name]()
    with torch.no_grad():
        assert DecodeStep.of(model, cache_for(model)) is not None  # the lean step runs
        want, want_logps = sample(model, lean=False)
        got, got_logps = sample(model, lean=True)
    assert got == want
    for g, w in zip(got_logps, want_logps):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_rows_that_finish_early_leave_the_batch_alike():
    model = with_adapters(llama())
    with torch.no_grad():
        free, _ = sample(model, lean=False, tokens=16)
        eos = free[0][3]  # a token the first row draws at its fourth step: it ends there, the others go on
        want, want_logps = sample(model, lean=False, eos=eos, tokens=16)
        got, got_logps = sample(model, lean=True, eos=eos, tokens=16)
    assert got == want and len(got[0]) <= 4 and max(len(r) for r in got) > 4
    for g, w in zip(got_logps, want_logps):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def step_logits(model, lean):
    """The logits of the first decode step after ``PROMPTS``, with the model's forward or the lean step."""
    ids, mask = lm.left_pad(PROMPTS, 0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=lm.position_ids(mask), use_cache=True)
    cache = lm.with_room(out.past_key_values, 4)
    token = out.logits[:, -1].argmax(-1)  # (B,)
    mask = torch.cat([mask, mask.new_ones(len(PROMPTS), 1)], dim=1)
    if lean:
        return DecodeStep.of(model, cache)(token, mask)
    pos = mask.sum(-1, keepdim=True) - 1
    return model(input_ids=token[:, None], attention_mask=mask, position_ids=pos, past_key_values=cache).logits[:, -1]


@pytest.mark.parametrize("lora_dtype", [torch.bfloat16, torch.float32])
def test_bfloat16_rounds_about_as_the_forward_does(lora_dtype):
    model = with_adapters(llama())
    model.to(torch.bfloat16)
    for name, p in model.named_parameters():
        if "lora_" in name:
            p.data = p.data.to(lora_dtype)  # lora_compute=float32 keeps the branches in float32 on a bf16 base
    with torch.no_grad():
        want, got = step_logits(model, lean=False).float(), step_logits(model, lean=True).float()
    assert got.dtype == want.dtype
    # bf16 keeps 8 bits: a fused matmul may round otherwise, by about one bf16 step of the logits' size
    assert (got - want).abs().max() <= 0.05 * want.abs().max()


def test_the_merged_weights_decode_through_the_lean_step_with_adapters_off():
    model = with_adapters(llama())
    with torch.no_grad(), model.disable_adapter():  # as LaMASPolicy.merged runs the base with its swapped weights
        want, got = step_logits(model, lean=False), step_logits(model, lean=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def cache_for(model):
    ids, mask = lm.left_pad(PROMPTS, 0)
    return lm.with_room(model(input_ids=ids, attention_mask=mask, use_cache=True).past_key_values, 2)


def test_what_it_does_not_compute_is_left_to_the_forward():
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2)).eval()
    with torch.no_grad():
        assert DecodeStep.of(gpt2, cache_for(gpt2)) is None  # another architecture
        training = llama().train()
        assert DecodeStep.of(training, cache_for(training)) is None  # dropout and friends would run
        dropout = get_peft_model(llama(), LoraConfig(r=2, target_modules=["q_proj"], lora_dropout=0.1)).train()
        dropout.base_model.model.eval()  # the base in eval, the LoRA dropout in training
        for m in dropout.modules():
            if isinstance(m, torch.nn.Dropout):
                m.train()
        assert DecodeStep.of(dropout, cache_for(dropout)) is None
        plain = llama()
        assert DecodeStep.of(plain, cache_for(plain)) is not None
