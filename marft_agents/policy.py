"""LLM policies for a LaMAS: one base model, one adapter per agent (or shared, or full copies).

``LaMASPolicy`` owns the model(s), the tokenizer and the chat template. It generates actions in
batches (one ``generate`` call per adapter), scores given responses under exactly the distribution
that sampled them (same temperature; top-k/top-p are deliberately not offered, since the PPO ratio
needs the exact sampling distribution), scores them under the reference policy (the base with
adapters disabled, no extra copy), and extracts frozen base features for the critic.

Adapter modes:

- ``"lora"`` — one LoRA adapter per agent on one shared base (peft multi-adapter, switched per role);
- ``"shared"`` — one LoRA adapter used by every agent (parameter sharing);
- ``"copies"`` — a full trainable copy of the base per agent, plus the frozen base kept as the
  reference and for critic features: N + 1 models in memory (only sensible for tiny models).
"""

from __future__ import annotations

import copy
import inspect
import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, GenerationConfig, LlamaForCausalLM

from marft_agents.chat import prompt_ids
from marft_agents.models.named import resolve as resolve_named

ADAPTER_MODES = ("lora", "shared", "copies")
_MIN_SHARED_PREFIX = 8  # shorter common prefixes are not worth a separate forward pass
# transformers >= 5 names the KV-cache argument `cache`; earlier versions `past_key_values`.
_CACHE_ARG = "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"
EMBEDDED = "embedded"


class ModelNotFoundError(FileNotFoundError):
    """A model path or id that cannot be loaded."""


def embedded_model_path() -> Path:
    """Where the tiny model shipped with the package lives."""
    return Path(str(resources.files("marft_agents").joinpath("assets/tiny-math")))


def load_base(model: str, dtype: torch.dtype = torch.float32):
    """Load ``(model, tokenizer)`` from ``"embedded"``, a named model, a local directory, or a Hub id."""
    model = resolve_named(model)  # a named model becomes its verified cached folder (fetched on first use)
    path = embedded_model_path() if model == EMBEDDED else model
    local = Path(path)
    looks_local = model == EMBEDDED or str(model).startswith((".", "/", "~")) or local.exists()
    if looks_local and not (local.expanduser() / "config.json").is_file():
        raise ModelNotFoundError(
            f"no model at {path}: pass a directory saved with save_pretrained, a Hub id, or 'embedded'"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(local.expanduser()) if looks_local else model)
        lm = AutoModelForCausalLM.from_pretrained(str(local.expanduser()) if looks_local else model, dtype=dtype)
    except OSError as err:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        hint = " (HF_HUB_OFFLINE=1: it must already be in the local cache)" if offline else ""
        raise ModelNotFoundError(f"cannot load model {model!r}{hint}: {str(err).splitlines()[0]}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return lm, tokenizer


@dataclass(frozen=True)
class Sampling:
    """How actions are drawn; log-probs are always computed under this same distribution."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy (evaluation only: greedy actions have no usable log-prob)."""
    max_new_tokens: int = 48
    """The longest response, in tokens."""


@dataclass
class Generation:
    """A batch of generated responses with their exact tokens and behaviour log-probs."""

    responses: list[list[int]]
    """Response token ids, up to and including the end-of-turn token when one was produced."""
    token_logps: list[torch.Tensor]
    """Per-token log-probs under the sampling distribution (empty tensors when greedy)."""
    texts: list[str]
    """The responses decoded without special tokens: what the env receives."""


class LaMASPolicy:
    """A multi-agent LLM policy: one base, an adapter per agent; generate, score, reference, features."""

    def __init__(
        self,
        model,
        tokenizer,
        agents: list[str],
        *,
        mode: str = "lora",
        lora_r: int = 8,
        lora_alpha: int = 16,
        lora_targets: tuple[str, ...] = ("q_proj", "v_proj"),
    ):
        if mode not in ADAPTER_MODES:
            raise ValueError(f"unknown adapter mode {mode!r}: use one of {list(ADAPTER_MODES)}")
        self.tokenizer = tokenizer
        self.mode = mode
        self.agents = list(agents)
        self.adapter_of = {a: ("shared" if mode == "shared" else a) for a in self.agents}
        self.adapters = list(dict.fromkeys(self.adapter_of.values()))
        model.requires_grad_(False)
        model.eval()
        if mode == "copies":
            self.base = model
            self.models = {name: copy.deepcopy(model).requires_grad_(True) for name in self.adapters}
        else:
            from peft import LoraConfig, get_peft_model

            config = LoraConfig(r=lora_r, lora_alpha=lora_alpha, target_modules=list(lora_targets), lora_dropout=0.0)
            with warnings.catch_warnings():
                # peft reads a transformers attribute that transformers 5 deprecates; not ours to fix, only noise
                warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
                peft_model = get_peft_model(model, config, adapter_name=self.adapters[0])
            for name in self.adapters[1:]:
                peft_model.add_adapter(name, config)
            self.base = peft_model
            self.models = {name: peft_model for name in self.adapters}
            self._keep_trainable()
        self.eos_token_id = tokenizer.eos_token_id
        self.pad_token_id = tokenizer.pad_token_id

    # -- parameters ----------------------------------------------------------------------------

    def parameters(self, adapter: str) -> list[torch.nn.Parameter]:
        """The trainable parameters of one adapter (or of one full copy)."""
        if self.mode == "copies":
            return list(self.models[adapter].parameters())
        return [p for n, p in self.base.named_parameters() if f".{adapter}." in n and "lora_" in n]

    def adapter_state(self, adapter: str) -> dict[str, torch.Tensor]:
        """A copy of one adapter's weights (for checkpoints)."""
        if self.mode == "copies":
            return {k: v.detach().clone() for k, v in self.models[adapter].state_dict().items()}
        return {n: p.detach().clone() for n, p in self.base.named_parameters() if f".{adapter}." in n and "lora_" in n}

    def load_adapter_state(self, adapter: str, state: dict[str, torch.Tensor]) -> None:
        """Load weights saved by :meth:`adapter_state`; they stay trainable."""
        if self.mode == "copies":
            self.models[adapter].load_state_dict(state)
            self.models[adapter].requires_grad_(True)
            return
        params = dict(self.base.named_parameters())
        missing = sorted(set(state) - set(params))
        if missing:
            raise KeyError(f"checkpoint has adapter weights the model lacks: {missing[:3]}...")
        with torch.no_grad():
            for n, v in state.items():
                params[n].copy_(v)
                params[n].requires_grad_(True)  # a resumed adapter must keep learning (bug 4)

    @contextmanager
    def active(self, adapter: str):
        """Run with ``adapter`` switched on; yields the model to call."""
        if self.mode == "copies":
            yield self.models[adapter]
            return
        self.base.set_adapter(adapter)
        self._keep_trainable()
        yield self.base

    @contextmanager
    def reference(self):
        """Run as the reference policy: the base with adapters disabled (no extra copy)."""
        if self.mode == "copies":
            yield self.base
            return
        with self.base.disable_adapter():
            yield self.base
        self._keep_trainable()

    def _keep_trainable(self) -> None:
        # peft freezes every adapter but the active one on set_adapter and on leaving
        # disable_adapter; we train each adapter in turn, so all of them stay trainable.
        for name in self.adapters:
            for p in self.parameters(name):
                p.requires_grad_(True)

    # -- prompts -------------------------------------------------------------------------------

    def prompt(self, observation: dict) -> list[int]:
        """Token ids of the chat prompt for one env observation."""
        return prompt_ids(self.tokenizer, observation)

    def _left_pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s):] = 1
        return ids, mask  # (B, P), (B, P)

    # -- generation ----------------------------------------------------------------------------

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], adapter: str, sampling: Sampling) -> Generation:
        """One batched ``generate`` call for ``prompts`` with ``adapter`` active."""
        ids, mask = self._left_pad(prompts)
        greedy = sampling.temperature == 0
        config = GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not greedy,
            temperature=None if greedy else sampling.temperature,
            # Pin every knob that would change the sampling distribution away from softmax(logits/T).
            top_k=None, top_p=None, min_p=None, typical_p=None, repetition_penalty=None,
            pad_token_id=self.pad_token_id, eos_token_id=self.eos_token_id, bos_token_id=None,
            return_dict_in_generate=True, output_logits=not greedy,
        )
        with self.active(adapter) as model:
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        new = out.sequences[:, ids.shape[1]:]  # (B, L)
        lengths = self._lengths(new)
        if greedy:
            token_logps = [torch.empty(0) for _ in prompts]
        else:
            logits = torch.stack(out.logits, dim=1).float() / sampling.temperature  # (B, L, V)
            logp = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)  # (B, L)
            token_logps = [logp[i, :n].clone() for i, n in enumerate(lengths)]
        responses = [new[i, :n].tolist() for i, n in enumerate(lengths)]
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return Generation(responses=responses, token_logps=token_logps, texts=texts)

    def _lengths(self, new: torch.Tensor) -> list[int]:
        # Masks come from lengths: up to and including the first end-of-turn token, else all tokens.
        is_eos = new == self.eos_token_id  # (B, L)
        first = torch.where(is_eos.any(1), is_eos.float().argmax(1) + 1, torch.full((new.shape[0],), new.shape[1]))
        return first.tolist()

    # -- scoring -------------------------------------------------------------------------------

    def _score_layout(self, prompts, responses) -> tuple[int, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``[shared prefix | left-padded rest of prompt | right-padded response]``.

        Returns the prefix length ``P`` and ``ids``/``attn`` of shape ``(B, L + R)`` for what follows the
        prefix (``L`` the longest rest of a prompt, ``R`` the longest response), and the response mask
        ``(B, R)``. Every response starts at column ``L``, so the output layer runs on ``R`` columns only.
        """
        limit = min(len(p) for p in prompts) - 1  # keep >= 1 token of every prompt after the prefix
        P = 0
        while P < limit and all(p[P] == prompts[0][P] for p in prompts):
            P += 1
        if P < _MIN_SHARED_PREFIX:
            P = 0
        rests = [p[P:] for p in prompts]
        L, R = max(len(r) for r in rests), max(len(r) for r in responses)
        ids = torch.full((len(prompts), L + R), self.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(prompts), L + R), dtype=torch.long)
        mask = torch.zeros((len(prompts), R), dtype=torch.bool)
        for i, (rest, resp) in enumerate(zip(rests, responses)):
            ids[i, L - len(rest): L + len(resp)] = torch.tensor(rest + resp, dtype=torch.long)
            attn[i, L - len(rest): L + len(resp)] = 1
            mask[i, : len(resp)] = True
        return P, ids, attn, mask

    def score(
        self, prompts: list[list[int]], responses: list[list[int]], adapter: str | None, temperature: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token log-probs and entropies of ``responses`` (with grad), and the response mask.

        ``adapter=None`` scores under the reference policy. Returns ``(logp, entropy, mask)``, each
        ``(B, R)`` with ``R`` the longest response; sum ``logp * mask`` over the last dim for an
        action's log-prob. Two savings give the same numbers as a plain forward pass over every full
        sequence: the prompts' common prefix (an agent's role prompt) runs once with its keys and values
        broadcast over the batch (gradients flow back through the broadcast), and the output layer and
        softmax run on response positions only.
        """
        P, ids, attn, mask = self._score_layout(prompts, responses)
        S, R = ids.shape[1], mask.shape[1]
        ctx = self.reference() if adapter is None else self.active(adapter)
        with ctx as model:
            logits = _forward_after_prefix(model, prompts[0][:P], ids, attn, logits_to_keep=R + 1).logits  # (B, R + 1, V)
        # column S - R - 1 + k predicts response token k
        logits = logits[:, :R].float() / temperature  # (B, R, V)
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, ids[:, S - R:].unsqueeze(-1)).squeeze(-1)  # (B, R)
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # (B, R)
        return logp, entropy, mask

    @torch.no_grad()
    def features(self, prompts: list[list[int]]) -> torch.Tensor:
        """Frozen base features for the critic: the last prompt token's final hidden state, ``(B, d)``."""
        P, ids, attn, _ = self._score_layout(prompts, [[] for _ in prompts])  # every prompt ends in the last column
        with self.reference() as model:
            out = _forward_after_prefix(model, prompts[0][:P], ids, attn, output_hidden_states=True,
                                        logits_to_keep=1)  # only hidden states are needed; skip the full logits
        return out.hidden_states[-1][:, -1, :].float()

    @torch.no_grad()
    def token_features(self, prompts: list[list[int]], responses: list[list[int]]) -> torch.Tensor:
        """Frozen base features of the state before each response token, ``(B, R, d)``.

        Column ``k`` is the final hidden state at the position that predicts response token ``k``
        (the last prompt token for ``k = 0``), the same columns :meth:`score` reads its logits from;
        padded columns (``k >= len(response)``) hold whatever the padding produced: mask them.
        """
        P, ids, attn, mask = self._score_layout(prompts, responses)
        S, R = ids.shape[1], mask.shape[1]
        with self.reference() as model:
            out = _forward_after_prefix(model, prompts[0][:P], ids, attn, output_hidden_states=True, logits_to_keep=1)
        return out.hidden_states[-1][:, S - R - 1: S - 1, :].float()  # (B, R, d)

    @property
    def hidden_size(self) -> int:
        return self.base.config.hidden_size


def _forward_after_prefix(model, prefix: list[int], ids: torch.Tensor, attn: torch.Tensor, **kwargs):
    """``model`` on ``prefix + ids[b]`` for every row ``b``, running the shared ``prefix`` only once.

    ``ids``/``attn`` ``(B, S)`` may hold padding anywhere; positions count real tokens only. The prefix's
    keys and values are broadcast over the batch, and gradients flow back through the broadcast.
    """
    B, P = ids.shape[0], len(prefix)
    position_ids = P + (attn.cumsum(-1) - 1).clamp(min=0)  # (B, S)
    cache = None
    if P:
        out = model(input_ids=torch.tensor([prefix], dtype=torch.long), use_cache=True)  # (1, P), once
        cache = _broadcast_cache(out[_CACHE_ARG] if _CACHE_ARG in out else out["past_key_values"], B)
        attn = torch.cat([torch.ones(B, P, dtype=attn.dtype), attn], dim=1)  # (B, P + S)
    return model(input_ids=ids, attention_mask=attn, position_ids=position_ids, use_cache=cache is not None,
                 **{_CACHE_ARG: cache}, **kwargs)


def _broadcast_cache(cache, batch: int) -> DynamicCache:
    """A one-sequence KV cache expanded (a view, no copy) to ``batch`` sequences."""
    pairs = ([(layer.keys, layer.values) for layer in cache.layers] if hasattr(cache, "layers")
             else list(zip(cache.key_cache, cache.value_cache)))
    return DynamicCache([(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in pairs])
