"""Training algorithms: a registry from name to (config class, learner class).

Each algorithm is one module with a config dataclass and a :class:`~marft_agents.algorithms.base.Learner`
subclass; the modules are siblings over ``base.py`` and never import each other. A run's config
holds the common fields plus the section of the chosen algorithm only (``marft.lr=1e-4`` with
``algo=marft``), validated against that algorithm's config class.

Adding an algorithm (``docs/adding-an-algorithm.md``): write its module, then either add a line to
``BUILTIN`` or call :func:`register` from your own module and import it with the run:
``marft train --import my_algo algo=NAME`` (or the ``imports`` config key).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

BUILTIN: dict[str, tuple[str, str, str]] = {
    "marft": ("marft_agents.algorithms.marft", "MARFTConfig", "MARFT"),
    "marft_token": ("marft_agents.algorithms.marft_token", "MARFTTokenConfig", "MARFTToken"),
    "cory": ("marft_agents.algorithms.cory", "CORYConfig", "CORY"),
    "grpo": ("marft_agents.algorithms.grpo", "GRPOConfig", "GRPO"),
    "ppo": ("marft_agents.algorithms.ppo", "PPOConfig", "PPO"),
    "ippo": ("marft_agents.algorithms.ippo_mappo", "IPPOConfig", "IPPO"),
    "mappo": ("marft_agents.algorithms.ippo_mappo", "MAPPOConfig", "MAPPO"),
}
"""The shipped algorithms: name -> (module, config class, learner class), imported on first use."""

_registered: dict[str, tuple[type, type]] = {}


def register(name: str, config_class: type, learner_class: type) -> None:
    """Make ``algo=name`` train with ``learner_class(policy, config_class(...), temperature=..., tis_cap=...)``."""
    import dataclasses

    from marft_agents.algorithms.base import Learner

    if not name.isidentifier():
        raise ValueError(f"algorithm name {name!r} must be a Python identifier (it names a config section)")
    if not dataclasses.is_dataclass(config_class):
        raise TypeError(f"{name}: the config class {config_class.__name__} must be a dataclass")
    if not (isinstance(learner_class, type) and issubclass(learner_class, Learner)):
        raise TypeError(f"{name}: the learner class must subclass marft_agents.algorithms.base.Learner")
    _registered[name] = (config_class, learner_class)


def names() -> list[str]:
    """Every algorithm name, shipped ones first."""
    return [*BUILTIN, *(n for n in _registered if n not in BUILTIN)]


def lookup(name: str) -> tuple[type, type]:
    """``(config class, learner class)`` of ``name``; an unknown name raises a one-line ValueError."""
    if name not in _registered:
        if name not in BUILTIN:
            raise ValueError(
                f"unknown algorithm {name!r}: use one of {names()}, or, for your own, add "
                f"--import MODULE (the module that calls marft_agents.algorithms.register)"
            )
        module, config_class, learner_class = BUILTIN[name]
        mod = importlib.import_module(module)
        _registered[name] = (getattr(mod, config_class), getattr(mod, learner_class))
    return _registered[name]


def config_class(name: str) -> type:
    """The config dataclass of ``name``."""
    return lookup(name)[0]


def build_learner(
    name: str,
    policy: Any,
    config: Any,
    temperature: float | Mapping[str, Any],
    tis_cap: float | None = None,
    frozen: frozenset[str] = frozenset(),
) -> Any:
    """The learner for ``name`` on ``policy`` with its config section ``config``.

    ``temperature`` is the sampling temperature, one for all agents or each agent's own (agent id -> T), or each
    agent's whole ``Sampling`` where a run truncates its draws (``top_k``/``top_p``: the learner scores the same way).

    ``tis_cap`` turns on the truncated importance-sampling correction (``marft_agents/algorithms/tis.py``) in the
    learner's loss; the trainer recomputes the behaviour log-probs it needs.

    ``frozen``: adapters the learner must leave as they are (``agents.<agent_id>.train=false``), passed on as
    ``frozen=`` to a learner that takes it; a learner that does not cannot freeze and is refused in one line.
    """
    config_cls, learner_cls = lookup(name)
    if not isinstance(config, config_cls):
        raise TypeError(f"algo={name} needs a {config_cls.__name__}, got {type(config).__name__}")
    params = inspect.signature(learner_cls).parameters
    if "tis_cap" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise TypeError(
            f"algo={name}: {learner_cls.__name__}.__init__ must take tis_cap=None and pass it on to "
            "Learner.__init__ (docs/adding-an-algorithm.md)"
        )
    options = {}
    if frozen:
        if "frozen" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            raise ValueError(
                f"algo={name}: {learner_cls.__name__}.__init__ takes no frozen= (the adapters to leave untrained), so "
                f"it cannot freeze {sorted(frozen)}: drop agents.<agent_id>.train=false, or add frozen= and pass it on "
                "to Learner.__init__"
            )
        options["frozen"] = frozenset(frozen)
    learner = learner_cls(policy, config, temperature=temperature, tis_cap=tis_cap, **options)
    group = learner.group_size
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise ValueError(f"algo={name}: the learner's group_size must be an integer >= 1, got {group!r}")
    return learner
