"""Causal-LM mechanics shared by the policy, pre-training and the benchmarks.

- :func:`left_pad` lays prompts out for batched generation (padding on the left, so that every
  prompt ends in the last column and generation continues from there);
- :func:`common_prefix_length`, :func:`score_layout`, :func:`position_ids` and
  :func:`forward_after_prefix` run a batch whose sequences share a first part (an agent's role
  prompt) with that part computed once, its keys and values broadcast over the batch (gradients flow
  back through the broadcast);
- :func:`sampling_config` and :func:`generate` sample from exactly ``softmax(logits / T)``, every
  other sampling knob pinned off, so behaviour log-probs are those of the distribution that sampled
  (scored at another temperature they differ: ``tests/agents/test_policy.py``); :class:`ChosenLogps`
  records them step by step, keeping no step's vocabulary-wide logits once its token is drawn;
- :func:`response_lengths` cuts generated rows at their first end-of-turn token.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from transformers import DynamicCache, GenerationConfig, LlamaForCausalLM, LogitsProcessor, LogitsProcessorList

from marft_agents.models.recompute import recomputes

# transformers >= 5 names the KV-cache argument `cache`; earlier versions `past_key_values`.
CACHE_ARG = "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"
MIN_SHARED_PREFIX = 8
"""Shorter common prefixes are not worth a separate forward pass."""


def device_of(model) -> torch.device:
    """Where ``model``'s weights live (its first parameter's device): the inputs it is given go there."""
    return next(model.parameters()).device


def left_pad(
    seqs: Sequence[Sequence[int]], pad_token_id: int, device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, attention_mask)`` on ``device`` (None: torch's default), both ``(B, W)`` with ``W`` the longest sequence:
    padding first."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_token_id, dtype=torch.long, device=device)  # (B, W)
    mask = torch.zeros((len(seqs), width), dtype=torch.long, device=device)  # (B, W)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long, device=device)
        mask[i, width - len(s) :] = 1
    return ids, mask


def common_prefix_length(seqs: Sequence[Sequence[int]], min_length: int = MIN_SHARED_PREFIX) -> int:
    """Length of the first tokens every sequence shares, leaving at least one token of each after it.

    0 when that is shorter than ``min_length``. The token left over is the one whose output predicts
    what follows the sequence, so it must run with the batch, not with the prefix.
    """
    limit = min(len(s) for s in seqs) - 1
    n = 0
    while n < limit and all(s[n] == seqs[0][n] for s in seqs):
        n += 1
    return n if n >= min_length else 0


def score_layout(
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    pad_token_id: int,
    device: torch.device | None = None,
) -> tuple[int, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[shared prefix | left-padded rest of prompt | right-padded response]``, to score responses.

    Returns the prefix length ``P`` (:func:`common_prefix_length`), ``ids``/``attn`` ``(B, L + R)`` for
    what follows the prefix (``L`` the longest rest of a prompt, ``R`` the longest response) and the
    response mask ``(B, R)``, all three on ``device`` (None: torch's default). Every response starts
    at column ``L``, so the output layer can run on the last ``R + 1`` columns only; with empty
    responses every prompt ends in the last column.
    """
    P = common_prefix_length(prompts)
    rests = [p[P:] for p in prompts]
    L, R = max(len(r) for r in rests), max(len(r) for r in responses)
    ids = torch.full((len(prompts), L + R), pad_token_id, dtype=torch.long, device=device)  # (B, L + R)
    attn = torch.zeros((len(prompts), L + R), dtype=torch.long, device=device)  # (B, L + R)
    mask = torch.zeros((len(prompts), R), dtype=torch.bool, device=device)  # (B, R)
    for i, (rest, resp) in enumerate(zip(rests, responses)):
        ids[i, L - len(rest) : L + len(resp)] = torch.tensor(list(rest) + list(resp), dtype=torch.long, device=device)
        attn[i, L - len(rest) : L + len(resp)] = 1
        mask[i, : len(resp)] = True
    return P, ids, attn, mask


def position_ids(attention_mask: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Positions that count real tokens only, starting at ``offset``: ``[0, 0, 1, 1]`` -> ``[0, 0, 0, 1]``.

    ``attention_mask`` ``(B, S)`` may have padding anywhere; a pad takes the position of the real
    token before it (or ``offset`` when none), which never matters since no real token attends to it.
    """
    return offset + (attention_mask.cumsum(-1) - 1).clamp(min=0)  # (B, S)


def broadcast_cache(cache, batch: int) -> DynamicCache:
    """A one-sequence KV cache expanded (a view, no copy) to ``batch`` sequences."""
    pairs = (
        [(layer.keys, layer.values) for layer in cache.layers]
        if hasattr(cache, "layers")
        else list(zip(cache.key_cache, cache.value_cache))
    )
    return DynamicCache([(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in pairs])


def forward_after_prefix(model, prefix: Sequence[int] | torch.Tensor, ids: torch.Tensor, attn: torch.Tensor, **kwargs):
    """``model`` on ``prefix + ids[b]`` for every row ``b``, running the shared ``prefix`` only once.

    ``model`` is a causal LM or its base (``model.model``: hidden states without the output layer).
    ``ids``/``attn`` ``(B, S)`` may hold padding anywhere; positions count real tokens only. The
    prefix's keys and values are broadcast over the batch, and gradients flow back through the
    broadcast: the outputs equal those of a plain forward pass over each full sequence. Under activation
    checkpointing with gradients on (:func:`~marft_agents.models.recompute.recomputes`), whose layers drop a KV cache,
    the prefix runs with every row: the same numbers, and the outputs then have ``P`` more columns at the front (read
    them from the end, as ``logits_to_keep`` does).
    """
    B, P = ids.shape[0], len(prefix)
    if P and recomputes(model):  # checkpointed layers drop a KV cache: the prefix runs with every row instead
        ids = torch.cat(
            [torch.as_tensor(prefix, dtype=torch.long, device=ids.device).expand(B, P), ids], dim=1
        )  # (B, P + S)
        attn = torch.cat([torch.ones(B, P, dtype=attn.dtype, device=attn.device), attn], dim=1)  # (B, P + S)
        return model(input_ids=ids, attention_mask=attn, position_ids=position_ids(attn), **kwargs)
    positions = position_ids(attn, offset=P)  # (B, S)
    cache = None
    if P:
        out = model(
            input_ids=torch.as_tensor(prefix, dtype=torch.long, device=ids.device)[None], use_cache=True
        )  # (1, P), once
        cache = broadcast_cache(out[CACHE_ARG] if CACHE_ARG in out else out["past_key_values"], B)
        attn = torch.cat([torch.ones(B, P, dtype=attn.dtype, device=attn.device), attn], dim=1)  # (B, P + S)
    return model(
        input_ids=ids,
        attention_mask=attn,
        position_ids=positions,
        use_cache=cache is not None,
        **{CACHE_ARG: cache},
        **kwargs,
    )


def sampling_config(
    max_new_tokens: int, temperature: float, pad_token_id: int, eos_token_id: int, *, output_logits: bool = False
) -> GenerationConfig:
    """A ``GenerationConfig`` that samples from ``softmax(logits / temperature)`` (greedy at 0), nothing else.

    Every knob that would move the distribution away from that (top-k, top-p, min-p, typical-p, the
    repetition penalty, and whatever a checkpoint's ``generation_config.json`` sets) is pinned off.
    ``output_logits`` keeps the raw logits of every generated position (:func:`generate` does without:
    :class:`ChosenLogps` records the log-probs it needs).
    """
    greedy = temperature == 0
    return GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=not greedy,
        temperature=None if greedy else temperature,
        top_k=None,
        top_p=None,
        min_p=None,
        typical_p=None,
        repetition_penalty=None,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=None,
        return_dict_in_generate=True,
        output_logits=output_logits,
    )


def response_lengths(new: torch.Tensor, eos_token_id: int) -> list[int]:
    """Length of each generated row ``(B, L)``: up to and including its first end-of-turn token, else ``L``.

    Masks come from these lengths, never from token ids: a pad sampled inside a response, or
    anything generated after the end-of-turn token, must not change them.
    """
    is_eos = new == eos_token_id  # (B, L)
    first = torch.where(
        is_eos.any(1), is_eos.float().argmax(1) + 1, torch.full((new.shape[0],), new.shape[1], device=new.device)
    )
    return first.tolist()


class ChosenLogps(LogitsProcessor):
    """Records each generated token's log-prob under ``softmax(raw logits / T)``, one step at a time.

    Put first in ``generate``'s processors, it sees every step's raw float32 logits ``(B, V)`` (what
    ``output_logits`` would keep; processors that a checkpoint's ``generation_config`` switches on run
    before it, see the xfail in ``tests/agents/test_lm.py``) and changes nothing. Which token a step drew is known only
    at the next step, from ``input_ids``, so it holds one step's log-softmax until then and keeps the
    ``(B,)`` log-probs of the drawn tokens: memory of one step's vocabulary, not of every step's.
    """

    def __init__(self, temperature: float, prompt_width: int):
        self.temperature = temperature
        self.prompt_width = prompt_width
        self.pending: torch.Tensor | None = None
        """The last step's log-softmax ``(B, V)``, until its token is known."""
        self.steps: list[torch.Tensor] = []
        """The drawn tokens' log-probs, ``(B,)`` per generated position."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        # input_ids (B, W + t): the prompts and the t tokens drawn so far; scores (B, V): step t's raw logits
        self._settle(input_ids)
        self.pending = torch.log_softmax(scores.float() / self.temperature, dim=-1)  # (B, V)
        return scores

    def _settle(self, sequences: torch.Tensor) -> None:
        column = self.prompt_width + len(self.steps)  # where the pending step's token lands
        if self.pending is not None and column < sequences.shape[1]:
            self.steps.append(self.pending.gather(-1, sequences[:, column : column + 1]).squeeze(-1))  # (B,)
        self.pending = None

    def logps(self, sequences: torch.Tensor) -> torch.Tensor:
        """``(B, L)`` log-probs of the ``L`` tokens generated after the prompts in ``sequences`` ``(B, W + L)``."""
        self._settle(sequences)
        L = sequences.shape[1] - self.prompt_width
        return (
            torch.stack(self.steps[:L], dim=1)
            if L
            else sequences.new_zeros((sequences.shape[0], 0), dtype=torch.float32)
        )


@torch.no_grad()
def generate(
    model,
    prompts: Sequence[Sequence[int]],
    *,
    temperature: float,
    max_new_tokens: int,
    pad_token_id: int,
    eos_token_id: int,
    logprobs: bool = True,
    logits_processor=None,
) -> tuple[list[list[int]], list[torch.Tensor]]:
    """One batched ``generate`` call: ``(responses, token_logps)``.

    Each response holds its token ids up to and including the end-of-turn token when one was
    produced. ``token_logps[b]`` ``(len(responses[b]),)`` are the tokens' log-probs under the
    sampling distribution; empty when greedy (greedy tokens have no usable log-prob) or when
    ``logprobs`` is False. ``logits_processor`` (a ``transformers.LogitsProcessorList``) runs before
    the temperature; ``token_logps`` stay those of ``softmax(logits / T)`` on the raw logits
    (:class:`ChosenLogps` runs before it).
    """
    ids, mask = left_pad(prompts, pad_token_id, device_of(model))  # (B, W)
    recorder = ChosenLogps(temperature, ids.shape[1]) if logprobs and temperature != 0 else None
    if recorder is not None:
        logits_processor = LogitsProcessorList([recorder, *(logits_processor or [])])
    config = sampling_config(max_new_tokens, temperature, pad_token_id, eos_token_id)
    out = model.generate(
        input_ids=ids, attention_mask=mask, generation_config=config, logits_processor=logits_processor
    )
    new = out.sequences[:, ids.shape[1] :]  # (B, L)
    lengths = response_lengths(new, eos_token_id)
    if recorder is not None:
        logp = recorder.logps(out.sequences)  # (B, L)
        token_logps = [logp[i, :n].clone() for i, n in enumerate(lengths)]
    else:
        token_logps = [torch.empty(0, device=ids.device) for _ in prompts]
    return [new[i, :n].tolist() for i, n in enumerate(lengths)], token_logps
