"""The hyper-parameters the PPO-style learners share: :class:`PPOSettings` and MARFT's :class:`ChainSettings`.

Each algorithm's config is one of these (PPO, IPPO, MAPPO: ``PPOSettings``; action-level MARFT:
``ChainSettings``) or a dataclass that extends it (token-level MARFT). Ranges and choices travel with
the fields (:mod:`marft_agents.settings.fields`): a bad value is refused when the config is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from marft_agents.algorithms.sequential import SequentialConfig
from marft_agents.settings.fields import AT_LEAST_ONE, LR, NON_NEGATIVE, POSITIVE, UNIT, WHY_LR, Ranged, choice, ranged

MICRO_BATCH_TOKENS = 1024
"""Default padded tokens per forward and backward pass of a learner (``micro_batch_tokens``) for SmolLM2-135M and any
model at least as wide: E2's peak memory against its update's speed (``benchmarks/speed.py``, "memory": 1024 kept E2
under 3 GB where 2048 reached 3.0-3.2 GB, at the same learner seconds within one update's spread; docs/real-models.md).
A narrower model's default is scaled up (:func:`micro_batch_tokens`)."""

REFERENCE_WIDTH = 576 * 30 + 49152
"""SmolLM2-135M's floats per token in the learner's two largest activations: ``hidden_size`` x ``num_hidden_layers``
(each layer's saved input) plus ``vocab_size`` (the logits)."""


def micro_batch_tokens(setting: int | None, model_config: object | None) -> int:
    """The learner's most padded tokens per forward and backward pass: ``setting`` when given (0: whole minibatches).

    ``None`` (the default): :data:`MICRO_BATCH_TOKENS`, scaled up by how many times narrower per token the model
    (transformers' ``model_config``) is than SmolLM2-135M (:data:`REFERENCE_WIDTH`), never down. A small model's
    micro-batch then holds about the activations SmolLM2's does, in fewer passes: the embedded model's (128 x 4 + 868)
    is 48 times narrower, so its minibatches run whole (``benchmarks/demo_speed.py``: a demo update 1.30x faster than at
    1024 tokens). Without a width to read (no config): :data:`MICRO_BATCH_TOKENS`.
    """
    if setting is not None:
        return setting
    text = model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
    sizes = [getattr(text, key, None) for key in ("hidden_size", "num_hidden_layers", "vocab_size")]
    if not all(isinstance(x, int) and x > 0 for x in sizes):
        return MICRO_BATCH_TOKENS
    hidden, layers, vocab = sizes
    return max(MICRO_BATCH_TOKENS, MICRO_BATCH_TOKENS * REFERENCE_WIDTH // (hidden * layers + vocab))


OLD_LOGPS = ("sampled", "learner")
"""What the PPO ratio's pi_old is before an adapter's first step of an update (``PPOSettings.old_logps``)."""


@dataclass
class PPOSettings(Ranged):
    """Hyper-parameters every PPO-style learner here shares (MARFT, token MARFT, PPO, IPPO, MAPPO)."""

    lr: float = ranged(3e-4, LR, WHY_LR)
    """Adam learning rate of each agent's adapter."""
    critic_lr: float = ranged(1e-4, LR, "an Adam step moves each weight by about lr")
    """Adam learning rate of the value head(s) (measured: ``benchmarks/critic_fit.py``)."""
    critic_epochs: int = ranged(8, AT_LEAST_ONE)
    """Passes of the value head over its frozen features per update (measured: ``benchmarks/critic_fit.py``)."""
    gamma: float = ranged(0.99, UNIT)
    """Discount between rounds."""
    gae_lambda: float = ranged(0.95, UNIT)
    """GAE lambda."""
    clip_eps: float = ranged(0.2, POSITIVE)
    """PPO ratio clip."""
    value_clip: float | None = ranged(0.2, POSITIVE)
    """Value-loss clip around the old values (None: no clipping)."""
    entropy_coef: float = ranged(0.01, NON_NEGATIVE)
    """Weight of the mean per-token entropy bonus."""
    kl_coef: float = ranged(0.0, NON_NEGATIVE)
    """Weight of the KL(pi || reference) penalty; 0 skips the reference pass."""
    kl_gate: float | None = ranged(None, POSITIVE)
    """Skip a minibatch whose approx KL to the behaviour policy exceeds this (the original: 1e-3)."""
    ppo_epochs: int = ranged(1, AT_LEAST_ONE)
    """Passes over the batch per update."""
    minibatch_size: int = ranged(64, AT_LEAST_ONE)
    """Agent-steps per gradient step."""
    grad_accumulation: int = ranged(1, AT_LEAST_ONE)
    """k: the gradients of k consecutive minibatches add up to one optimizer step, the one a minibatch of
    k * minibatch_size agent-steps would take (same rows, same loss), with one minibatch's activations at a time."""
    micro_batch_tokens: int | None = ranged(None, NON_NEGATIVE)
    """The most padded tokens (agent-steps x their longest prompt and response) one forward and backward pass holds: a
    larger minibatch runs in micro-batches whose gradients add up to its own (memory: one micro-batch's activations at
    a time; 0: whole minibatches; under kl_gate minibatches run whole; None: 1024, more for a model narrower than
    SmolLM2-135M, as :func:`micro_batch_tokens` says)."""
    max_grad_norm: float = ranged(0.5, POSITIVE)
    """Gradient clipping."""
    normalize_advantages: bool = True
    """Standardise advantages (mean 0, std 1) before the policy step, over the steps ``normalize_scope`` says."""
    normalize_scope: str = choice("agent", ("agent", "batch"))
    """Standardise within each agent's steps ("agent"), or jointly ("batch": before issue 35, an agent-wide push;
    ablations)."""
    skip_equal_returns: bool = True
    """No policy step when every episode's return is equal (False: step on critic noise, as before issue 35; for
    ablations)."""
    logp_reduction: str = choice("sum", ("sum", "mean"))
    """How token log-probs make an action's log-prob: "sum" (exact) or "mean" (per-token average)."""
    old_logps: str = choice("sampled", OLD_LOGPS)
    """The ratio's pi_old until an adapter's first optimizer step of an update: the behaviour log-probs kept at
    sampling ("sampled"), or the learner's own, detached ("learner": the same weights, so that step's ratio is 1
    however bf16 rounds; the action-level learners; docs/real-models.md)."""

    def critic_options(self) -> dict:
        """What a :class:`~marft_agents.algorithms.critic.Critic` takes from these settings."""
        return dict(
            lr=self.critic_lr,
            epochs=self.critic_epochs,
            minibatch_size=self.minibatch_size,
            value_clip=self.value_clip,
            max_grad_norm=self.max_grad_norm,
        )

    def advantage_options(self) -> dict:
        """What :func:`~marft_agents.algorithms.prepare.prepare_advantages` takes from these settings."""
        return dict(
            normalize=self.normalize_advantages, scope=self.normalize_scope, skip_equal_returns=self.skip_equal_returns
        )


def check_kl_gate(kl_gate: float | None, accumulation: int, section: str = "") -> None:
    """Refuse ``kl_gate`` with ``grad_accumulation`` > 1 (ValueError, one line; ``section``: the keys' prefix, e.g.
    ``marft.``): the gate skips a minibatch by its own KL, which would drop one part of an accumulated step and leave
    the others weighted as parts of the whole."""
    if kl_gate is not None and accumulation > 1:
        raise ValueError(
            f"{section}kl_gate={kl_gate} judges each minibatch alone, so it cannot skip one part of a step accumulated "
            f"over {section}grad_accumulation={accumulation} minibatches: unset {section}kl_gate, or set "
            f"{section}grad_accumulation=1"
        )


def check_old_logps(old_logps: str, section: str) -> None:
    """Refuse ``old_logps="learner"`` where the learner does not read it (ValueError, one line; ``section``: the
    algorithm's keys' prefix): the token-level PPO learners take pi_old from the sampled log-probs."""
    if old_logps != "sampled":
        raise ValueError(
            f"{section}old_logps={old_logps!r} is read by the action-level PPO learners (marft, ppo, ippo, mappo): "
            f"unset {section}old_logps here"
        )


@dataclass
class ChainSettings(PPOSettings):
    """The PPO settings plus MARFT's multi-agent ones (action- and token-level MARFT)."""

    shared_reward: str = choice("once", ("once", "per_agent"))
    """A round's team-credit reward in the chain: "once" (its last agent), or "per_agent" (every copy: before issue 35;
    ablations)."""
    gamma_agent: float = ranged(0.99, UNIT)
    """Discount between agents of one round (the original used gamma; 1.0 is the principled choice)."""
    agent_iteration_interval: int = ranged(0, NON_NEGATIVE)
    """K > 0: only one agent learns at a time, switching every K updates (round-robin)."""
    sequential: SequentialConfig = field(default_factory=SequentialConfig)
    """The sequential trust-region update (HAPPO-style); off by default."""
