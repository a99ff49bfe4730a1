"""Top-k and top-p (nucleus) truncation of a next-token distribution, the same in sampling and in scoring.

An agent sampled with ``top_k`` / ``top_p`` (``agents.<agent_id>.top_k``) draws from
``softmax(logits / T)`` restricted to the ``top_k`` most likely tokens, then to the smallest set of
them whose probability reaches ``top_p`` (Holtzman et al., 2020, "The Curious Case of Neural Text
Degeneration"), renormalised: the order and the rule of ``transformers``' ``TopKLogitsWarper`` and
``TopPLogitsWarper`` and of vLLM's sampler. PPO's ratio needs the behaviour log-prob and the learner's
log-prob of one distribution, so the decode loop (:func:`marft_agents.models.lm.generate`) and the
learner's scoring (:mod:`marft_agents.models.token_scores`) both call :func:`truncate`.

A kept set is decided by comparing probabilities, so a batched recompute whose logits round
differently from step-by-step decoding can move a token at the set's edge in or out; the token that
was drawn is always kept in scoring (``keep``): a sampled token never scores ``-inf``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Truncation:
    """Each row's temperature, top-k and top-p: the distribution a batch of positions was sampled from."""

    temperature: float | torch.Tensor
    """One temperature, or one per row ``(N, 1)``."""
    top_k: torch.Tensor | None = None
    """Tokens kept per row ``(N,)`` (0: all), or None when no row truncates by rank."""
    top_p: torch.Tensor | None = None
    """Probability mass kept per row ``(N,)`` (1.0: all), or None when no row truncates by mass."""

    def rows(self, start: int, stop: int) -> Truncation:
        """The rows ``start:stop`` (a chunk of positions)."""

        def cut(x):
            return x[start:stop] if isinstance(x, torch.Tensor) else x

        return Truncation(cut(self.temperature), cut(self.top_k), cut(self.top_p))

    def per_position(self, R: int, device: torch.device) -> Truncation:
        """Each of ``B`` rows' settings repeated over its ``R`` positions: ``B * R`` rows, temperatures ``(B*R, 1)``."""

        def spread(x):
            return x.to(device).repeat_interleave(R) if isinstance(x, torch.Tensor) else x

        T = spread(self.temperature)
        return Truncation(
            T.reshape(-1, 1) if isinstance(T, torch.Tensor) else T, spread(self.top_k), spread(self.top_p)
        )


def truncate(
    logits: torch.Tensor,
    top_k: torch.Tensor | int | None,
    top_p: torch.Tensor | float | None,
    keep: torch.Tensor | None = None,
) -> torch.Tensor:
    """``logits`` ``(N, V)`` (already divided by the temperature) with the tokens outside each row's kept set at -inf.

    ``top_k``: one number or ``(N,)`` (0 keeps every token); ``top_p``: one number or ``(N,)`` (1.0 keeps every
    token). ``keep`` ``(N,)``: a token per row that stays whatever the rule says (the drawn one, in scoring).
    """
    N, V = logits.shape
    if top_k is None and top_p is None:
        return logits
    order = logits.argsort(dim=-1, descending=True)  # (N, V): token ids, most likely first
    ranked = logits.gather(-1, order)  # (N, V)
    drop = torch.zeros_like(ranked, dtype=torch.bool)  # (N, V) in rank order
    if top_k is not None:
        k = torch.as_tensor(top_k, device=logits.device).reshape(-1, 1)  # (N, 1) or (1, 1)
        k = torch.where(k > 0, k, V)
        drop |= torch.arange(V, device=logits.device).unsqueeze(0) >= k
    if top_p is not None:
        p = torch.as_tensor(top_p, device=logits.device, dtype=torch.float32).reshape(-1, 1)  # (N, 1) or (1, 1)
        probs = torch.softmax(ranked.float().masked_fill(drop, float("-inf")), dim=-1)  # (N, V), renormalised after k
        before = probs.cumsum(-1) - probs  # (N, V): the mass of the more likely tokens
        drop |= (before >= p) & (p < 1.0)  # the most likely token always stays (its `before` is 0)
    removed = torch.zeros_like(drop).scatter(-1, order, drop)  # (N, V) back in token order
    if keep is not None:
        removed[torch.arange(N, device=logits.device), keep] = False
    return logits.masked_fill(removed, float("-inf"))
