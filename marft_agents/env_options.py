"""Env options checked before a run starts: each ``env_kwargs`` key against the env's constructor.

A misspelt option or a value of the wrong type fails with one line naming the option (and the closest
real one) before any file is written, instead of a traceback from deep inside the env.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

from marft_agents.config import ConfigError


def check_env_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Refuse env options the env does not take, or of the wrong type (by its constructor's signature)."""
    import marft_envs

    params = _accepted_parameters(marft_envs.spec(env_id).factory)  # an unknown id raises naming the closest
    if params is None:  # the factory takes **kwargs all the way down: the env itself will check
        return
    for name, value in env_kwargs.items():
        if name not in params:
            close = difflib.get_close_matches(name, list(params), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"env_kwargs.{name}: {env_id} has no option {name!r}; {hint}its options: {sorted(params)}")
        default = params[name].default
        if default is None or default is inspect.Parameter.empty or value is None:
            continue
        expected = bool if isinstance(default, bool) else (int, float) if isinstance(default, float) else type(default)
        if (isinstance(value, bool) and expected is not bool) or not isinstance(value, expected):
            kind = "a number" if expected == (int, float) else f"of type {type(default).__name__}"
            raise ConfigError(f"env_kwargs.{name} must be {kind} (its default is {default!r}), got {value!r}")


def _accepted_parameters(factory: Any) -> dict[str, inspect.Parameter] | None:
    """Keyword parameters of a factory, following ``**kwargs`` up the class hierarchy; None if unbounded."""
    params: dict[str, inspect.Parameter] = {}
    functions = ([k.__dict__["__init__"] for k in factory.__mro__ if "__init__" in k.__dict__ and k is not object]
                 if inspect.isclass(factory) else [factory])
    for function in functions:
        try:
            signature = inspect.signature(function)
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
