"""The learner protocol and the pieces every training algorithm shares.

An algorithm is a :class:`Learner` subclass plus a config dataclass, registered by name in
``marft_agents/algorithms/__init__.py``. The trainer drives any learner the same way:

1. ``check_env`` before any work; ``before_collect(envs, update)``; then its ``collector`` plays
   ``episodes_per_update`` episodes (groups of ``group_size`` share a problem; ``needs_state``: record
   the env's global state with every agent-step) and ``update(episodes, update, rng)`` learns from them;
2. ``state_dict()`` / ``load_state_dict()`` round-trip everything ``--resume`` needs; evaluation uses
   the run's env options updated with ``eval_env_kwargs``.

Algorithms are siblings: each subclasses :class:`Learner` directly and imports this module, the pure maths
(``advantages``, ``losses``, ``tis``), the pieces it composes (a :class:`~marft_agents.algorithms.critic.Critic`,
``action_ppo``'s or ``token_ppo``'s step, ``prepare_advantages``, ``sequential``), the policy and the rollout
types — never another algorithm module. This module holds no update logic and never calls an algorithm back:
an update reads top to bottom in the algorithm's own module, which takes three things from here — its batch
(:func:`by_adapter`), scored minibatches (:func:`minibatches`: rows, per-token log-probs, entropies, mask,
reference log-probs when asked) and the optimizer step (:func:`apply`) — and writes its loss itself, from the
pure pieces of ``losses.py`` and ``tis.py`` (or calls the PPO step the action- or token-level family shares).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms import ppo_settings
from marft_agents.algorithms.critic import Critic
from marft_agents.algorithms.data_parallel import SINGLE, WHOLE, Ranks, Share
from marft_agents.algorithms.losses import ensure_finite
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Temperature, row_temperatures
from marft_agents.rollout.episode import AgentStep, Episode


class Learner(ABC):
    """One training algorithm as the trainer drives it: collection hooks, one update, checkpoint state."""

    needs_state: ClassVar[bool] = False
    """Whether the rollout engine must record the env's global state (``state_text()``) with every step."""
    skips_ignored: ClassVar[bool] = True
    """Whether the rollout engine may skip generating actions the env will ignore (``needs_action``);
    token-level learners say False: their per-token backup needs a token on every step."""
    eval_env_kwargs: ClassVar[dict[str, Any]] = {}
    """Env options that evaluation applies on top of the run's (e.g. CORY: each policy alone)."""
    group_size: int
    """Consecutive episodes that share one problem: the config's ``group_size`` field (read from it, so
    that a group-relative learner cannot forget to tell the trainer), else a class attribute, else 1."""
    score_batch_size: int
    """Responses per forward pass when the trainer scores steps outside the update (the TIS recompute):
    the config's ``minibatch_size``, 64 without one."""
    tis_cap: float | None
    """Truncated importance-sampling cap ``C`` (``generation.tis_cap``): each policy-gradient term is
    weighted by ``tis.action_weights`` / ``tis.token_weights`` with it. None: off."""
    optimizers: dict[str, torch.optim.Optimizer]
    """One optimizer per trainable adapter (``optimizers.adapter_optimizers`` over :attr:`trainable`; empty until the
    learner makes them), checkpointed by :meth:`state_dict`."""
    schedulers: dict[str, torch.optim.lr_scheduler.LRScheduler]
    """Each optimizer's learning-rate schedule (``optimizers.attach``; empty until a run attaches them); saved."""
    critic: Critic | None = None
    """The learner's value model with its optimizer, when it has one (MARFT, PPO, IPPO/MAPPO): checkpointed by
    :meth:`state_dict` (learners with several, as CORY, keep and checkpoint their own)."""
    frozen: frozenset[str]
    """Adapters no update changes (``agents.<agent_id>.train=false``): they act; no optimizer, step or own critic
    part."""
    trainable: list[str]
    """The other adapters, in ``policy.adapters`` order: the ones to build optimizers for and to step."""
    temperature: Temperature
    """The sampling temperature the steps were drawn at: one number, or each agent's own (agent id -> T,
    ``agents.<agent_id>.temperature``). Pass it on as it is to :func:`minibatches` (or score with
    :func:`~marft_agents.models.sampling.row_temperatures`): each step's log-probs are then its agent's."""
    ranks: Ranks = SINGLE
    """The data-parallel ranks its updates span (``data_parallel.py``; set under torchrun): each rank's share of the
    batch."""
    reward_structure: str = "cooperative"
    """How the run's env pays its agents (its declared ``reward_structure``; set by the trainer before any update)."""

    def __init__(
        self,
        policy: LaMASPolicy,
        config: Any,
        temperature: Temperature,
        tis_cap: float | None = None,
        frozen: frozenset[str] = frozenset(),
    ):
        unknown = sorted(set(frozen) - set(policy.adapters))
        if unknown:
            raise ValueError(f"frozen adapters {unknown} are not the policy's: its adapters are {policy.adapters}")
        self.frozen = frozenset(frozen)
        self.trainable = [a for a in policy.adapters if a not in self.frozen]
        if self.frozen and not self.trainable:
            raise ValueError(f"every adapter {policy.adapters} is frozen: leave at least one training")
        self.policy = policy
        self.config = config
        self.temperature = temperature
        self.tis_cap = tis_cap
        self.optimizers, self.schedulers = {}, {}
        self.group_size = _positive_int(config, "group_size", getattr(type(self), "group_size", 1))
        self.score_batch_size = _positive_int(config, "minibatch_size", 64)

    @classmethod
    def check_env(cls, config: Any, env: Any, *, workers: int = 0) -> None:
        """Refuse, before any work, an env (or ``workers`` > 0) this learner cannot train with (default: any)."""

    @classmethod
    def check_data_parallel(cls, config: Any) -> None:
        """Refuse, in one line, a config whose update this learner cannot split across ranks (default: every one)."""
        raise ValueError("it does not split its update across ranks yet")

    def learned(self) -> list[torch.nn.Parameter]:
        """Every parameter its optimizers step (the ones ranks must start from equal; never a frozen adapter's)."""
        params = [p for o in self.optimizers.values() for g in o.param_groups for p in g["params"]]
        return params + (self.critic.parameters() if self.critic is not None else [])

    def collector(self, rollout: Any) -> Any:
        """What plays the episodes, given the rollout engine (default: the engine; GRPO's tree: a tree rollout)."""
        return rollout

    def before_collect(self, envs: list, update: int) -> None:
        """Called before each collection with the training envs (default: nothing)."""

    @abstractmethod
    def update(self, episodes: list[Episode], update: int, rng: np.random.Generator) -> dict[str, float]:
        """Learn from one batch of whole episodes; return metrics."""

    def state_dict(self) -> dict:
        """Adapters (frozen ones too), their optimizers and schedules, the critic's state and the KL reference where it
        is not the base; learners with other state extend it."""
        state = {
            "adapters": {a: self.policy.adapter_state(a) for a in self.policy.adapters},
            "optimizers": {a: o.state_dict() for a, o in self.optimizers.items()},
        }
        if self.schedulers:  # a run's (``optimizers.attach``)
            state["schedulers"] = {a: s.state_dict() for a, s in self.schedulers.items()}
        reference = self.policy.reference_state()
        if reference is not None:  # a run from init_from: --resume must compare with the same starting adapters
            state["reference"] = reference
        if self.critic is not None:
            state.update(self.critic.state_dict())
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        for a in self.policy.adapters:
            self.policy.load_adapter_state(a, state["adapters"][a])
        for a, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][a])
        for a in set(self.schedulers) & set(state.get("schedulers", {})):  # older checkpoints: their optimizers' rates
            self.schedulers[a].load_state_dict(state["schedulers"][a])
        if "reference" in state:
            self.policy.load_reference_state(state["reference"])
        if self.critic is not None:
            self.critic.load_state_dict(state)


def _positive_int(config: Any, name: str, default: int) -> int:
    value = getattr(config, name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{type(config).__name__}.{name} must be an integer >= 1, got {value!r}")
    return value


# -- 1. the batch -----------------------------------------------------------------------------------


def flatten(episodes: list[Episode]) -> list[AgentStep]:
    """Every agent-step of every episode, in acting order."""
    return [s for e in episodes for s in e.steps]


def steps_of(policy: LaMASPolicy, steps: list[AgentStep], adapter: str) -> list[int]:
    """Indices of the steps played by ``adapter`` (several agents in ``"shared"`` mode) that it generated.

    Skipped steps (``AgentStep.skipped``: the env ignored the action, nothing was sampled) are left
    out: there is no action to take a policy loss on. They stay in the batch for values and returns.
    """
    return [i for i, s in enumerate(steps) if policy.adapter_of[s.agent] == adapter and not s.skipped]


def by_adapter(policy: LaMASPolicy, episodes: list[Episode]) -> tuple[list[AgentStep], dict[str, list[int]]]:
    """The update's batch: every agent-step in acting order, and each adapter's indices into it."""
    steps = flatten(episodes)
    return steps, {a: steps_of(policy, steps, a) for a in policy.adapters}


# -- 2. scored minibatches --------------------------------------------------------------------------


@dataclass
class Minibatch:
    """Some of one adapter's steps, their responses scored by the current policy (``(B, R)`` tensors)."""

    rows: np.ndarray
    """The steps' indices into the update's batch, ``(B,)``: index per-step tensors with them."""
    steps: list[AgentStep]
    """The steps themselves (their behaviour ``token_logps``, ``engine_logps`` for TIS)."""
    logp_tok: torch.Tensor
    """Log-prob of every response token under the adapter at the sampling temperature (with grad)."""
    entropy_tok: torch.Tensor
    """Entropy of the policy before every response token (with grad)."""
    mask: torch.Tensor
    """True on real response tokens."""
    ref_tok: torch.Tensor | None
    """Log-probs under the adapter's KL reference (``policy.kl_reference``: the base with adapters off, or
    the adapter's frozen starting copy after ``init_from``; no grad) when asked for, else None."""
    share: Share = WHOLE
    """Its part of its optimizer step's minibatch (this rank's, data-parallel; one of an accumulation group's; all of it
    else): scale each loss term's mean by ``share.rows`` or ``share.tokens``, so that the parts sum to its mean."""


def minibatches(
    policy: LaMASPolicy,
    adapter: str,
    steps: list[AgentStep],
    idx: list[int],
    rng: np.random.Generator | None,
    *,
    temperature: Temperature,
    minibatch_size: int,
    epochs: int = 1,
    reference: bool = False,
    ranks: Ranks = SINGLE,
    accumulation: int = 1,
    micro_batch_tokens: int | None = 0,
) -> Iterator[Minibatch]:
    """``epochs`` passes over the steps ``idx`` of ``adapter``, each in a fresh ``rng`` permutation.

    ``rng=None``: one pass in ``idx`` order (e.g. new log-probs after a step, under ``torch.no_grad``).
    ``reference``: also score every minibatch under the adapter's KL reference (for a KL penalty).
    ``temperature``: one for all steps, or each agent's own (a mapping): every step is scored at the
    temperature its agent sampled at (one adapter may serve agents with different ones: ``"shared"``).
    ``ranks`` (with an ``rng``): ``idx`` are this rank's; each global minibatch cut to its rows
    (``data_parallel.schedule``). ``accumulation`` k (``grad_accumulation``, with an ``rng``): each k minibatches of a
    pass make one optimizer step, as one of ``k * minibatch_size`` rows would (``share``: their parts of it).
    ``micro_batch_tokens``: each minibatch scored in micro-batches of at most that many padded tokens, parts of its step
    as accumulated minibatches are (memory: one micro-batch's activations at a time; 0: whole minibatches; None:
    sized to the policy's model, :func:`~marft_agents.algorithms.ppo_settings.micro_batch_tokens`).
    """
    model_config = getattr(getattr(policy, "base", None), "config", None)
    max_tokens = ppo_settings.micro_batch_tokens(micro_batch_tokens, model_config)
    sizes = dict(minibatch_size=minibatch_size, epochs=epochs, accumulation=accumulation, max_tokens=max_tokens)
    for rows, share in dp.step_schedule(ranks, steps, idx, rng, **sizes):
        yield _scored(policy, adapter, steps, rows, temperature, reference, share)


def _scored(
    policy: LaMASPolicy,
    adapter: str,
    steps: list[AgentStep],
    rows: np.ndarray,
    temperature: Temperature,
    reference: bool,
    share: Share,
) -> Minibatch:
    """The steps ``rows`` scored by ``adapter`` (and its KL reference when asked), each at its agent's temperature."""
    mb = [steps[i] for i in rows]
    prompts, responses = [s.prompt for s in mb], [s.response for s in mb]
    t = row_temperatures([s.agent for s in mb], temperature, policy.device)  # a number, or (B,)
    logp_tok, entropy_tok, mask = policy.score(prompts, responses, adapter, t)  # (B, R)
    ref_tok = None
    if reference:
        with torch.no_grad():
            ref_tok, _, _ = policy.score(prompts, responses, policy.kl_reference(adapter), t)  # (B, R)
    return Minibatch(
        rows=rows, steps=mb, logp_tok=logp_tok, entropy_tok=entropy_tok, mask=mask, ref_tok=ref_tok, share=share
    )


# -- 3. the optimizer step --------------------------------------------------------------------------


def apply(
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    params: list[torch.nn.Parameter],
    max_grad_norm: float,
    name: str,
    ranks: Ranks = SINGLE,
    share: Share = WHOLE,
) -> float:
    """One gradient step on ``loss``: zero the gradients, backward, clip their norm, step; returns the loss.

    A NaN or infinite loss or gradient norm raises (naming ``name``) before any weight changes. Data-parallel, ``loss``
    is this rank's part: ``params``' gradients (and the loss returned) are summed over the ranks before the clip, so all
    step alike. ``share`` (the minibatch's) of accumulated minibatches: the ``first`` zeroes the gradients, each adds
    its own and returns its part of the loss, and the ``last`` alone clips and steps on their sum.
    """
    if not ranks.parallel:
        ensure_finite(loss, f"{name}/loss")
    if share.first:
        optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if not share.last:  # the group's step waits for its last part
        return float(ranks.sum(loss.detach().reshape(1)))
    total = ranks.reduce_gradients(params, loss)
    ensure_finite(total, f"{name}/loss")
    ensure_finite(torch.nn.utils.clip_grad_norm_(params, max_grad_norm), f"{name}/grad_norm")
    optimizer.step()
    return float(total)
