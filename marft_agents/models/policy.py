"""LLM policies for a LaMAS: one base model, one adapter per agent (or shared, or full copies).

``LaMASPolicy`` owns the model(s), the tokenizer and the chat template. It generates actions in
batches (one ``generate`` call per adapter), scores given responses under exactly the distribution
that sampled them (same temperature; top-k/top-p are deliberately not offered, since the PPO ratio
needs the exact sampling distribution), scores them under each adapter's KL reference, and extracts
frozen base features for the critic (always the base with adapters disabled).

The KL reference of an adapter is the policy the run started from: the base with adapters disabled
(no extra copy) for fresh adapters, which add nothing to it; and, once :meth:`freeze_reference` has
been called (a run that starts from trained adapters, ``init_from``), a frozen copy of each
adapter's starting weights, a peft adapter named ``<adapter>-ref`` (in ``"copies"`` mode a frozen
copy of the model). :meth:`kl_reference` names it; checkpoints carry it (:meth:`reference_state`). The causal-LM
mechanics (padding, the shared-prefix forward pass, the pinned sampling config) live in
:mod:`marft_agents.models.lm`.

Adapter modes:

- ``"lora"`` — one LoRA adapter per agent on one shared base (peft multi-adapter, switched per role);
- ``"shared"`` — one LoRA adapter used by every agent (parameter sharing);
- ``"copies"`` — a full trainable copy of the base per agent, plus the frozen base kept as the
  reference and for critic features: N + 1 models in memory (only sensible for tiny models).
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from marft_agents.models import lm, token_scores
from marft_agents.models.chat import prompt_ids
from marft_agents.models.named import resolve as resolve_named
from marft_agents.models.sampling import Generation, Sampling

ADAPTER_MODES = ("lora", "shared", "copies")
LORA_COMPUTE = ("base", "float32")
"""What a LoRA branch computes in: the base's dtype (autocast) or float32 (peft's own cast of every input)."""
LOW_PRECISION = (torch.bfloat16, torch.float16)
EMBEDDED = "embedded"
REFERENCE_SUFFIX = "-ref"
"""The frozen reference copy of adapter ``a`` is named ``a + REFERENCE_SUFFIX`` (peft forbids dots in names)."""


class ModelNotFoundError(FileNotFoundError):
    """A model path or id that cannot be loaded."""


def embedded_model_path() -> Path:
    """Where the tiny model shipped with the package lives."""
    return Path(str(resources.files("marft_agents").joinpath("assets/tiny-math")))


def load_base(model: str, dtype: torch.dtype = torch.float32):
    """Load ``(model, tokenizer)`` from ``"embedded"``, a named model, a local directory, or a Hub id.

    Weights come from safetensors files only (a pickle can run code); a damaged or unsafe folder, or a chat
    template that cannot render, is a one-line :class:`~marft_agents.models.named.ModelFolderError`.
    """
    from marft_agents.models import named  # its checks on a model folder, which may come from anyone

    model = resolve_named(model)  # a named model becomes its verified cached folder (fetched on first use)
    path = embedded_model_path() if model == EMBEDDED else model
    local = Path(path)
    looks_local = model == EMBEDDED or str(model).startswith((".", "/", "~")) or local.exists()
    if looks_local and not (local.expanduser() / "config.json").is_file():
        raise ModelNotFoundError(
            f"no model at {path}: pass a directory saved with save_pretrained, a Hub id, or 'embedded'"
        )
    source = str(local.expanduser()) if looks_local else model
    if looks_local:
        named.check_weights(local.expanduser())
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        lm = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, use_safetensors=True)
    except OSError as err:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        hint = " (HF_HUB_OFFLINE=1: it must already be in the local cache)" if offline else ""
        raise ModelNotFoundError(f"cannot load model {model!r}{hint}: {named.first_line(err)}") from None
    except named.damaged_errors() as err:  # a malformed JSON file, a damaged weights file
        raise named.ModelFolderError(
            f"cannot load model {model!r} (a damaged file?): {type(err).__name__}: {named.first_line(err)}"
        ) from None
    where = named.template_file(local.expanduser()) if looks_local else f"model {model!r}"
    named.check_chat_template(tokenizer, where)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return lm, tokenizer


def _lora_configs(model, adapters: list[str], shape: dict, agent_lora: Mapping[str, Mapping[str, Any]]) -> dict:
    """Each adapter's peft ``LoraConfig``: the run's ``shape`` (``lora_r``, ``lora_alpha``, ``lora_targets``) with its
    agent's own keys of ``agent_lora`` on top; a rank above the model's hidden size is refused before peft allocates."""
    from peft import LoraConfig

    unknown = sorted(set(agent_lora) - set(adapters))
    if unknown:
        raise ValueError(f"agent_lora names agents {unknown} without an adapter here: its adapters are {adapters}")
    hidden = getattr(model.config, "hidden_size", None)
    configs = {}
    for name in adapters:
        own = {**shape, **agent_lora.get(name, {})}
        r, key = own["lora_r"], f"agents.{name}.lora_r" if "lora_r" in agent_lora.get(name, {}) else "lora_r"
        if isinstance(hidden, int) and r > hidden:  # before peft allocates (r, d) matrices per layer
            raise ValueError(
                f"{key}={r} is above the model's hidden size {hidden}: a rank-r update of a {hidden}-wide layer has "
                f"rank at most {hidden}, so more only costs memory; use {key} <= {hidden}"
            )
        targets = list(own["lora_targets"])
        configs[name] = LoraConfig(r=r, lora_alpha=own["lora_alpha"], target_modules=targets, lora_dropout=0.0)
    return configs


class LaMASPolicy:
    """A multi-agent LLM policy: one base, an adapter per agent; generate, score, reference, features."""

    is_team = False
    """One base model for every agent (a :class:`~marft_agents.models.protocol.Policy`; ``models/team.py``: several)."""

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
        agent_lora: Mapping[str, Mapping[str, Any]] | None = None,
        lora_compute: str = "base",
        lean_decode: bool = True,
    ):
        """``agent_lora``: agent -> its adapter's own ``lora_r``, ``lora_alpha`` or ``lora_targets`` (any of them; the
        others as given above), ``agents.<agent_id>.lora_*``; an adapter per agent only (``"lora"`` mode).

        ``lora_compute`` (:data:`LORA_COMPUTE`): on a bf16 (or fp16) base, ``"base"`` runs every call under
        :meth:`active` in autocast to the base's dtype with peft's input cast off, so a LoRA branch reads the
        layer's input as it is (peft's ``"float32"`` way copies it to float32, once per adapted layer, and
        keeps the copy for backward: about 1.2 GB of a 2,048-token micro-batch of SmolLM2). The adapters'
        weights stay float32 (autocast casts them per call; their gradients come back in float32).

        ``lean_decode``: :meth:`generate` decodes a Llama-family base with
        :class:`~marft_agents.models.decode.DecodeStep` (``generation.lean_decode``)."""
        if mode not in ADAPTER_MODES:
            raise ValueError(f"unknown adapter mode {mode!r}: use one of {list(ADAPTER_MODES)}")
        if lora_compute not in LORA_COMPUTE:
            raise ValueError(f"unknown lora_compute {lora_compute!r}: use one of {list(LORA_COMPUTE)}")
        base_dtype = next(model.parameters()).dtype
        cast = lora_compute == "base" and mode != "copies" and base_dtype in LOW_PRECISION
        self.autocast = base_dtype if cast else None
        """The dtype LoRA branches compute in under :meth:`active` (None: peft's float32 cast, or no branch)."""
        self.tokenizer = tokenizer
        self.lean_decode = lean_decode
        """Whether :meth:`generate` decodes through :class:`~marft_agents.models.decode.DecodeStep` where it applies."""
        self.mode = mode
        self.agents = list(agents)
        self.adapter_of = {a: ("shared" if mode == "shared" else a) for a in self.agents}
        self.adapters = list(dict.fromkeys(self.adapter_of.values()))
        self.references: dict[str, str] = {}
        """Adapter -> the name of its frozen reference copy; empty while the base is every adapter's reference."""
        model.requires_grad_(False)
        model.eval()
        if agent_lora and mode != "lora":
            raise ValueError(
                f"agents {sorted(agent_lora)} set their own LoRA (agents.<agent_id>.lora_*), which needs an adapter "
                f"per agent: adapter_mode=lora, not {mode}"
            )
        if mode == "copies":
            self.base = model
            self.models = {name: copy.deepcopy(model).requires_grad_(True) for name in self.adapters}
        else:
            from peft import get_peft_model

            shape = dict(lora_r=lora_r, lora_alpha=lora_alpha, lora_targets=lora_targets)
            configs = _lora_configs(model, self.adapters, shape, agent_lora or {})
            with warnings.catch_warnings():
                # peft reads a transformers attribute that transformers 5 deprecates; not ours to fix, only noise
                warnings.filterwarnings(
                    "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
                )
                # float32 adapters on any base dtype (peft's autocast_adapter_dtype, spelt out): on a bf16
                # base, bf16 LoRA weights would round away Adam's steps (~lr, below bf16's 2^-8 relative
                # resolution); float32 costs a few MB and peft runs the LoRA branch in its weights' dtype.
                first = self.adapters[0]
                peft_model = get_peft_model(model, configs[first], adapter_name=first, autocast_adapter_dtype=True)
            for name in self.adapters[1:]:  # peft keeps each named adapter's own LoraConfig
                peft_model.add_adapter(name, configs[name], autocast_adapter_dtype=True)
            self.base = peft_model
            self.models = {name: peft_model for name in self.adapters}
            self._keep_trainable()
        self.eos_token_id = tokenizer.eos_token_id
        self.pad_token_id = tokenizer.pad_token_id

    # -- placement -----------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        """Where the policy's weights live: every tensor it makes or is given for its models goes there."""
        return lm.device_of(self.base)

    def to(self, device: torch.device | str) -> LaMASPolicy:
        """Move the base, every adapter and every full copy to ``device``; returns the policy."""
        for model in {id(m): m for m in (self.base, *self.models.values())}.values():
            model.to(device)
        return self

    # -- parameters ----------------------------------------------------------------------------

    def parameters(self, adapter: str) -> list[torch.nn.Parameter]:
        """The trainable parameters of one adapter (or of one full copy)."""
        if self.mode == "copies":
            return list(self.models[adapter].parameters())
        return list(self._peft_index()["parameters"].get(adapter, ()))

    def _peft_index(self) -> dict:
        """The base's LoRA layers and each adapter's parameters, found once per set of adapters.

        Walking a real model's ~1,000 parameters and ~600 modules took tens of ms, several times a step (every
        switch of adapter, every reference pass); the walk is redone only when an adapter is added (a KL reference
        copy), which may wrap layers no adapter wrapped before."""
        from peft.tuners.lora import LoraLayer

        names = tuple(self.base.peft_config)
        index = getattr(self, "_index", None)
        if index is None or index["adapters"] != names:
            parameters: dict[str, list[torch.nn.Parameter]] = {}
            for n, p in self.base.named_parameters():
                if "lora_" in n:
                    for name in names:
                        if f".{name}." in n:
                            parameters.setdefault(name, []).append(p)
            layers = [m for m in self.base.modules() if isinstance(m, LoraLayer)]
            index = self._index = {"adapters": names, "parameters": parameters, "layers": layers}
        return index

    def adapter_state(self, adapter: str) -> dict[str, torch.Tensor]:
        """A copy of one adapter's weights (for checkpoints)."""
        if self.mode == "copies":
            return {k: v.detach().clone() for k, v in self.models[adapter].state_dict().items()}
        return {n: p.detach().clone() for n, p in self.base.named_parameters() if f".{adapter}." in n and "lora_" in n}

    def load_adapter_state(self, adapter: str, state: dict[str, torch.Tensor]) -> None:
        """Load weights saved by :meth:`adapter_state`; they stay trainable.

        ``state`` must hold every weight of the adapter, each a tensor of its shape, and nothing else:
        anything less (a crafted checkpoint's ``{}``) is a RuntimeError (KeyError for a weight the
        adapter lacks) naming the first weight that does not fit, instead of a run that silently
        starts from untrained weights.
        """
        if self.mode == "copies":
            shapes = {k: v.shape for k, v in self.models[adapter].state_dict().items()}
        else:
            shapes = {n: p.shape for n, p in self.base.named_parameters() if f".{adapter}." in n and "lora_" in n}
        if not isinstance(state, dict):
            raise RuntimeError(
                f"adapter {adapter!r}: expected a dict of weight names to tensors, got {type(state).__name__}"
            )
        extra = sorted(str(k) for k in set(state) - set(shapes))
        if extra:
            raise KeyError(f"checkpoint has weights that adapter {adapter!r} lacks: {extra[:3]}")
        for name, shape in shapes.items():
            value = state.get(name)
            if not isinstance(value, torch.Tensor) or value.shape != shape:
                got = (
                    "missing"
                    if value is None
                    else type(value).__name__
                    if not isinstance(value, torch.Tensor)
                    else f"of shape {tuple(value.shape)}"
                )
                raise RuntimeError(
                    f"adapter {adapter!r}: weight {name} is {got}, expected a tensor of shape {tuple(shape)}"
                )
        if self.mode == "copies":
            self.models[adapter].load_state_dict(state)
            self.models[adapter].requires_grad_(True)
            return
        params = dict(self.base.named_parameters())
        with torch.no_grad():
            for n, v in state.items():
                params[n].copy_(v)
                params[n].requires_grad_(True)  # a resumed adapter must keep learning

    @contextmanager
    def active(self, adapter: str):
        """Run with ``adapter`` switched on; yields the model to call.

        On a bf16 base with ``lora_compute="base"`` the adapter's branches compute in bf16: under autocast with
        gradients on, on bf16 copies of its weights without (:meth:`_lora_weights_in`: the same numbers)."""
        if self.mode == "copies":
            yield self.models[adapter]
            return
        self.base.set_adapter(adapter)
        self._keep_trainable()
        if self.autocast is None:
            yield self.base
            return
        if not torch.is_grad_enabled():  # generation, old log-probs: the same numbers, without autocast's per-op cost
            with self._lora_weights_in(self.autocast, adapter):
                yield self.base
            return
        from peft.helpers import disable_input_dtype_casting

        with torch.autocast(self.device.type, dtype=self.autocast), disable_input_dtype_casting(self.base):
            yield self.base

    @contextmanager
    def _lora_weights_in(self, dtype: torch.dtype, adapter: str):
        """Run with ``adapter``'s LoRA weights swapped for ``dtype`` copies (no grad): peft then casts nothing, and each
        branch computes what autocast computes (the same bf16 matmuls of the same bf16 weights). The float32 weights
        are swapped back untouched on exit."""
        lora = [(m.lora_A[adapter].weight, m.lora_B[adapter].weight) for m in self._lora_layers(adapter)]
        with _swapped([(w, w.data.to(dtype)) for pair in lora for w in pair]):
            yield

    @contextmanager
    def reference(self):
        """Run as the base with adapters disabled (no extra copy): the critic's features, and fresh adapters' KL
        reference."""
        if self.mode == "copies":
            yield self.base
            return
        # What peft's disable_adapter does to a LoRA layer, less its model-wide status walk and its freezing of every
        # adapter (which _keep_trainable then undid): the layers' switch alone, put back as it was.
        layers = self._peft_index()["layers"]
        were, model_was = [m._disable_adapters for m in layers], self.base._adapters_disabled
        for m in layers:
            m._disable_adapters = True
        self.base._adapters_disabled = True  # the model's own flag, as peft sets it
        try:
            yield self.base
        finally:
            for m, was in zip(layers, were):
                m._disable_adapters = was
            self.base._adapters_disabled = model_was

    @contextmanager
    def merged(self, adapter: str):
        """Run with ``adapter`` merged into the base's weights and the LoRA branches off; yields the model.

        For generation (``generation.merge_lora``): each adapted layer then costs one matmul instead of
        three. The merged weights are new tensors swapped in for the base's, and the base's own tensors
        are swapped back untouched on exit, so the base comes back bit-identical (merging in place and
        subtracting again would not: ``(W + d) - d != W`` in floating point). Full copies have no
        branch to merge: the copy runs as :meth:`active` runs it.
        """
        if self.mode == "copies":
            with self.active(adapter) as model:
                yield model
            return
        merged = []
        with torch.no_grad():
            for module in self._lora_layers(adapter):
                weight = module.get_base_layer().weight
                delta = module.get_delta_weight(adapter)  # scaling * B @ A, in the adapter's dtype
                merged.append((weight, (weight.data.float() + delta.float()).to(weight.dtype)))
        with _swapped(merged), self.reference() as model:  # every adapter's branch off: the merged weights carry it
            yield model

    def _lora_layers(self, adapter: str) -> list:
        """The base's LoRA layers that hold ``adapter``."""
        return [m for m in self._peft_index()["layers"] if adapter in m.lora_A]

    def _keep_trainable(self) -> None:
        # peft freezes every adapter but the active one on set_adapter and on leaving
        # disable_adapter; we train each adapter in turn, so all of them stay trainable,
        # and set_adapter makes the active one trainable: the reference copies stay frozen.
        for name in self.adapters:
            for p in self.parameters(name):
                p.requires_grad_(True)
        for name in self.references.values():
            for p in self.parameters(name):
                p.requires_grad_(False)

    def eos_token_id_of(self, adapter: str) -> int:
        """The token that ends ``adapter``'s turns: the tokenizer's, every adapter's alike (a team's differ)."""
        return self.eos_token_id

    # -- the KL reference ------------------------------------------------------------------------

    def kl_reference(self, adapter: str) -> str | None:
        """What ``adapter``'s KL penalty compares it with, as :meth:`score` takes it: None (the base), or its frozen
        copy."""
        return self.references.get(adapter)

    def freeze_reference(self) -> None:
        """Make every adapter's current weights its KL reference (a frozen copy), in place of the base."""
        self.load_reference_state({a: self.adapter_state(a) for a in self.adapters})

    def reference_state(self) -> dict[str, dict[str, torch.Tensor]] | None:
        """The frozen reference weights per adapter, keyed as :meth:`adapter_state` keys the adapter's; None: the
        base."""
        if not self.references:
            return None
        return {a: self._as_adapter(a, self.adapter_state(ref)) for a, ref in self.references.items()}

    def load_reference_state(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """Make ``state`` (from :meth:`reference_state`) the frozen KL reference of every adapter.

        Each adapter's weights are checked as :meth:`load_adapter_state` checks them (RuntimeError or
        KeyError naming the first that does not fit); the copies never train.
        """
        if not isinstance(state, dict) or sorted(state) != sorted(self.adapters):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise KeyError(f"reference weights for adapters {got}, expected {sorted(self.adapters)}")
        for adapter in self.adapters:
            ref = adapter + REFERENCE_SUFFIX
            if adapter not in self.references:
                if self.mode == "copies":
                    self.models[ref] = copy.deepcopy(self.models[adapter])
                else:
                    self.base.add_adapter(ref, self.base.peft_config[adapter], autocast_adapter_dtype=True)
                self.references[adapter] = ref
            renamed = self._as_reference(adapter, state[adapter])
            self.load_adapter_state(ref, renamed)  # checks every weight against the copy's
            for p in self.parameters(ref):
                p.requires_grad_(False)
        if self.mode != "copies":
            self._keep_trainable()

    def _as_reference(self, adapter: str, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # lora mode names weights "...lora_A.<adapter>.weight": the copy's are "...lora_A.<adapter>-ref.weight"
        if self.mode == "copies":
            return weights
        return {n.replace(f".{adapter}.", f".{adapter}{REFERENCE_SUFFIX}."): v for n, v in weights.items()}

    def _as_adapter(self, adapter: str, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if self.mode == "copies":
            return weights
        return {n.replace(f".{adapter}{REFERENCE_SUFFIX}.", f".{adapter}."): v for n, v in weights.items()}

    # -- prompts -------------------------------------------------------------------------------

    def prompt(self, observation: dict, agent: str | None = None) -> list[int]:
        """Token ids of the chat prompt for one env observation (every agent's alike: ``agent`` matters to a team,
        ``models/team.py``)."""
        return prompt_ids(self.tokenizer, observation)

    # -- generation ----------------------------------------------------------------------------

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        adapter: str,
        sampling: Sampling,
        *,
        merge: bool = False,
        generators: Sequence[torch.Generator] | None = None,
    ) -> Generation:
        """Responses to ``prompts`` with ``adapter`` active (``merge``: merged, :meth:`merged`): :func:`lm.generate`.

        ``generators``: one per prompt, each row drawn from its own (the seeded engine, ``engines/seeded.py``)."""
        stop = lm.StopStrings(self.tokenizer, sampling.stop) if sampling.stop else None
        with self.merged(adapter) if merge else self.active(adapter) as model:
            responses, token_logps = lm.generate(
                model,
                prompts,
                temperature=sampling.temperature,
                max_new_tokens=sampling.max_new_tokens,
                pad_token_id=self.pad_token_id,
                eos_token_id=self.eos_token_id,
                top_k=sampling.top_k,
                top_p=sampling.top_p,
                stop=stop,
                generators=generators,
                lean_decode=self.lean_decode,
            )
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return Generation(responses=responses, token_logps=token_logps, texts=texts)

    # -- scoring -------------------------------------------------------------------------------

    def score(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        adapter: str | None,
        temperature: float | torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token log-probs and entropies of ``responses`` (with grad), and the response mask.

        ``adapter=None`` scores under the base with adapters disabled; ``adapter`` may name a frozen
        reference copy (:meth:`kl_reference`). ``temperature`` is one number, or one per row, ``(B,)``
        (agents sampled at their own temperatures: :func:`~marft_agents.models.sampling.row_temperatures`).
        Returns ``(logp, entropy, mask)``, each
        ``(B, R)`` with ``R`` the longest response; sum ``logp * mask`` over the last dim for an
        action's log-prob. Three savings give the same numbers as a plain forward pass over every full
        sequence: the prompts' common prefix (an agent's role prompt) runs once with its keys and values
        broadcast over the batch (gradients flow back through the broadcast), the output layer and
        softmax run on response positions only, and they run a chunk of positions at a time, so no
        ``(B, R, V)`` tensor is made or kept for backward (:mod:`marft_agents.models.token_scores`).
        """
        P, ids, attn, mask = lm.score_layout(prompts, responses, self.pad_token_id, self.device)
        S, R = ids.shape[1], mask.shape[1]
        ctx = self.reference() if adapter is None else self.active(adapter)
        with ctx as model:
            decoder, head = token_scores.decoder_and_head(model)
            hidden = lm.forward_after_prefix(
                decoder, prompts[0][:P], ids, attn
            ).last_hidden_state  # (B, S, d); (B, P + S, d) recomputing
            # column -R - 1 + k, counted from the end, predicts response token k
            logp, entropy = token_scores.chosen_logps_and_entropy(
                hidden[:, -R - 1 : -1], ids[:, S - R :], head, temperature
            )
        return logp, entropy, mask  # (B, R) each

    @torch.no_grad()
    def features(self, prompts: list[list[int]], agent: str | None = None) -> torch.Tensor:
        """Frozen base features for the critic: the last prompt token's final hidden state, ``(B, d)`` (every agent's
        alike)."""
        P, ids, attn, _ = lm.score_layout(
            prompts, [[] for _ in prompts], self.pad_token_id, self.device
        )  # prompts end in the last column
        with self.reference() as model:
            # only hidden states are needed: logits_to_keep=1 skips the full logits
            out = lm.forward_after_prefix(model, prompts[0][:P], ids, attn, output_hidden_states=True, logits_to_keep=1)
        return out.hidden_states[-1][:, -1, :].float()

    @torch.no_grad()
    def token_features(
        self, prompts: list[list[int]], responses: list[list[int]], agent: str | None = None
    ) -> torch.Tensor:
        """Frozen base features of the state before each response token, ``(B, R, d)`` (every agent's alike).

        Column ``k`` is the final hidden state at the position that predicts response token ``k``
        (the last prompt token for ``k = 0``), the same columns :meth:`score` reads its logits from;
        padded columns (``k >= len(response)``) hold whatever the padding produced: mask them.
        """
        P, ids, attn, mask = lm.score_layout(prompts, responses, self.pad_token_id, self.device)
        S, R = ids.shape[1], mask.shape[1]
        with self.reference() as model:
            out = lm.forward_after_prefix(model, prompts[0][:P], ids, attn, output_hidden_states=True, logits_to_keep=1)
        return out.hidden_states[-1][:, S - R - 1 : S - 1, :].float()  # (B, R, d)

    @property
    def hidden_size(self) -> int:
        return self.base.config.hidden_size


@contextmanager
def _swapped(replacements: list[tuple[torch.nn.Parameter, torch.Tensor]]):
    """Run with each parameter's data replaced; the original tensors come back untouched on exit."""
    originals = [(weight, weight.data) for weight, _ in replacements]
    try:
        for weight, data in replacements:
            weight.data = data
        yield
    finally:
        for weight, data in originals:
            weight.data = data
