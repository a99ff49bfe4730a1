"""Envs from outside this package: imported modules, the ``marft.envs`` entry points, ``module:Class`` ids.

Three ways a user's task reaches ``marft_envs.make`` (and so ``marft train env=...``):

1. **Import a module that registers it**: ``marft train --import my_tasks env=me/Task-v0`` (the
   ``imports`` config key does the same) imports ``my_tasks``, whose import calls
   ``marft_envs.register("me/Task-v0", Task)``; the working directory is searched first, as with
   ``python -m``, and a file path works too (``--import ./my_tasks.py``).
2. **An entry point** in the group ``marft.envs`` of an installed distribution, as Gymnasium's plugins
   do; :func:`load_entry_points` loads every one of them (once) before an id is looked up, so an
   installed task package needs no flag at all. In ``pyproject.toml``::

       [project.entry-points."marft.envs"]
       my_tasks = "my_tasks"            # a module whose import registers the envs
       # or  my_tasks = "my_tasks:register_envs"   (a function, called with no arguments)

3. **``package.module:ClassName``** as the env id: :func:`resolve` imports the module and registers
   the class under that very id, the first time it is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from importlib import metadata

from marft_envs.core import FlexEnv
from marft_envs.registration import _registry, register

ENTRY_POINT_GROUP = "marft.envs"
_loaded_entry_points = False


class PluginError(ValueError):
    """A user module, entry point or ``module:Class`` id that cannot be loaded."""


def import_modules(names: list[str]) -> None:
    """Import each module: a dotted name, or a ``.py`` file's path; a failing one raises one line naming it.

    As with ``python -m``, the working directory is on the module search path, so ``--import my_tasks``
    finds ``./my_tasks.py``; a file path (``--import ./my_tasks.py``) is imported as module ``my_tasks``
    with its folder on the path (its own sibling imports work).
    """
    for name in names:
        try:
            if name.endswith(".py") or os.sep in name:
                _import_file(name)
            else:
                if os.getcwd() not in sys.path and "" not in sys.path:
                    sys.path.insert(0, os.getcwd())
                importlib.import_module(name)
        except Exception as err:  # the user's module: report what went wrong without its traceback
            raise PluginError(
                f"cannot import {name!r} (--import / imports): {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}".rstrip(
                    ": "
                )
            ) from None


def _import_file(path: str) -> None:
    file = os.path.abspath(path)
    if not os.path.isfile(file) or not file.endswith(".py"):
        raise FileNotFoundError(f"no Python file at {path} (give a .py file's path, or a module name)")
    name = os.path.basename(file)[:-3]
    if not name.isidentifier():
        raise ValueError(f"{os.path.basename(file)} is not an importable module name (rename it, e.g. my_tasks.py)")
    folder = os.path.dirname(file)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    if getattr(sys.modules.get(name), "__file__", None) == file:
        return  # imported already
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise


def load_entry_points() -> list[str]:
    """Load every ``marft.envs`` entry point once; returns their names."""
    global _loaded_entry_points
    points = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    if _loaded_entry_points:
        return [p.name for p in points]
    _loaded_entry_points = True
    for point in points:
        try:
            loaded = point.load()
            if callable(loaded) and not isinstance(loaded, type):
                loaded()  # its registrations may fail too (an id that is already taken): the same one line
        except Exception as err:
            raise PluginError(
                f"entry point {point.name!r} ({point.value}) of group {ENTRY_POINT_GROUP!r} failed: "
                f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}".rstrip(": ")
            ) from None
    return [p.name for p in points]


def resolve(env_id: str) -> str:
    """Make ``env_id`` known: load entry points, and register a ``module:Class`` id; returns the id."""
    load_entry_points()
    if env_id in _registry or ":" not in env_id:
        return env_id
    module, _, attr = env_id.partition(":")
    try:
        target = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise PluginError(f"env {env_id!r}: cannot load {attr!r} from {module!r}: {err}") from None
    if not (isinstance(target, type) and issubclass(target, FlexEnv)):
        raise PluginError(f"env {env_id!r}: {attr} is not a FlexEnv subclass")
    register(env_id, target)
    return env_id
