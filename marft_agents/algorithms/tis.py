"""Truncated importance sampling (TIS): when the generation engine's numbers differ from the trainer's.

An engine such as vLLM samples with its own kernels, and maybe another dtype, so the behaviour
log-prob it reports, ``log mu(a|o)``, is not exactly the trainer's ``log pi_old(a|o)`` for the same
weights (fp32 vLLM: within 1e-4 per token; bf16: up to ~0.2; docs/engines.md). The PPO ratio
``pi_theta / mu`` then mixes two models' numbers, and the samples are slightly off-policy for the
trainer's model. Yao et al. 2025 ("Your Efficient RL Framework Secretly Brings You Off-Policy RL
Training"), as verl and MARTI implement it, correct both, and so does ``generation.tis_cap = C``:

1. before the update the trainer recomputes every response token's log-prob with its own model and
   the weights that sampled it (:func:`recompute_behaviour`): ``AgentStep.token_logps`` becomes
   ``log pi_old^trainer`` and the engine's numbers move to ``AgentStep.engine_logps``, so every
   learner's PPO ratio is ``pi_theta / pi_old^trainer`` without changing a line of it;
2. every learner's loss (in its own module under ``algorithms/``) multiplies each
   sample's policy-gradient term by ``w = min(exp(log pi_old^trainer - log mu), C)``, detached:
   per token for token-level objectives (:func:`token_weights`), per action for action-level ones,
   with the action's log-prob reduced as the ratio's is (:func:`action_weights`).

Off (``tis_cap = None``, the default) none of this runs and every number is as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from marft_agents.algorithms.losses import truncated_is_weights
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Sampling, Temperature, row_temperatures
from marft_agents.rollout.episode import AgentStep


@torch.no_grad()
def recompute_behaviour(
    policy: LaMASPolicy, steps: Sequence[AgentStep], temperature: Temperature, batch_size: int = 64
) -> dict[str, float]:
    """Score every step's response with the trainer's model; keep the engine's log-probs in ``engine_logps``.

    ``temperature``: the sampling temperature, one for all or each agent's own (the learner's ``temperature``).

    Call it after collection and before the update, while the policy still holds the weights that
    sampled the steps. Returns how far the engine was from the trainer, per response token:
    ``tis/abs_logp_diff_mean`` and ``tis/abs_logp_diff_max``.
    """
    temperatures = temperature.values() if isinstance(temperature, Mapping) else [temperature]
    temperatures = [t.temperature if isinstance(t, Sampling) else t for t in temperatures]  # an agent that truncates
    if min(temperatures, default=1.0) <= 0:
        raise ValueError("the TIS recompute needs sampled steps (temperature > 0): greedy steps have no log-probs")
    steps = [s for s in steps if not s.skipped]  # nothing was sampled for them: nothing to score
    order = sorted(range(len(steps)), key=lambda i: (policy.adapter_of[steps[i].agent], steps[i].agent))
    diffs: list[torch.Tensor] = []
    for start in range(0, len(order), batch_size):
        chunk = [steps[i] for i in order[start : start + batch_size]]
        for adapter in dict.fromkeys(policy.adapter_of[s.agent] for s in chunk):
            group = [s for s in chunk if policy.adapter_of[s.agent] == adapter]  # one agent's role prompt
            t = row_temperatures([s.agent for s in group], temperature, policy.device)  # a number, or (B,)
            logp, _, _ = policy.score([s.prompt for s in group], [s.response for s in group], adapter, t)
            for k, s in enumerate(group):
                engine = s.engine_logps if s.engine_logps is not None else s.token_logps
                trainer = logp[k, : len(s.response)].detach().clone()  # (len(response),)
                diffs.append((trainer - engine.float().to(trainer.device)).abs())
                s.engine_logps, s.token_logps = engine, trainer
    flat = torch.cat(diffs) if diffs else torch.zeros(0, device=policy.device)
    return {
        "tis/abs_logp_diff_mean": float(flat.mean()) if flat.numel() else 0.0,
        "tis/abs_logp_diff_max": float(flat.max()) if flat.numel() else 0.0,
    }


def _engine_logps(steps: Sequence[AgentStep]) -> list[torch.Tensor]:
    if any(s.engine_logps is None for s in steps):
        raise ValueError(
            "tis_cap is set but these agent-steps carry no engine log-probs: "
            "call marft_agents.algorithms.tis.recompute_behaviour on them before the update"
        )
    return [s.engine_logps for s in steps]


def token_weights(
    steps: Sequence[AgentStep], width: int, cap: float | None, device: torch.device | None = None
) -> torch.Tensor | None:
    """Per-token weights ``min(exp(token_logps - engine_logps), cap)``, ``(B, width)`` on ``device`` (1 on padding);
    None when off."""
    if cap is None:
        return None
    out = torch.ones(len(steps), width, device=device)
    for i, (s, engine) in enumerate(zip(steps, _engine_logps(steps))):
        n = min(len(s.response), width)
        out[i, :n] = truncated_is_weights(s.token_logps[:n].float(), engine[:n].float(), cap)
    return out


def action_weights(steps: Sequence[AgentStep], reduction: str, cap: float | None) -> torch.Tensor | None:
    """Per-action weights ``(B,)``: the weight of the action's log-prob, summed or averaged over its tokens
    as the PPO ratio's is (``reduction``); None when off."""
    if cap is None:
        return None
    engine = _engine_logps(steps)
    trainer_sum = torch.stack([s.token_logps.float().sum() for s in steps])  # (B,)
    engine_sum = torch.stack([e.float().sum() for e in engine])  # (B,)
    if reduction == "mean":
        n = torch.tensor([max(len(s.response), 1) for s in steps], dtype=torch.float32, device=trainer_sum.device)
        trainer_sum, engine_sum = trainer_sum / n, engine_sum / n
    return truncated_is_weights(trainer_sum, engine_sum, cap)


def weight_stats(weights: torch.Tensor | None, mask: torch.Tensor | None = None) -> dict[str, float]:
    """``tis_weight_mean`` and ``tis_weight_max`` over the entries where ``mask`` is true (all without one);
    nothing when the correction is off (``weights`` None)."""
    if weights is None:
        return {}
    w = weights if mask is None else weights[mask.bool()]
    if not w.numel():
        return {"tis_weight_mean": 1.0, "tis_weight_max": 1.0}
    return {"tis_weight_mean": float(w.mean()), "tis_weight_max": float(w.max())}
