"""The embedded tiny model: a byte-level BPE tokenizer and a ~1 M-parameter Llama, built from scratch.

No weights can be downloaded on the machines this project targets, so the package makes its own:
``build_tokenizer`` trains a BPE on task text, ``build_model`` makes a small randomly initialised
causal LM for it, and :mod:`marft_agents.pretraining.pretrain` supervises it on the synthetic MATH tasks.

Tokenizer choices, and why:

- **Digits one per token** (``Digits(individual_digits=True)`` before the byte-level split): a tiny
  model learns column arithmetic only when every digit is its own token; merged digit groups ("23",
  "150") made it guess.
- **Byte-level alphabet**: all 256 byte symbols are in the vocabulary, so any string (any unicode,
  control characters) encodes without an unknown token, and ASCII text round-trips exactly through
  ``decode(encode(x))`` (no normaliser, no clean-up of spaces).
- **Chat tokens**: ``<|bos|>``, ``<|system|>``, ``<|user|>``, ``<|assistant|>``, ``<|end|>`` (end of a
  turn, also the ``eos_token``) and ``<|pad|>``. A turn is ``<|role|>content<|end|>``, with no
  newlines around it (short prompts are cheap prompts); the generation prompt ends with
  ``<|assistant|>``.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

PAD, BOS, END = "<|pad|>", "<|bos|>", "<|end|>"
ROLE_TOKENS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>"}
SPECIAL_TOKENS = [PAD, BOS, END, *ROLE_TOKENS.values()]
DEFAULT_VOCAB_SIZE = 1024

# Every message is <|role|>content<|end|>; the generation prompt opens the assistant's turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unknown role ' ~ message['role'] ~ ': use system, user or assistant') }}"
    "{% endif %}"
    "{{ '<|' ~ message['role'] ~ '|>' ~ message['content'] ~ '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def build_tokenizer(texts: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` (digits split one per token) and wrap it for transformers.

    ``vocab_size`` is an upper bound: on a small corpus the BPE runs out of pairs to merge first.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=END,
        pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS.values()),
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        padding_side="left",  # generation pads on the left; training code pads explicitly
        model_max_length=None,
    )


def build_model(
    tokenizer,
    *,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_size: int = 512,
    max_position_embeddings: int = 512,
    seed: int | None = None,
) -> LlamaForCausalLM:
    """A small randomly initialised Llama for ``tokenizer``, with tied input/output embeddings."""
    import torch

    if seed is not None:
        torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        do_sample=False,
        max_new_tokens=48,
    )
    return model


def count_parameters(model) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())
