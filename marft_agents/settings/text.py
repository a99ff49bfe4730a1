"""Reading a config's text: files, ``key=value`` values, nesting limits, and how an error quotes a value.

:mod:`marft_agents.training.config` builds and checks a ``TrainConfig`` from what these functions return.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tomllib


class ConfigError(ValueError):
    """A config file or override that cannot be applied."""


MAX_DEPTH = 32
"""Levels of nesting a config (or one value in it) may have; deeper ones are refused in one line (a
config nested 1,000 deep ended in a RecursionError)."""
_TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"


SHOWN_CHARS = 80
"""An error quotes at most this many characters of a value (a 50 MB value was echoed whole)."""


def shown(value: Any) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` characters plus "…" (what an error quotes of a value)."""
    if isinstance(value, (str, bytes)) and len(value) > 4 * SHOWN_CHARS:
        value = value[: 4 * SHOWN_CHARS]  # repr() of a 50 MB string would copy it first
    try:
        text = repr(value)
    except RecursionError:
        text = f"<a {type(value).__name__} nested too deeply>"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def cut(text: str) -> str:
    """``text`` itself, or its first :data:`SHOWN_CHARS` characters and "…" (a key or path in an error)."""
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def read_file(path: Path) -> dict[str, Any]:
    """The mapping in a .toml or .json config file (ConfigError: missing, unparsable, not a mapping, too deep)."""
    if not path.is_file():
        raise ConfigError(f"no such config file: {path}")
    if path.suffix not in (".toml", ".json"):
        raise ConfigError(f"config file {path} must be .toml or .json")
    try:
        data = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot parse {path}: {str(err).splitlines()[0]}") from None
    except RecursionError:  # the parsers recurse once per level of nesting
        raise ConfigError(f"cannot parse {path}: {_TOO_DEEP}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a config must be a mapping of keys to values at the top level, got {type(data).__name__}"
        )
    check_depth(data, str(path))
    return data


def parse_value(raw: str, key: str = "") -> Any:
    """The value of ``key=raw``: JSON if it parses (numbers, true, lists), else the text itself."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw  # a bare string such as env=marft/MathChain-v0
    except RecursionError:
        raise ConfigError(f"{key}: {_TOO_DEEP}") from None
    check_depth(value, key)
    return value


def check_depth(data: Any, where: str) -> None:
    """Refuse ``data`` nested deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list, tuple)):
            if depth > MAX_DEPTH:
                raise ConfigError(f"{where}: {_TOO_DEEP}")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested sections as dotted keys (``{"marft": {"lr": 1}}`` -> ``{"marft.lr": 1}``); env_kwargs stays one value."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        # env_kwargs is a value (a dict of env options), not a section of the config
        if isinstance(v, dict) and not key.startswith("env_kwargs"):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def coerce(key: str, current: Any, value: Any) -> Any:
    """``value`` for key ``key`` whose current value is ``current``: of its type (an int becomes a float), else
    ConfigError."""
    if current is None or value is None:
        return value
    if isinstance(current, bool):
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key} must be true or false, got {shown(value)}")
    if isinstance(current, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(current, int) and isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(current, (list, dict, str)) and isinstance(value, type(current)):
        return value
    raise ConfigError(f"{key} must be a {type(current).__name__}, got {shown(value)}")
