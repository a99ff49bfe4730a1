"""Each agent's own settings: the ``agents.<agent_id>.*`` section of a run's config.

    marft train agents.reasoner_0.temperature=1.0 agents.actor_0.temperature=0.3 agents.actor_0.max_new_tokens=16

or, in a TOML file, ``[agents.actor_0]`` with ``temperature = 0.3``. A key an agent leaves unset
(None) takes the run's value of the same name (``temperature``, ``max_new_tokens``, ``top_k``, ``top_p``,
``stop``), so a config
without the section runs as before. ``train`` (default true) has no run-wide twin: ``agents.actor_0.train=false``
freezes that agent (:func:`frozen_agents`; it acts, its adapter is never updated); ``model`` gives it a base model of
its own (:func:`models`; ``marft_agents.models.team``); ``lr`` its adapter's learning rate (unset: the algorithm's
``<algo>.lr``) and ``lora_r``, ``lora_alpha``, ``lora_targets`` its adapter's shape (:func:`lora_values`). The
agent ids are the env's (``possible_agents``): a run refuses an id its env does not have before any model loads
(:func:`check_ids`). Each field
carries its check (``ranged``), so ``marft_agents.training.config.validate`` checks ``agents.actor_0.temperature`` as
it checks ``temperature``. A new per-agent key is a new field of :class:`AgentSettings` with its
one-line docstring; parsing, ``--help-config``, validation and the run's ``config.json`` follow.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from marft_agents.settings.fields import AT_LEAST_ONE, LR, NON_NEGATIVE, POSITIVE, TEMPERATURE, TOP_P, WHY_LR, ranged
from marft_agents.settings.text import ConfigError, coerce, cut, shown

SECTION = "agents"
"""The config section's name: keys ``agents.<agent_id>.<field>``."""
TEMPLATE_ID = "<agent_id>"
"""The agent id ``--help-config`` shows in the section's keys."""


@dataclass
class AgentSettings:
    """One agent's own settings; a field left None takes the run's value of the same name."""

    temperature: float | None = ranged(None, TEMPERATURE, "training samples; greedy decoding is for evaluation")
    """This agent's sampling temperature in training, >= 0.001; its log-probs use the same (None: the run's
    ``temperature``)."""
    max_new_tokens: int | None = ranged(None, AT_LEAST_ONE)
    """This agent's longest response in tokens, in training and evaluation (None: the run's ``max_new_tokens``)."""
    top_k: int | None = ranged(None, NON_NEGATIVE)
    """This agent draws among its ``top_k`` likeliest tokens in training, 0 all; its log-probs use the same (None: the
    run's ``top_k``)."""
    top_p: float | None = ranged(None, TOP_P)
    """This agent draws among its likeliest tokens whose probability reaches ``top_p`` in training, in (0, 1] (None: the
    run's ``top_p``)."""
    stop: list[str] | None = None
    """Strings that end this agent's responses, in training and evaluation (None: the run's ``stop``)."""
    train: bool = True
    """Whether this agent learns; false freezes it: it still acts with its adapter, which no update changes."""
    model: str | None = None
    """This agent's base model, any value ``model`` takes (None: the run's ``model``); agents naming one model share
    it."""
    lr: float | None = ranged(None, LR, WHY_LR)
    """This agent's adapter's learning rate (None: the algorithm's ``<algo>.lr``); ``lr_schedule`` scales it as the
    run's."""
    lora_r: int | None = ranged(None, AT_LEAST_ONE)
    """This agent's LoRA rank (None: the run's ``lora_r``)."""
    lora_alpha: int | None = ranged(None, POSITIVE)
    """This agent's LoRA alpha (None: the run's ``lora_alpha``)."""
    lora_targets: list[str] | None = None
    """The module names this agent's LoRA adapter adapts (None: the run's ``lora_targets``)."""


def field_names() -> list[str]:
    """The keys an agent's section may hold."""
    return [f.name for f in dataclasses.fields(AgentSettings)]


def set_key(agents: dict[str, AgentSettings], key: str, value: Any) -> None:
    """Apply ``key=value`` (``key`` the whole dotted key, ``agents.<agent_id>.<field>``) to ``agents``.

    A new agent's section starts from the defaults. A mapping given for a whole section
    (``agents.actor_0={"temperature": 0.3}``, or ``agents`` itself) applies each of its keys in turn.
    ConfigError (one line naming the key) for anything else: another shape of key, an unknown field,
    a value of the wrong type.
    """
    parts = key.split(".")
    if len(parts) < 3 and isinstance(value, Mapping):
        for k, v in value.items():
            set_key(agents, f"{key}.{k}", v)
        return
    if len(parts) != 3 or not parts[1]:
        raise ConfigError(
            f"{cut(key)} is not a per-agent key: use {SECTION}.<agent_id>.<key>, the key one of {field_names()} "
            f"(e.g. {SECTION}.actor_0.temperature=0.3)"
        )
    _, agent, name = parts
    if name not in field_names():
        close = difflib.get_close_matches(name[:100], field_names(), n=1, cutoff=0.6)
        hint = f"; did you mean '{SECTION}.{agent}.{close[0]}'?" if close else f"; an agent's keys are {field_names()}"
        raise ConfigError(f"unknown config key {shown(key)}{hint}")
    settings = agents.setdefault(agent, AgentSettings())
    setattr(settings, name, coerce(key, _prototype(name), value))


def _prototype(name: str) -> Any:
    """A value of field ``name``'s type (its type without None): what :func:`coerce` checks a new value against."""
    hint = typing.get_type_hints(AgentSettings)[name]
    kinds = [t for t in typing.get_args(hint) if t is not type(None)] or [hint]
    return (typing.get_origin(kinds[0]) or kinds[0])()


def check_ids(agents: Mapping[str, AgentSettings], possible_agents: Sequence[str], env: str) -> None:
    """ConfigError (one line) unless every agent ``agents`` names is one of the env's ``possible_agents``."""
    for agent in agents:
        if agent not in possible_agents:
            raise ConfigError(
                f"{SECTION}.{cut(agent)}: env {cut(env)} has no agent {shown(agent)}; its agents are "
                f"{list(possible_agents)}"
            )


def frozen_agents(
    agents: Mapping[str, AgentSettings], possible_agents: Sequence[str], *, shared_adapter: bool
) -> list[str]:
    """The agents with ``train=false``, in the env's order; ConfigError (one line) when none would train, or when
    ``shared_adapter`` (one adapter serves every agent, ``adapter_mode=shared``) and only some are frozen."""
    frozen = [a for a in possible_agents if a in agents and not agents[a].train]
    if not frozen:
        return []
    if len(frozen) == len(possible_agents):
        raise ConfigError(
            f"{SECTION}.<agent_id>.train=false freezes every agent of the env ({list(possible_agents)}): leave at "
            "least one training"
        )
    if shared_adapter:
        raise ConfigError(
            f"{SECTION}.{cut(frozen[0])}.train=false: with adapter_mode=shared one adapter serves every agent, so one "
            "agent cannot be frozen alone: use adapter_mode=lora (or copies)"
        )
    return frozen


def values(agents: Mapping[str, AgentSettings], name: str) -> dict[str, Any]:
    """Each agent's own value of field ``name``, for the agents that set one (None elsewhere: the run's value)."""
    return {agent: getattr(s, name) for agent, s in agents.items() if getattr(s, name) is not None}


SAMPLING = ("temperature", "max_new_tokens", "top_k", "top_p", "stop")
"""The keys that shape how an agent's actions are drawn: each one a keyword of ``models.sampling.agent_sampling``."""


def sampling_values(agents: Mapping[str, AgentSettings]) -> dict[str, dict[str, Any]]:
    """Each key of :data:`SAMPLING` -> the agents that set it, with their values (``agent_sampling``'s arguments)."""
    return {name: values(agents, name) for name in SAMPLING}


LORA = ("lora_r", "lora_alpha", "lora_targets")
"""The keys that shape an agent's LoRA adapter: each one a keyword of ``LaMASPolicy``."""


def lora_values(agents: Mapping[str, AgentSettings]) -> dict[str, dict[str, Any]]:
    """Each agent that sets a key of :data:`LORA` -> the keys it sets, with their values (``LaMASPolicy``'s
    ``agent_lora``)."""
    own = {name: values(agents, name) for name in LORA}
    return {
        a: {name: own[name][a] for name in LORA if a in own[name]} for a in agents if any(a in v for v in own.values())
    }


def per_agent(agents: Mapping[str, AgentSettings], name: str, default: Any, agent_ids: Sequence[str]) -> dict[str, Any]:
    """Every agent of ``agent_ids`` with its value of ``name``: its own where it sets one, else ``default``."""
    own = values(agents, name)
    return {agent: own.get(agent, default) for agent in agent_ids}


def to_plain(agents: Mapping[str, AgentSettings]) -> dict[str, dict[str, Any]]:
    """The section as plain data (JSON-ready): agent id -> its fields."""
    return {agent: dataclasses.asdict(s) for agent, s in agents.items()}


def rows(agents: Mapping[str, AgentSettings]) -> list[tuple[str, Any, dataclasses.Field, type]]:
    """``(key, value, field, AgentSettings)`` of every agent's every key; with no agent, one template agent
    (``--help-config``)."""
    section = agents or {TEMPLATE_ID: AgentSettings()}
    return [
        (f"{SECTION}.{agent}.{f.name}", getattr(s, f.name), f, AgentSettings)
        for agent, s in section.items()
        for f in dataclasses.fields(AgentSettings)
    ]
