"""``gradient_checkpointing``: recompute each decoder layer's activations in the backward pass instead of keeping them.

A policy step keeps every layer's activations of every response token of a minibatch for the
backward pass; with checkpointing only each layer's input is kept and the layer runs again during
the backward pass (transformers' activation checkpointing, non-reentrant: the frozen base's inputs
need no gradient for the adapters' to flow). Less memory, about one more forward pass of compute.

transformers checkpoints a layer only when the layer is in training mode, and the policy keeps its
models in eval mode (no dropout). So the decoder layers, and only they, are flagged as training:
their children (attention, MLP, any dropout) stay in eval mode, so the numbers are those of eval mode.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


def checkpoint_activations(models: Iterable) -> None:
    """Turn on activation checkpointing in each causal LM of ``models`` (peft-wrapped or plain)."""
    for model in {id(m): m for m in models}.values():
        core = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft: the transformers model
        kwargs = {"use_reentrant": False}
        if hasattr(
            core, "activation_checkpointing_enable"
        ):  # its newer name (gradient_checkpointing_enable is deprecated)
            core.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            core.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        for module in core.modules():
            if getattr(module, "gradient_checkpointing", False):
                module.training = True  # this module alone (not .train(), which would reach its children)


def recomputes(model) -> bool:
    """Whether ``model`` runs with activation checkpointing now (turned on, and gradients on).

    Its checkpointed layers then take no KV cache (``lm.forward_after_prefix`` runs a shared prefix with every row).
    """
    return torch.is_grad_enabled() and any(
        getattr(m, "gradient_checkpointing", False) and m.training for m in model.modules()
    )
