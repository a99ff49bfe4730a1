"""A Llama-family decode step as plain tensor code: one new position for every row of a batch.

Why: in eager PyTorch a small model's decode step is dominated by calls, not arithmetic. A batch-16 step of
SmolLM2-135M in bf16 makes about 1,400 ``nn.Module`` calls, 230 of them peft's LoRA branches, and they cost about a
third of the step (docs/real-models.md, "The lean decode step"). :class:`DecodeStep` reads the model's weights once per
generation and runs each layer as a handful of tensor operations: the base's q/k/v and gate/up projections
concatenated (four matmuls a layer where transformers runs seven), a LoRA adapter's A matrices as extra rows of the
base's matmul and its B matrices as one block-diagonal matmul.

It computes what transformers' ``LlamaForCausalLM`` and peft's ``lora.Linear`` compute, grouped but in the same
dtypes (RMSNorm in float32, rotary tables in the hidden states' dtype, attention over the key/value heads as
transformers' SDPA path runs a one-token query with padding). A concatenated matmul may round differently from its
parts, so the numbers agree to the last bits, not bit for bit: float32 draws the same tokens under a fixed seed
(``tests/agents/test_decode.py``); bf16 rounds about as another thread count would.

Supported: ``model_type`` "llama" (SmolLM2, the embedded tiny model) and "qwen2" without its sliding window, bare or
under peft with plain LoRA on any of their linear layers, in eval mode. :meth:`DecodeStep.of` returns None for
anything else (another architecture, a LoRA variant, dropout that would run, several active adapters), and
:func:`~marft_agents.models.lm.generate` then decodes through the model's own forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

SUPPORTED = ("llama", "qwen2")
"""The ``model_type`` values whose decoder layers :class:`DecodeStep` computes."""


@dataclass
class _Projection:
    """Several linear layers that read the same input, run as one matmul of the base and one of the adapter.

    The base's weights are concatenated, and the active LoRA adapter's A matrices of its parts below them where they
    share the base's dtype (one matmul gives both), beside them otherwise; the parts' B matrices form one
    block-diagonal matrix. A part without the adapter has zero rows in it."""

    weight: torch.Tensor  # (N + R, d): the parts' base weights (N outs), then their A matrices (R ranks) if fused
    bias: torch.Tensor | None  # (N + R,) or (N,)
    splits: list[int]  # each part's out features (they sum to N)
    out_features: int  # N
    lora_a: torch.Tensor | None  # (R, d) when the adapter's dtype is not the base's; None: fused above, or no adapter
    lora_b: torch.Tensor | None  # (N, R) block-diagonal, each rank's column times its part's LoRA scaling, in the
    # adapter's dtype; None: no part has the adapter

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The parts' outputs for ``x`` ``(B, d)``, side by side: ``(B, N)``."""
        y = F.linear(x, self.weight, self.bias)  # (B, N [+ R])
        N = self.out_features
        if self.lora_b is None:
            return y
        if self.lora_a is None:  # the adapter's A rows ran with the base's
            out, low = y[:, :N], y[:, N:]  # (B, N), (B, R)
        else:  # peft casts the input to the adapter's dtype
            out, low = y, F.linear(x.to(self.lora_a.dtype), self.lora_a)
        # peft: result + lora_B(lora_A(x)) * scaling, cast back to the result's dtype; B's columns carry the scaling
        # (folded in once per generation, one op fewer per step), the same product (exact for a power of two, as
        # alpha / r usually is)
        return (out + F.linear(low, self.lora_b)).to(out.dtype)  # (B, N)


def _projection(layers: list, adapter: str | None) -> _Projection | None:
    """``layers`` (plain ``nn.Linear`` or peft ``lora.Linear``) as one :class:`_Projection`; None when one of them
    runs something this step does not compute (a LoRA variant or bias, dropout in training mode, a merged adapter)."""
    bases, loras = [], {}
    for k, layer in enumerate(layers):
        base = layer.get_base_layer() if hasattr(layer, "get_base_layer") else layer
        if type(base) is not torch.nn.Linear:
            return None
        bases.append(base)
        if base is layer:
            continue
        if getattr(layer, "merged", False) or getattr(layer, "lora_variant", {}):
            return None
        if layer.disable_adapters or adapter is None or adapter not in layer.lora_A:
            continue
        dropout = layer.lora_dropout[adapter]
        if not isinstance(dropout, torch.nn.Identity) and dropout.training and dropout.p > 0:
            return None
        if layer.lora_B[adapter].bias is not None:  # peft's lora_bias: not computed here
            return None
        loras[k] = (layer.lora_A[adapter].weight, layer.lora_B[adapter].weight, float(layer.scaling[adapter]))
    if len({b.bias is None for b in bases}) > 1 or len({a.dtype for a, _, _ in loras.values()}) > 1:
        return None
    splits = [b.out_features for b in bases]
    weight, bias = [b.weight for b in bases], [b.bias for b in bases] if bases[0].bias is not None else None
    if not loras:
        with torch.no_grad():
            return _Projection(_cat(weight), _cat(bias) if bias else None, splits, sum(splits), None, None)
    with torch.no_grad():
        a = _cat([a for a, _, _ in loras.values()])  # (R, d)
        R, N, starts = a.shape[0], sum(splits), [sum(splits[:k]) for k in range(len(splits))]
        lora_b, r0 = a.new_zeros(N, R, dtype=next(iter(loras.values()))[1].dtype), 0  # (N, R), block-diagonal
        for k, (part_a, part_b, s) in loras.items():
            r = part_a.shape[0]
            lora_b[starts[k] : starts[k] + splits[k], r0 : r0 + r] = part_b * s
            r0 += r
        fused = a.dtype == weight[0].dtype
        if fused:  # the A rows ride along with the base's matmul (bias 0 for them)
            weight = weight + [a]
            bias = bias + [a.new_zeros(R)] if bias else None
        lora_a = None if fused else a
        return _Projection(_cat(weight), _cat(bias) if bias else None, splits, N, lora_a, lora_b)


def _cat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(tensors) if len(tensors) > 1 else tensors[0]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' ``LlamaRMSNorm``: normalised in float32, cast back, then scaled."""
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(dtype)


@dataclass
class _Layer:
    """One decoder layer's weights, as the step reads them."""

    input_norm: torch.Tensor
    qkv: _Projection
    o: _Projection
    post_norm: torch.Tensor
    gate_up: _Projection
    down: _Projection


class DecodeStep:
    """One decode step of a Llama-family causal LM (bare or with a LoRA adapter) run as plain tensor code."""

    def __init__(self, causal_lm, layers: list[_Layer], cache):
        config = causal_lm.config
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        from transformers.activations import ACT2FN

        self.act = ACT2FN[config.hidden_act]
        self.embed = causal_lm.get_input_embeddings().weight  # (V, d)
        self.norm = causal_lm.model.norm.weight
        head = causal_lm.get_output_embeddings()
        self.head_weight, self.head_bias = head.weight, head.bias  # (V, d)
        self.rotary = causal_lm.model.rotary_emb
        self.scale = causal_lm.model.layers[0].self_attn.scaling  # head_dim ** -0.5, as transformers passes it
        self.layers = layers
        self.cache = cache  # lm.with_room's: each layer's update() writes one position in place

    @classmethod
    def of(cls, model, cache) -> DecodeStep | None:
        """The step for ``model`` (a causal LM, or peft's model around one, with its active adapter) decoding on from
        ``cache`` (the prefill's, given room by :func:`~marft_agents.models.lm.with_room`); None where it does not
        compute what the model computes (:data:`SUPPORTED`, and the module docstring)."""
        causal_lm, adapter = model, None
        if hasattr(model, "get_base_model"):  # peft's PeftModel
            causal_lm = model.get_base_model()
            active = model.active_adapters if isinstance(model.active_adapters, list) else [model.active_adapter]
            if len(active) != 1:
                return None
            adapter = active[0]
        config = getattr(causal_lm, "config", None)
        if getattr(config, "model_type", None) not in SUPPORTED or causal_lm.training:
            return None
        if getattr(config, "use_sliding_window", False) or getattr(config, "pretraining_tp", 1) != 1:
            return None
        if not hasattr(cache, "layers") or not all(hasattr(layer, "update") for layer in cache.layers):
            return None
        layers = []
        for block in causal_lm.model.layers:
            attention, mlp = block.self_attn, block.mlp
            parts = (
                _projection([attention.q_proj, attention.k_proj, attention.v_proj], adapter),
                _projection([attention.o_proj], adapter),
                _projection([mlp.gate_proj, mlp.up_proj], adapter),
                _projection([mlp.down_proj], adapter),
            )
            if any(p is None for p in parts):
                return None
            layers.append(
                _Layer(
                    block.input_layernorm.weight, parts[0], parts[1], block.post_attention_layernorm.weight, *parts[2:]
                )
            )
        return cls(causal_lm, layers, cache)

    @torch.no_grad()
    def __call__(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The next position's logits ``(b, V)`` after ``tokens`` ``(b,)``; ``mask`` ``(b, n)`` covers every position
        so far, this one last (1: a real token, 0: padding); the cache takes this position's keys and values."""
        b, H, KV, D = tokens.shape[0], self.heads, self.kv_heads, self.head_dim
        x = F.embedding(tokens, self.embed)  # (b, d)
        positions = mask.sum(-1, keepdim=True) - 1  # (b, 1): real tokens before this one
        cos, sin = self.rotary(x[:, None], positions)  # (b, 1, D) each, in x's dtype
        # transformers rotates by qk * cos + rotate_half(qk) * sin, rotate_half(qk) = [-qk2, qk1]: the same numbers as
        # roll(qk) * [-sin1, sin2] (a sign flip is exact), with the sign folded into sin once per step, not per layer
        half = D // 2
        cos, sin = cos[:, None], torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)[:, None]  # (b, 1, 1, D)
        # masked where a row has padding (no mask at all when none has)
        allowed = None if bool(mask.all()) else mask.bool()[:, None, None, :]  # (b, 1, 1, n)
        groups = H // KV
        for i, layer in enumerate(self.layers):
            h = _rms_norm(x, layer.input_norm, self.eps)
            qkv = layer.qkv(h)  # (b, (H + 2 KV) D)
            qk = qkv[:, : (H + KV) * D].view(b, H + KV, 1, D)  # the rotation runs once for q and k
            qk = qk * cos + qk.roll(half, dims=-1) * sin
            q, k, v = qk[:, :H], qk[:, H:], qkv[:, (H + KV) * D :].view(b, KV, 1, D)
            keys, values = self.cache.layers[i].update(k, v)  # (b, KV, n, D)
            # the query heads of a group as that key/value head's rows (transformers' pack_gqa): plain attention,
            # with or without the mask (SDPA's enable_gqa took 6x as long in bf16 on this CPU: docs/real-models.md)
            q = q.reshape(b, KV, groups, D)
            a = F.scaled_dot_product_attention(q, keys, values, attn_mask=allowed, scale=self.scale)  # (b, KV, g, D)
            x = x + layer.o(a.reshape(b, H * D))
            h = _rms_norm(x, layer.post_norm, self.eps)
            gate, up = layer.gate_up(h).split(layer.gate_up.splits, dim=-1)  # (b, I) each
            x = x + layer.down(self.act(gate) * up)
        return F.linear(_rms_norm(x, self.norm, self.eps), self.head_weight, self.head_bias)  # (b, V)
