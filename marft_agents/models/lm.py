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
- :func:`with_room` gives a KV cache room for the tokens to come, so that a decode step writes its
  position in place instead of copying the cache;
- :func:`response_lengths` cuts generated rows at their first end-of-turn token.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from transformers import DynamicCache, GenerationConfig, LlamaForCausalLM

try:  # transformers >= 4.56: a cache of per-layer objects
    from transformers.cache_utils import DynamicLayer
except ImportError:  # earlier: no layer objects, and no room made (with_room)
    DynamicLayer = object

from marft_agents.models.decode import DecodeStep
from marft_agents.models.recompute import recomputes
from marft_agents.models.truncation import truncate

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


class _RoomyLayer(DynamicLayer):
    """One layer's keys and values in a buffer with room for the tokens still to come.

    transformers' ``DynamicLayer`` grows by ``torch.cat``, which copies the whole cache at every decode step; here a
    step writes its one position in place, and attention reads a view of the filled part (the same numbers).
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: int):
        super().__init__()
        B, H, L, D = keys.shape
        self._keys = keys.new_empty(B, H, L + room, D)  # (B, H, L + room, D)
        self._values = values.new_empty(B, H, L + room, values.shape[-1])
        self._keys[:, :, :L], self._values[:, :, :L] = keys, values
        self.length, self.device, self.is_initialized = L, keys.device, True
        self._views()

    def _views(self) -> None:
        self.keys, self.values = self._keys[:, :, : self.length], self._values[:, :, : self.length]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        n = key_states.shape[-2]
        if self.length + n > self._keys.shape[-2]:  # out of room: grow as DynamicLayer does
            self._keys = torch.cat([self.keys, key_states], dim=-2)
            self._values = torch.cat([self.values, value_states], dim=-2)
        else:
            self._keys[:, :, self.length : self.length + n] = key_states
            self._values[:, :, self.length : self.length + n] = value_states
        self.length += n
        self._views()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._keys, self._values = self._keys[indices], self._values[indices]
        self._views()


def with_room(cache, room: int):
    """``cache`` (transformers' ``DynamicCache``) with room for ``room`` more positions per layer
    (:class:`_RoomyLayer`); a cache without per-layer objects (transformers < 4.56) as it is."""
    if not hasattr(cache, "layers") or not all(type(layer) is DynamicLayer for layer in cache.layers):
        return cache
    cache.layers = [_RoomyLayer(layer.keys, layer.values, room) for layer in cache.layers]
    return cache


def last_positions(k: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``logits_to_keep`` for the last ``k`` positions, as indices (``(k,)``, counted from the end).

    Given an int, transformers slices the positions out of the hidden states, a strided ``(B, k, d)`` view,
    and ``F.linear`` on a strided 3-D input broadcasts the output layer's weight over the batch and copies
    it: ``(B, d, V)``, 0.9 GB at batch 16 of SmolLM2 in bf16, most of a prefill's time (docs/real-models.md,
    "The output layer's copy"). Indexed positions are a contiguous copy, and the output layer one matmul.
    """
    return torch.arange(-k, 0, device=device)


def forward_after_prefix(
    model,
    prefix: Sequence[int] | torch.Tensor,
    ids: torch.Tensor,
    attn: torch.Tensor,
    *,
    use_cache: bool = False,
    **kwargs,
):
    """``model`` on ``prefix + ids[b]`` for every row ``b``, running the shared ``prefix`` only once.

    ``model`` is a causal LM or its base (``model.model``: hidden states without the output layer).
    ``ids``/``attn`` ``(B, S)`` may hold padding anywhere; positions count real tokens only. The
    prefix's keys and values are broadcast over the batch, and gradients flow back through the
    broadcast: the outputs equal those of a plain forward pass over each full sequence. Under activation
    checkpointing with gradients on (:func:`~marft_agents.models.recompute.recomputes`), whose layers drop a KV cache,
    the prefix runs with every row: the same numbers, and the outputs then have ``P`` more columns at the front (read
    them from the end, as ``logits_to_keep`` does). ``use_cache``: the output carries the keys and values of the
    prefix and the rows (:func:`generate` decodes on from them). An int ``logits_to_keep`` runs as
    :func:`last_positions`.
    """
    B, P = ids.shape[0], len(prefix)
    if isinstance(kwargs.get("logits_to_keep"), int) and kwargs["logits_to_keep"] > 0:
        kwargs["logits_to_keep"] = last_positions(kwargs["logits_to_keep"], ids.device)
    if P and recomputes(model):  # checkpointed layers drop a KV cache: the prefix runs with every row instead
        ids = torch.cat(
            [torch.as_tensor(prefix, dtype=torch.long, device=ids.device).expand(B, P), ids], dim=1
        )  # (B, P + S)
        attn = torch.cat([torch.ones(B, P, dtype=attn.dtype, device=attn.device), attn], dim=1)  # (B, P + S)
        return model(input_ids=ids, attention_mask=attn, position_ids=position_ids(attn), **kwargs)
    positions = position_ids(attn, offset=P)  # (B, S)
    cache = DynamicCache() if use_cache else None
    if P:
        keep = {"logits_to_keep": last_positions(1, ids.device)} if "logits_to_keep" in kwargs else {}  # unread
        out = model(
            input_ids=torch.as_tensor(prefix, dtype=torch.long, device=ids.device)[None], use_cache=True, **keep
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
    """A ``GenerationConfig`` for ``transformers``' own ``generate``: the baseline the benchmarks and tests hold
    :func:`generate` against (marft samples with its own loop).

    It asks for ``softmax(logits / T)`` (greedy at 0) with every other knob set to None, but transformers 5 fills a
    None knob from its global defaults (``top_k=50`` on every model) and from a checkpoint's
    ``generation_config.json``: that is one reason :func:`generate` does not call it.
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


class StopStrings:
    """Whether a response has produced one of its agent's stop strings (``agents.<agent_id>.stop``).

    A response stops at the token that completes a stop string; that token stays in the response (its
    log-prob was drawn like any other), so the text the env receives ends with the stop string, or with
    the rest of the token that completed it.
    """

    def __init__(self, tokenizer, strings: Sequence[str]):
        self.tokenizer = tokenizer
        self.strings = tuple(strings)
        # a stop string lies in the last few tokens of a response: every token spells at least one character
        # except special ones, so decoding the last len(longest) + 8 tokens sees any string a new token completes
        self.window = max(len(s) for s in self.strings) + 8

    def __call__(self, response: Sequence[int]) -> bool:
        """Whether ``response`` (its token ids so far) ends a stop string with its last token."""
        tail = self.tokenizer.decode(response[-self.window :], skip_special_tokens=True)
        before = self.tokenizer.decode(response[-self.window : -1], skip_special_tokens=True)
        # only a string the last token completed: one already in `before` stopped the response a token earlier
        return any(s in tail and s not in before for s in self.strings)


def draw(
    logits: torch.Tensor,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    generators: Sequence[torch.Generator] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(tokens, logps)`` ``(B,)`` of one decode step from raw float32 ``logits`` ``(B, V)``.

    Greedy at temperature 0 (``logps`` None). Otherwise a draw from ``softmax(truncate(logits / T))``
    (:func:`~marft_agents.models.truncation.truncate`) by inverting its cumulative distribution at a
    uniform number: one random number per row where ``torch.multinomial`` makes one per vocabulary
    entry (15 ms of a 73 ms batch-16 step of SmolLM2: ``benchmarks/speed.py``). The cumulative sum runs
    in float64, so a token's chance is its probability to ~1e-13. ``generators``: one per row, each
    row's number drawn from its own (the episode-seeded engine), else from torch's global generator.
    ``logps`` are the drawn tokens' log-probs under the same truncated distribution.
    """
    if temperature == 0:
        return logits.argmax(-1), None
    scaled = truncate(logits / temperature, top_k or None, top_p if top_p < 1.0 else None)  # (B, V)
    logp_all = torch.log_softmax(scaled, dim=-1)  # (B, V)
    cdf = logp_all.double().exp().cumsum(-1)  # (B, V), ends at ~1
    if generators is None:
        u = torch.rand(logits.shape[0], 1, dtype=torch.float64, device=logits.device)  # (B, 1)
    else:
        u = torch.cat([torch.rand(1, 1, dtype=torch.float64, generator=g, device=logits.device) for g in generators])
    # the first token whose cumulative mass passes u: a token of zero probability never does
    tokens = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp(max=logits.shape[-1] - 1)  # (B, 1)
    return tokens.squeeze(-1), logp_all.gather(-1, tokens).squeeze(-1)


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
    top_k: int = 0,
    top_p: float = 1.0,
    stop: StopStrings | None = None,
    generators: Sequence[torch.Generator] | None = None,
    lean_decode: bool = True,
) -> tuple[list[list[int]], list[torch.Tensor]]:
    """Sample responses to ``prompts`` with a KV cache: ``(responses, token_logps)``.

    Each response holds its token ids up to and including the end-of-turn token (or the token that
    completed a ``stop`` string) when one was produced. ``token_logps[b]`` ``(len(responses[b]),)``
    are the tokens' log-probs under the distribution that drew them (:func:`draw`); empty when greedy
    or when ``logprobs`` is False. ``generators``: one per prompt (the episode-seeded engine).

    marft's own loop rather than ``model.generate``: the prompts' common prefix (:func:`common_prefix_length`:
    an agent's role prompt, most of a prompt) is prefilled once and its keys and values broadcast over the
    batch, as scoring does (:func:`forward_after_prefix`); a row that has finished leaves the batch (its
    keys and values dropped from the cache), so the rest of the batch stops paying for it; the
    distribution is exactly the one asked for (``generate`` adds its global ``top_k=50`` and a
    checkpoint's settings); and a step runs only the model and :func:`draw`. ``lean_decode``: a Llama-family model
    decodes through :class:`~marft_agents.models.decode.DecodeStep` (the same computation as plain tensor code, its
    projections fused); False, or a model it does not cover, calls the model's forward at every step.
    """
    device = device_of(model)
    P = common_prefix_length(prompts)
    ids, mask = left_pad([p[P:] for p in prompts], pad_token_id, device)  # (B, W): what follows the shared prefix
    out = forward_after_prefix(model, prompts[0][:P], ids, mask, use_cache=True, logits_to_keep=1)
    cache = with_room(out[CACHE_ARG] if CACHE_ARG in out else out["past_key_values"], max_new_tokens)
    # None: the model's own forward decodes (and one token needs no decode step: its weights are not read)
    decoder = DecodeStep.of(model, cache) if lean_decode and max_new_tokens > 1 else None
    logits = out.logits[:, -1]  # (B, V)
    mask = torch.cat([mask.new_ones(len(prompts), P), mask], dim=1)  # (B, P + W): the prefix's columns too
    live = list(range(len(prompts)))  # the prompt each row of the batch answers
    responses: list[list[int]] = [[] for _ in prompts]
    logps: list[list[torch.Tensor]] = [[] for _ in prompts]  # (1,) per token
    for step in range(max_new_tokens):
        rows = [generators[i] for i in live] if generators is not None else None
        tokens, logp = draw(logits.float(), temperature, top_k, top_p, rows)  # (b,), (b,) or None
        done = []
        for r, (i, token) in enumerate(zip(live, tokens.tolist())):
            responses[i].append(token)
            if logp is not None and logprobs:
                logps[i].append(logp[r : r + 1])
            done.append(
                token == eos_token_id or step + 1 == max_new_tokens or (stop is not None and stop(responses[i]))
            )
        if all(done):
            break
        if any(done):  # finished rows leave the batch and the cache
            keep = torch.tensor([r for r, d in enumerate(done) if not d], device=device)
            cache.batch_select_indices(keep)
            mask, tokens = mask[keep], tokens[keep]
            live = [live[r] for r, d in enumerate(done) if not d]
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)  # (b, W + step + 1)
        if decoder is not None:
            logits = decoder(tokens, mask)  # (b, V)
            continue
        logits = model(
            input_ids=tokens[:, None],
            attention_mask=mask,
            position_ids=mask.sum(-1, keepdim=True) - 1,
            use_cache=True,
            **{CACHE_ARG: cache},
        ).logits[:, -1]
    empty = torch.empty(0, device=device)
    return responses, [torch.cat(p) if p else empty for p in logps]
