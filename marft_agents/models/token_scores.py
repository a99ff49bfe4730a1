"""The chosen tokens' log-probs and entropies over a large vocabulary, a chunk of positions at a time.

Scoring a response needs, at each of its positions, the log-prob of the token that was chosen and the
entropy of the distribution it came from: both read the whole vocabulary. Run the output layer on all
``B * R`` positions at once and the logits, their log-softmax and its exponential are ``(B, R, V)``
tensors, several of them kept for backward: with SmolLM2's 49,152-token vocabulary, 64 responses of
96 tokens make 1.2 GB per copy in float32. :func:`chosen_logps_and_entropy` runs the output layer and
the softmax on a few positions at a time, each chunk under ``torch.utils.checkpoint``: backward keeps
only the chunk's hidden states and recomputes its logits (one extra output-layer matmul), so the
vocabulary-wide tensors alive at any time are one chunk's, whatever ``B`` and ``R`` are.

Every chunk runs the same operations as the whole batch would (output layer, ``float()``, ``/ T``,
log-softmax, gather, ``-(p * log p).sum``), row by row: the numbers are those of the unchunked
computation (``tests/agents/test_token_scores.py`` holds them to it, gradients included).
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from marft_agents.models.truncation import Truncation, truncate

CHUNK_LOGITS = 1 << 22
"""Logits per chunk (rows x vocabulary): 16 MB per vocabulary-wide float32 tensor, whatever the vocabulary."""
LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")
"""Config fields of causal LMs whose logits are not the output layer's alone (Gemma 2, Cohere, Granite)."""


def decoder_and_head(model) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A causal LM's decoder (hidden states, no output layer) and its output layer.

    ``model`` may be a peft model: the decoder then carries the LoRA layers, switched as the peft
    model's adapter is. A model whose logits go through more than its output layer (a soft-cap or a
    scale in its config) is refused: chunked scoring would leave that step out.
    """
    config = getattr(model, "config", None)
    for field in LOGIT_TRANSFORMS:
        if getattr(config, field, None) not in (None, 1, 1.0):
            raise ValueError(
                f"the model's config sets {field}: scoring supports causal LMs whose logits are their output layer's "
                "alone"
            )
    return model.get_decoder(), model.get_output_embeddings()


def _scores(
    hidden: torch.Tensor, targets: torch.Tensor, head: torch.nn.Module, temperature: float | torch.Tensor | Truncation
) -> tuple[torch.Tensor, torch.Tensor]:
    # hidden (N, d), targets (N,), temperature a number, (N, 1) or a Truncation of N rows -> logp (N,), entropy (N,)
    if isinstance(
        temperature, Truncation
    ):  # top-k/top-p draws: the same kept set the sampler had, the drawn token in it
        logits = truncate(head(hidden).float() / temperature.temperature, temperature.top_k, temperature.top_p, targets)
        logp_all = torch.log_softmax(logits, dim=-1)  # (N, V), -inf outside the kept set
        kept = logp_all.masked_fill(torch.isinf(logp_all), 0.0)  # 0 * -inf would make the entropy nan
        entropy = -(kept.exp() * kept).sum(-1)  # (N,)
    else:
        logp_all = torch.log_softmax(head(hidden).float() / temperature, dim=-1)  # (N, V)
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # (N,)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (N,)
    return logp, entropy


def chosen_logps_and_entropy(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    head: torch.nn.Module,
    temperature: float | torch.Tensor,
    *,
    chunk_logits: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logp, entropy)``, each ``(B, R)``: of ``targets`` ``(B, R)`` under ``softmax(head(hidden) / T)``.

    ``temperature`` is one number, or one per row ``(B,)`` (agents sampled at their own temperatures), or a
    :class:`~marft_agents.models.truncation.Truncation` of ``B`` rows (agents sampled with top-k/top-p): the
    log-probs are then of the truncated distribution, the drawn token always in its kept set.

    ``hidden`` ``(B, R, d)`` are the final hidden states at the positions that predict ``targets``.
    Positions run in chunks of about ``chunk_logits / V`` rows (default :data:`CHUNK_LOGITS`); with
    gradients on, each chunk is checkpointed (its vocabulary-wide tensors are freed after forward and
    recomputed in backward). Only
    a plain ``nn.Linear`` head is recomputed: a head with LoRA layers of its own (``lm_head`` among
    the LoRA targets) would be recomputed under whichever adapter is active when backward runs, so
    its chunks keep their tensors for backward, as an unchunked pass would.
    """
    B, R, d = hidden.shape
    flat_h, flat_t = hidden.reshape(B * R, d), targets.reshape(B * R)  # (N, d), (N,)
    if isinstance(temperature, torch.Tensor):  # one per row -> one per position, (N, 1)
        temperature = temperature.float().to(hidden.device).repeat_interleave(R).reshape(B * R, 1)
    elif isinstance(temperature, Truncation):
        temperature = temperature.per_position(R, hidden.device)
    rows = max(1, (chunk_logits or CHUNK_LOGITS) // head.weight.shape[0])
    recompute = torch.is_grad_enabled() and type(head) is torch.nn.Linear
    logps, entropies = [], []
    for start in range(0, max(B * R, 1), rows):  # no positions (every response empty): one empty chunk
        h, t = flat_h[start : start + rows], flat_t[start : start + rows]
        if isinstance(temperature, Truncation):
            T = temperature.rows(start, start + rows)
        else:
            T = temperature[start : start + rows] if isinstance(temperature, torch.Tensor) else temperature
        if recompute:
            # preserve_rng_state=False: nothing here draws random numbers, and the run's RNG stays untouched
            logp, entropy = checkpoint(_scores, h, t, head, T, use_reentrant=False, preserve_rng_state=False)
        else:
            logp, entropy = _scores(h, t, head, T)
        logps.append(logp)
        entropies.append(entropy)
    return torch.cat(logps).view(B, R), torch.cat(entropies).view(B, R)
