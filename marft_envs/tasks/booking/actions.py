"""Actions: a JSON tool call, parsed and checked against the tool's JSON schema.

An action is one JSON object in the function-calling style::

    {"name": "free_slots", "arguments": {"people": ["Ana Silva", "Bo Chen"], "day": "Tue", "duration_minutes": 90}}

``arguments`` may be omitted (no arguments) or given as a JSON string holding the object, as some
chat APIs emit it; one Markdown code fence around the action is tolerated. Anything else raises
:class:`ActionError` with a one-line message that says what to fix — the env turns it into an error
observation, never an exception, and the database is not touched.

:func:`validate` checks arguments against the subset of JSON Schema the tool specs use (``type``,
``properties``, ``required``, ``additionalProperties``, ``items``, ``minItems``/``maxItems``,
``uniqueItems``, ``enum``, ``minimum``/``maximum``, ``multipleOf``, ``minLength``/``maxLength``,
``pattern``). Integers are written without a decimal point (``90``, not ``90.0``); ``true`` is not a
number; NaN and infinities are not JSON.

:func:`looks_like_sql` flags statement-shaped text (``; DROP TABLE``, ``' OR 1=1``, ``UNION SELECT``,
comments). Every query is parameterised, so such text could not run anyway; the check exists so an
agent that emits SQL is told so plainly instead of getting an "unknown person".
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

MAX_ACTION_CHARS = 8000
"""Longer actions are rejected before parsing (a tool call is a few hundred characters)."""
MAX_SHOWN_CHARS = 400
"""The board shows at most this much of a call's arguments, so garbage cannot swamp later observations."""

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(?P<body>.*?)\n?\s*```$", re.S)
_SQL = re.compile(
    r"""['"]\s*(--|#|/\*|;)"""  # a quote closed, then a comment or a new statement
    r"|;\s*(select|insert|update|delete|drop|alter|create|attach|detach|pragma|replace|truncate|with|begin|commit)\b"
    r"|/\*.*\*/"
    r"|\b(drop|alter|create|truncate)\s+(table|index|view|trigger|database)\b"
    r"|\binsert\s+into\b|\bdelete\s+from\b|\bupdate\s+\w+\s+set\b|\breplace\s+into\b"
    r"|\bselect\b.*\bfrom\b|\bunion\b(\s+all)?\s+select\b"
    r"|\b(attach|detach)\s+database\b|\bpragma\s+\w+"
    r"|'\s*(or|and)\s+\S+\s*=|\b(or|and)\s+(\d+|'\w*')\s*=\s*(\d+|'\w*')",
    re.I | re.S,
)


class ActionError(ValueError):
    """An action that cannot be run: malformed, an unknown tool, or arguments that break its schema."""


@dataclass(frozen=True)
class ToolCall:
    """A parsed action: which tool, with which arguments."""

    name: str
    arguments: dict[str, Any]

    def text(self, width: int = MAX_SHOWN_CHARS) -> str:
        """Compact JSON of the call, as the board shows it (cut at ``width`` characters)."""
        try:
            args = json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)
        except (RecursionError, ValueError):
            args = "{...nested too deeply...}"
        name = self.name if len(self.name) <= 40 else self.name[:37] + "..."
        return f"{name}({args if len(args) <= width else args[: width - 3] + '...'})"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _snippet(value: Any, width: int = 40) -> str:
    # Quote what the agent sent, briefly; a hostile value (nested thousands deep) must not break the message.
    try:
        text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError, TypeError):
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= width else text[: width - 3] + "..."


def parse_action(text: str) -> ToolCall:
    """Parse an action; raises :class:`ActionError` saying what is wrong."""
    if len(text) > MAX_ACTION_CHARS:
        raise ActionError(f"the action is {len(text)} characters; a tool call fits in {MAX_ACTION_CHARS}")
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced["body"].strip()
    if not body:
        raise ActionError('empty action: answer with one JSON tool call, {"name": ..., "arguments": {...}}')
    try:
        data = json.loads(body, parse_constant=_no_constants)
    except (ValueError, RecursionError) as err:
        reason = str(err).splitlines()[0][:80] if isinstance(err, ValueError) else "nested too deeply"
        raise ActionError(f'malformed JSON ({reason}): answer with one JSON tool call, {{"name": ..., "arguments": {{...}}}}') from None
    if not isinstance(data, dict):
        raise ActionError(f'the action must be a JSON object {{"name": ..., "arguments": {{...}}}}, got {type(data).__name__}')
    extra = sorted(set(data) - {"name", "arguments"})
    if extra:
        raise ActionError(f'unexpected keys {extra[:5]} in the action: only "name" and "arguments"')
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ActionError('the action needs "name": the tool to call, as a string')
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments, parse_constant=_no_constants) if arguments.strip() else {}
        except (ValueError, RecursionError):
            raise ActionError('"arguments" is a string that is not a JSON object; pass the object itself') from None
    if not isinstance(arguments, dict):
        raise ActionError(f'"arguments" must be a JSON object, got {_snippet(arguments)}')
    return ToolCall(name, arguments)


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}[kind])


def validate(value: Any, schema: dict[str, Any], path: str = "arguments") -> None:
    """Check ``value`` against ``schema``; raises :class:`ActionError` naming the first problem."""
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        article = "an" if kind[0] in "aeiou" else "a"
        raise ActionError(f"{path} must be {article} {kind}, got {_snippet(value)}")
    if "enum" in schema and value not in schema["enum"]:
        raise ActionError(f"{path} must be one of {schema['enum']}, got {_snippet(value)}")
    if kind == "object":
        props = schema.get("properties", {})
        missing = [k for k in schema.get("required", []) if k not in value]
        if missing:
            raise ActionError(f"{path} is missing required {missing}")
        if schema.get("additionalProperties") is False:
            unknown = sorted(k for k in value if k not in props)
            if unknown:
                raise ActionError(f"{path} has unknown keys {[_snippet(k, 24) for k in unknown[:3]]}; allowed: {sorted(props)}")
        extra_schema = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra_schema if isinstance(extra_schema, dict) else None)
            if sub is not None:
                validate(item, sub, f"{path}.{key}")
    elif kind == "array":
        if len(value) < schema.get("minItems", 0):
            raise ActionError(f"{path} needs at least {schema['minItems']} items, got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ActionError(f"{path} takes at most {schema['maxItems']} items, got {len(value)}")
        for k, item in enumerate(value):
            validate(item, schema.get("items", {}), f"{path}[{k}]")
        if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) < len(value):
            raise ActionError(f"{path} lists an item twice")
    elif kind == "string":
        if len(value) < schema.get("minLength", 0):
            raise ActionError(f"{path} must not be empty" if schema["minLength"] == 1 else f"{path} is too short")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise ActionError(f"{path} is longer than {schema['maxLength']} characters")
        if "pattern" in schema and not re.fullmatch(schema["pattern"], value):
            raise ActionError(f"{path} must look like {schema.get('format', schema['pattern'])}, got {_snippet(value)}")
    elif kind in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise ActionError(f"{path} must be at least {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ActionError(f"{path} must be at most {schema['maximum']}, got {value}")
        if "multipleOf" in schema and value % schema["multipleOf"]:
            raise ActionError(f"{path} must be a multiple of {schema['multipleOf']}, got {value}")


def looks_like_sql(text: str) -> bool:
    """Whether ``text`` looks like an SQL statement or an injection attempt."""
    return bool(_SQL.search(text))


def strings_in(value: Any) -> list[str]:
    """Every string inside a JSON value (keys included)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings_in(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []
