"""Env ids: one registry of ours, mirrored into PettingZoo's and Gymnasium's.

``register`` records how to build an env and which views it supports; every id goes into
PettingZoo's ``aec`` registry, ids whose graph is always empty also into its ``parallel`` registry,
and one-agent ids into Gymnasium's. So all of these work after ``import marft_envs``::

    marft_envs.make("marft/MathChain-v0")                 # the FlexEnv (layered interface)
    pettingzoo.make("aec", "marft/MathChain-v0")          # PettingZoo AECEnv
    pettingzoo.make("parallel", "marft/MathDebate-v0")    # PettingZoo ParallelEnv
    gymnasium.make("marft/MathSolo-v0")                   # Gymnasium Env

:func:`env_module` gives an id the module-level entry points of a PettingZoo env package
(``env``, ``raw_env``, ``parallel_env``), which PettingZoo's module-based tests take.
"""

from __future__ import annotations

import difflib
import importlib
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import pettingzoo

from marft_envs.core import FlexEnv
from marft_envs.errors import EnvUsageError
from marft_envs.views import AECView, GymView, ParallelView

KINDS = ("aec", "parallel", "gym")
VIEWS = ("layered", *KINDS)


@dataclass(frozen=True)
class EnvEntry:
    """How to build one registered env and which views it supports."""

    id: str
    """Versioned id, ``marft/<Name>-v<k>``."""
    target: Callable[..., FlexEnv] | str
    """Builds the FlexEnv from keyword arguments; or ``"module:Class"``, imported the first time it is needed."""
    kwargs: dict[str, Any]
    """Default keyword arguments for ``factory``."""
    parallel: bool
    """True when the graph is always empty, so the Parallel view exists."""
    gym: bool
    """True when there is exactly one agent, so the Gymnasium view exists."""
    eval_kwargs: dict[str, Any] | None = None
    """Constructor options that make the env draw held-out episodes (e.g. ``{"split": "test"}``), whose
    reset options come from ``env.heldout_options(n, seed)``; None: no held-out split, evaluated as configured."""
    attempts_option: str | None = None
    """The constructor option that sets the number of attempts with feedback (``"rounds"`` in the MATH
    and code-repair families); None: the env has no such option."""

    @property
    def factory(self) -> Callable[..., FlexEnv]:
        """The FlexEnv factory (a ``"module:Class"`` target is imported now, once)."""
        return _load(self.target)


def _load(target: Callable[..., FlexEnv] | str) -> Callable[..., FlexEnv]:
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


_registry: dict[str, EnvEntry] = {}


class RegistrationError(ValueError):
    """An env id registered a second time to a different env (or with different options)."""


def register(
    id: str,
    factory: Callable[..., FlexEnv] | str,
    *,
    parallel: bool | None = None,
    gym: bool = False,
    kwargs: dict[str, Any] | None = None,
    eval_kwargs: dict[str, Any] | None = None,
    attempts_option: str | None = None,
) -> None:
    """Register a FlexEnv factory under ``id`` in our registry, PettingZoo's and (if ``gym``) Gymnasium's.

    ``factory`` may be ``"module:Class"``: the module is imported only when the env is first made (as
    Gymnasium's ids are), so registering costs nothing; ``parallel`` must then be given. Otherwise
    ``parallel`` defaults to the factory's ``metadata["is_parallelizable"]`` when it is a FlexEnv class.
    An id is registered once: registering it again with the same entry point (:func:`entry_point`, e.g.
    a module imported twice or reloaded) and the same options changes nothing; with a different env or
    other options it raises :class:`RegistrationError` (a ValueError) and leaves the registry as it was.
    ``eval_kwargs`` and ``attempts_option`` declare how held-out evaluation builds the env (see
    :class:`EnvEntry`); leave them out and the env is evaluated as configured, in a single protocol.
    """
    if isinstance(factory, str):
        if factory.count(":") != 1 or not all(p.replace(".", "").isidentifier() for p in factory.split(":")):
            raise ValueError(f"a lazy env factory is 'package.module:Class', got {factory!r}")
        if parallel is None:
            raise ValueError(f"{id}: a 'module:Class' factory is not imported at registration: pass parallel=True/False")
    elif parallel is None:
        parallel = bool(getattr(factory, "metadata", {}).get("is_parallelizable", False))
    if attempts_option is not None and not (isinstance(attempts_option, str) and attempts_option.isidentifier()):
        raise ValueError(f"attempts_option must be the name of a constructor option, got {attempts_option!r}")
    entry = EnvEntry(
        id=id,
        target=factory,
        kwargs=dict(kwargs or {}),
        parallel=parallel,
        gym=gym,
        eval_kwargs=None if eval_kwargs is None else dict(eval_kwargs),
        attempts_option=attempts_option,
    )
    if id in _registry:
        old = _registry[id]
        _refuse_a_different_env(old, entry)
        if isinstance(old.target, str):  # the same env by its class: the lazy entry stays as it was
            entry = old
    _registry[id] = entry
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the same registration again (a module reload) is expected
        pettingzoo.register("aec", id, entry_point=_view_factory(entry, "aec"))
        if parallel:
            pettingzoo.register("parallel", id, entry_point=_view_factory(entry, "parallel"))
        if gym:
            if id in gymnasium.registry:
                del gymnasium.registry[id]
            gymnasium.register(id=id, entry_point=_view_factory(entry, "gym"), disable_env_checker=False)


def entry_point(factory: Callable[..., Any] | str) -> str:
    """``module:qualname`` of a factory, the name a registration is known by (a reloaded module's class keeps it)."""
    if isinstance(factory, str):
        return factory
    module = getattr(factory, "__module__", None)
    name = getattr(factory, "__qualname__", None)
    return f"{module}:{name}" if module and name else repr(factory)


def _refuse_a_different_env(old: EnvEntry, new: EnvEntry) -> None:
    """A second registration of an id must be the same one (a module imported twice, or reloaded).

    Anything else would silently put another env under a known id, and its results would be
    reported under that id's name (a user's module, or an installed entry point, replacing
    ``marft/MathChain-v0``).
    """
    old_point, new_point = entry_point(old.target), entry_point(new.target)
    if old_point != new_point:
        raise RegistrationError(
            f"env id {old.id!r} is already registered to {old_point}; refusing to re-register it "
            f"to {new_point}: register your env under an id of its own (e.g. 'you/Name-v0')"
        )
    changed = [f for f in ("kwargs", "parallel", "gym", "eval_kwargs", "attempts_option") if getattr(old, f) != getattr(new, f)]
    if changed:
        raise RegistrationError(
            f"env id {old.id!r} is already registered to {old_point} with other {', '.join(changed)}; "
            "refusing to change it: register the variant under an id of its own (e.g. a new version)"
        )


def list_envs(kind: str | None = None) -> list[str]:
    """Registered ids, optionally only those with a view of ``kind`` (``"aec"``, ``"parallel"``, ``"gym"``)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: use one of {list(KINDS)} (or None for all)")
    entries = _registry.values()
    if kind == "parallel":
        entries = [e for e in entries if e.parallel]
    elif kind == "gym":
        entries = [e for e in entries if e.gym]
    return sorted(e.id for e in entries)


def spec(id: str) -> EnvEntry:
    """The registry entry for ``id``; an unknown id raises naming the closest ones."""
    if id not in _registry:
        close = difflib.get_close_matches(id, list(_registry), n=3, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f"; registered: {sorted(_registry)}"
        raise KeyError(
            f"unknown env id {id!r}{hint}; for a task of your own, import the module that registers it "
            "(marft --import MODULE, or the imports config key), install it with a 'marft.envs' "
            "entry point, or pass env=package.module:ClassName"
        )
    return _registry[id]


def make(id: str, *, view: str = "layered", **kwargs: Any):
    """Build a registered env: the FlexEnv itself (``view="layered"``) or its ``aec``/``parallel``/``gym`` view."""
    if view not in VIEWS:
        raise EnvUsageError(f"unknown view {view!r}: use one of {list(VIEWS)}")
    entry = spec(id)
    if view == "gym" and not entry.gym:
        raise EnvUsageError(f"{id} has no Gymnasium view (it is multi-agent); use view='aec' or 'layered'")
    return _view_factory(entry, view)(**kwargs)


def env_module(id: str) -> types.ModuleType:
    """``id`` as a PettingZoo-style env module: ``env(**kwargs)`` builds the AEC view (``raw_env`` too),
    and, for ids with a Parallel view, ``parallel_env(**kwargs)`` builds that one.

    PettingZoo's envs ship as modules with these functions and some of its tests take such a module,
    e.g. ``pettingzoo.test.max_cycles_test(env_module("marft/MathDebate-v0"))``.
    """
    entry = spec(id)
    module = types.ModuleType(id, f"PettingZoo-style entry points of the registered env {id}.")
    module.env = module.raw_env = _view_factory(entry, "aec")
    if entry.parallel:
        module.parallel_env = _view_factory(entry, "parallel")
    return module


def _view_factory(entry: EnvEntry, view: str) -> Callable[..., Any]:
    wrap = {"layered": lambda env: env, "aec": AECView, "parallel": ParallelView, "gym": GymView}[view]

    def build(**kwargs: Any):
        env = entry.factory(**{**entry.kwargs, **kwargs})
        return wrap(env)

    build.__name__ = f"make_{view}"
    return build
