"""A team of agents on different base models (``agents.<agent_id>.model``): one :class:`LaMASPolicy` per model.

Agents that name the same model share its base, an adapter each; every call the rest of the package
makes on a policy names an adapter (or an agent, for prompts), and :class:`TeamPolicy` hands it to
the member policy that holds that adapter. So each agent's prompts are built with its own model's
tokenizer and chat template, its actions are sampled and scored by its own model, and checkpoints
hold every member's adapters under their own (peft) names.

What needs one model for every agent has no meaning here and is refused: a fresh adapter's KL
reference is *its* base with adapters off (:meth:`TeamPolicy.kl_reference` names it ``<adapter>@base``,
never None). A critic's frozen features come from each agent's own base (:meth:`TeamPolicy.features`,
zero-padded to the widest), and each value head reads its own model's width: a head per agent (IPPO), or
per model for a critic the agents share (MARFT, MAPPO; ``algorithms/critic.py``, ``model_heads``). What a
team cannot do yet (token-level features, CORY's role swaps) is refused before any model loads
(``marft_agents.training.setup.check_models``).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import Tensor

from marft_agents.models.policy import REFERENCE_SUFFIX, LaMASPolicy
from marft_agents.models.sampling import Generation, Sampling

BASE_REFERENCE = "@base"
"""``kl_reference`` of a fresh adapter ``a`` is ``a + BASE_REFERENCE``: ``a``'s own base with adapters off."""

NO_CRITIC = (
    "a team of models (agents.<agent_id>.model) reads each agent's features with that agent's own base: name the agent"
)


class TeamPolicy:
    """Agents on several base models: one LaMASPolicy per model, every call routed by its adapter's name."""

    mode = "lora"
    is_team = True
    """Several base models: each agent's features come from its own (:meth:`features`, :meth:`width_of`)."""

    def __init__(self, members: dict[str, LaMASPolicy], agents: list[str]):
        self.members = dict(members)
        """Model (as the config names it) -> the policy over the agents that use it."""
        self.agents = list(agents)
        self.model_of = {a: m for m, p in self.members.items() for a in p.agents}
        """Agent -> the model it acts with."""
        missing = [a for a in self.agents if a not in self.model_of]
        if missing or len(self.model_of) != len(self.agents):
            raise ValueError(
                f"every agent must be in exactly one member policy: agents {self.agents}, members hold {self.model_of}"
            )
        self.adapter_of = {a: self.members[self.model_of[a]].adapter_of[a] for a in self.agents}
        self.adapters = list(dict.fromkeys(self.adapter_of.values()))
        self._member = {self.adapter_of[a]: self.members[self.model_of[a]] for a in self.agents}

    def member(self, adapter: str) -> LaMASPolicy:
        """The policy that holds ``adapter`` (or its KL reference, ``<adapter>-ref`` / ``<adapter>@base``)."""
        for name in (adapter, adapter.removesuffix(REFERENCE_SUFFIX), adapter.removesuffix(BASE_REFERENCE)):
            if name in self._member:
                return self._member[name]
        raise KeyError(f"no agent of this team has adapter {adapter!r}: its adapters are {self.adapters}")

    # -- placement -----------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        """Where every member's weights live (one device for the team)."""
        return next(iter(self.members.values())).device

    def to(self, device: torch.device | str) -> TeamPolicy:
        """Move every member to ``device``; returns the team."""
        for policy in self.members.values():
            policy.to(device)
        return self

    # -- parameters and checkpoints --------------------------------------------------------------

    def parameters(self, adapter: str) -> list[torch.nn.Parameter]:
        return self.member(adapter).parameters(adapter)

    def adapter_state(self, adapter: str) -> dict[str, Tensor]:
        return self.member(adapter).adapter_state(adapter)

    def load_adapter_state(self, adapter: str, state: dict[str, Tensor]) -> None:
        self.member(adapter).load_adapter_state(adapter, state)

    @contextmanager
    def active(self, adapter: str):
        with self.member(adapter).active(adapter) as model:
            yield model

    @contextmanager
    def merged(self, adapter: str):
        with self.member(adapter).merged(adapter) as model:
            yield model

    # -- the KL reference ------------------------------------------------------------------------

    def eos_token_id_of(self, adapter: str) -> int:
        """The token that ends ``adapter``'s turns: its model's tokenizer's."""
        return self.member(adapter).eos_token_id

    def kl_reference(self, adapter: str) -> str:
        """``adapter``'s frozen copy where it has one, else ``<adapter>@base``: its own base with adapters off."""
        return self.member(adapter).kl_reference(adapter) or adapter + BASE_REFERENCE

    def freeze_reference(self) -> None:
        for policy in self.members.values():
            policy.freeze_reference()

    def reference_state(self) -> dict[str, dict[str, Tensor]] | None:
        """Every member's frozen reference weights by adapter; None while every adapter's reference is its base."""
        states = [p.reference_state() for p in self.members.values()]
        if all(s is None for s in states):
            return None
        return {a: w for s in states if s is not None for a, w in s.items()}

    def load_reference_state(self, state: dict[str, dict[str, Tensor]]) -> None:
        if not isinstance(state, dict) or sorted(state) != sorted(self.adapters):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise KeyError(f"reference weights for adapters {got}, expected {sorted(self.adapters)}")
        for policy in self.members.values():
            policy.load_reference_state({a: state[a] for a in policy.adapters})

    # -- prompts, generation, scoring --------------------------------------------------------------

    def prompt(self, observation: dict, agent: str | None = None) -> list[int]:
        """Token ids of ``agent``'s chat prompt, with its own model's tokenizer and chat template."""
        if agent not in self.model_of:
            raise ValueError(
                f"a team of models builds each prompt with its agent's tokenizer: name one of {self.agents}, got "
                f"{agent!r}"
            )
        return self.members[self.model_of[agent]].prompt(observation)

    def generate(
        self, prompts: list[list[int]], adapter: str, sampling: Sampling, *, merge: bool = False, generators=None
    ) -> Generation:
        """:meth:`LaMASPolicy.generate` on ``adapter``'s model, with its tokenizer's end and padding tokens
        (``generators``: the episode-seeded engine's, one per prompt, as for one model)."""
        return self.member(adapter).generate(prompts, adapter, sampling, merge=merge, generators=generators)

    def score(
        self, prompts: list[list[int]], responses: list[list[int]], adapter: str | None, temperature: float | Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """:meth:`LaMASPolicy.score` on ``adapter``'s model; ``<adapter>@base`` scores under that model's base."""
        if adapter is None:
            raise ValueError(
                "a team of models has no one base to score under: pass an adapter, or kl_reference(adapter)"
            )
        base = adapter.endswith(BASE_REFERENCE) and adapter.removesuffix(BASE_REFERENCE) in self._member
        return self.member(adapter).score(prompts, responses, None if base else adapter, temperature)

    @torch.no_grad()
    def features(self, prompts: list[list[int]], agent: str | None = None) -> Tensor:
        """``agent``'s frozen base features (:meth:`LaMASPolicy.features`), zero-padded to :attr:`hidden_size`:
        ``(B, D)``.

        A value head of the agent's own reads the first :meth:`width_of` columns (IPPO's ``ValueHeads``)."""
        if agent not in self.model_of:
            raise ValueError(NO_CRITIC)
        own = self.members[self.model_of[agent]].features(prompts)  # (B, d_agent)
        return torch.nn.functional.pad(own, (0, self.hidden_size - own.shape[1]))  # (B, D)

    @torch.no_grad()
    def token_features(self, prompts: list[list[int]], responses: list[list[int]], agent: str | None = None) -> Tensor:
        """``agent``'s frozen base features before each response token (:meth:`LaMASPolicy.token_features`),
        zero-padded to :attr:`hidden_size`: ``(B, R, D)``."""
        if agent not in self.model_of:
            raise ValueError(NO_CRITIC)
        own = self.members[self.model_of[agent]].token_features(prompts, responses)  # (B, R, d_agent)
        return torch.nn.functional.pad(own, (0, self.hidden_size - own.shape[-1]))  # (B, R, D)

    def width_of(self, agent: str) -> int:
        """The hidden size of ``agent``'s model: the width of its features."""
        return self.members[self.model_of[agent]].hidden_size

    @property
    def hidden_size(self) -> int:
        """The widest model's hidden size: every agent's features are padded to it."""
        return max(p.hidden_size for p in self.members.values())
