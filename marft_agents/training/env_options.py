"""Env options checked before a run starts: each ``env_kwargs`` key against the env's constructor.

A misspelt option or a value of the wrong type fails with one line naming the option (and the closest
real one) before any file is written, instead of a traceback from deep inside the env.
"""

from __future__ import annotations

import difflib
import inspect
import types
import typing
from typing import Any

from marft_agents.settings.text import cut, shown
from marft_agents.training.config import ConfigError


def check_env_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Refuse env options the env does not take, or of the wrong type (by its constructor's signature)."""
    import marft_envs

    params = _accepted_parameters(marft_envs.spec(env_id).factory)  # an unknown id raises naming the closest
    if params is None:  # the factory takes **kwargs all the way down: the env itself will check
        return
    for name, value in env_kwargs.items():
        if name not in params:
            close = difflib.get_close_matches(name[:100], list(params), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"env_kwargs.{cut(name)}: {env_id} has no option {shown(name)}; {hint}its options: {sorted(params)}"
            )
        default, param = params[name].default, params[name]
        if value is None:
            continue
        annotated = _annotated_kinds(param)
        if default is None or default is inspect.Parameter.empty:  # no default to go by: the annotation
            if annotated and not _is(value, _widened(annotated)):
                raise ConfigError(f"env_kwargs.{name} must be {_kind(annotated)} (or null), got {shown(value)}")
            continue
        # The default's type, and every type the annotation names (``levels: int | tuple[int, ...] = (1, 2, 3)``
        # takes ``levels=1`` too).
        kinds = (bool if isinstance(default, bool) else type(default), *(annotated or ()))
        if not _is(value, _widened(kinds)):
            raise ConfigError(
                f"env_kwargs.{name} must be {_kind(kinds)} (its default is {shown(default)}), got {shown(value)}"
            )


def _is(value: Any, expected: tuple[type, ...]) -> bool:
    """``isinstance``, but a bool is not a number here."""
    return isinstance(value, expected) and not (isinstance(value, bool) and bool not in expected)


# A float option takes an int; a list option a tuple and a tuple option a list (JSON and TOML have one sequence).
_WIDER = {float: (int, float), list: (list, tuple), tuple: (tuple, list)}


def _widened(kinds: tuple[type, ...]) -> tuple[type, ...]:
    return tuple(dict.fromkeys(t for k in kinds for t in _WIDER.get(k, (k,))))


def _kind(kinds: tuple[type, ...]) -> str:
    """``kinds`` in words: "a number", "of type int", "of type int or tuple"."""
    kinds = tuple(dict.fromkeys(kinds))
    if _widened(kinds) == (int, float):
        return "a number"
    return "of type " + " or ".join(k.__name__ for k in kinds)


_SIMPLE = (bool, int, float, str, list, tuple, dict)


def _annotated_kinds(param: inspect.Parameter) -> tuple[type, ...] | None:
    """The simple types (``int``, ``str``, ``tuple``, ...) an annotation names, ``None`` left out; None if it names
    others."""
    hint = param.annotation  # a string where the signature's annotations could not be evaluated: not checked
    args = (
        typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        else (hint,)
    )
    kinds = tuple(typing.get_origin(a) or a for a in args if a is not type(None))
    if not kinds or not all(k in _SIMPLE for k in kinds):
        return None
    return kinds


def _signature(function: Any) -> inspect.Signature:
    """The signature with its annotations evaluated (``from __future__ import annotations`` leaves strings)."""
    try:
        return inspect.signature(function, eval_str=True)
    except (NameError, SyntaxError, AttributeError, TypeError):  # a name only a type checker resolves
        return inspect.signature(function)


def _accepted_parameters(factory: Any) -> dict[str, inspect.Parameter] | None:
    """Keyword parameters of a factory, following ``**kwargs`` up the class hierarchy; None if unbounded."""
    params: dict[str, inspect.Parameter] = {}
    functions = (
        [k.__dict__["__init__"] for k in factory.__mro__ if "__init__" in k.__dict__ and k is not object]
        if inspect.isclass(factory)
        else [factory]
    )
    for function in functions:
        try:
            signature = _signature(function)
        except (TypeError, ValueError):
            return None
        open_ended = False
        for name, param in signature.parameters.items():
            if param.kind is param.VAR_KEYWORD:
                open_ended = True
            elif param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY) and name != "self":
                params.setdefault(name, param)
        if not open_ended:
            return params
    return None if not inspect.isclass(factory) else params
