"""What the rest of the package calls on a policy: :class:`RolloutPolicy` to play, :class:`Policy` to learn too.

Three classes are policies, and none inherits from another: :class:`~marft_agents.models.policy.LaMASPolicy`
(one base, an adapter per agent), :class:`~marft_agents.models.team.TeamPolicy` (agents on several base
models) and :class:`~marft_agents.models.bare.ModelAsPolicy` (one causal LM without adapters, for
``marft pretrain``'s evaluations). They match these protocols by their members alone (``isinstance``
checks the names, ``tests/agents/test_policy.py``).

The rollout engine and the hf engine need only :class:`RolloutPolicy`: a prompt per observation, an adapter
per agent, a batched ``generate``; every policy is one. The learners and the trainer need
:class:`Policy`: the adapters' parameters and checkpoints, the KL reference, scoring and the critic's
frozen features; the two adapter policies are one (a model without adapters has nothing to train).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from marft_agents.models.sampling import Generation, Sampling


@runtime_checkable
class RolloutPolicy(Protocol):
    """What a rollout and a generation engine call on a policy: prompts, each agent's adapter, batched generation."""

    adapter_of: Mapping[str, str]
    """Agent id -> the name of the adapter that acts for it (every request names one)."""
    is_team: bool
    """Whether the agents act with several base models (``models/team.py``): each agent's features then come
    from its own base (``features(prompts, agent)``), ``width_of(agent)`` columns of them its own."""

    @property
    def device(self) -> torch.device:
        """Where the policy's weights live: every tensor it makes or is given goes there."""
        ...

    def prompt(self, observation: dict, agent: str | None = None) -> list[int]:
        """Token ids of ``agent``'s chat prompt for one env observation."""
        ...

    def generate(
        self, prompts: list[list[int]], adapter: str, sampling: Sampling, *, merge: bool = False
    ) -> Generation:
        """One batched generation of ``prompts`` with ``adapter`` (``merge``: its weights merged into the base's)."""
        ...


@runtime_checkable
class Policy(RolloutPolicy, Protocol):
    """What the learners and the trainer call on a policy besides playing: parameters, checkpoints, KL reference,
    scores, features."""

    agents: list[str]
    """The env's agents, in its order."""
    adapters: list[str]
    """The adapters, in order of their first agent (one for all agents in ``"shared"`` mode)."""

    @property
    def hidden_size(self) -> int:
        """The width of :meth:`features` (a team's widest model's)."""
        ...

    def to(self, device: torch.device | str) -> Policy:
        """Move every weight to ``device``; returns the policy."""
        ...

    def parameters(self, adapter: str) -> list[torch.nn.Parameter]:
        """The trainable parameters of one adapter."""
        ...

    def adapter_state(self, adapter: str) -> dict[str, Tensor]:
        """A copy of one adapter's weights (for checkpoints)."""
        ...

    def load_adapter_state(self, adapter: str, state: dict[str, Tensor]) -> None:
        """Load weights saved by :meth:`adapter_state`; they stay trainable."""
        ...

    def kl_reference(self, adapter: str) -> str | None:
        """What ``adapter``'s KL penalty compares it with, as :meth:`score` takes it."""
        ...

    def eos_token_id_of(self, adapter: str) -> int:
        """The token that ends ``adapter``'s turns (its model's tokenizer's)."""
        ...

    def freeze_reference(self) -> None:
        """Make every adapter's current weights its KL reference."""
        ...

    def reference_state(self) -> dict[str, dict[str, Tensor]] | None:
        """The frozen reference weights per adapter; None while the base is every adapter's reference."""
        ...

    def load_reference_state(self, state: dict[str, dict[str, Tensor]]) -> None:
        """Make ``state`` (from :meth:`reference_state`) the frozen KL reference of every adapter."""
        ...

    def score(
        self, prompts: list[list[int]], responses: list[list[int]], adapter: str | None, temperature: float | Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Per-token log-probs and entropies of ``responses`` (with grad), and the response mask, each ``(B, R)``."""
        ...

    def features(self, prompts: list[list[int]], agent: str | None = None) -> Tensor:
        """Frozen base features for the critic, ``(B, hidden_size)`` (``agent``: whose base, in a team)."""
        ...

    def token_features(self, prompts: list[list[int]], responses: list[list[int]], agent: str | None = None) -> Tensor:
        """Frozen base features of the state before each response token, ``(B, R, hidden_size)`` (``agent``: whose base,
        in a team)."""
        ...
