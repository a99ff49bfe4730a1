"""The judge's wire: length-prefixed JSON messages, and the plain data that may cross them.

Shared by the code-repair judge (``judge.py``) and the program's process (``judge_program.py``);
standard library only, sent into each sandbox run beside them. ``encode`` turns plain data into
tagged JSON (exact types only: an ``int`` subclass is not an ``int``) and anything else into a
handle; ``decode`` builds only plain values and handles, and refuses any other shape.
"""

from __future__ import annotations

import base64
import json
import os
import struct

MAX_MESSAGE = 1 << 24
"""Largest message between J and P (bytes); a longer one is a wire error."""
MAX_DEPTH = 64
"""Deepest container that crosses as plain data; deeper ones stay in P as handles."""
MAX_ITEMS = 1 << 20
"""Most items in one plain value."""
PLAIN = (type(None), bool, int, float, str)
CONTAINERS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}


class WireError(BaseException):
    """A message between J and P that is not what the protocol allows: the run's report is void.

    A ``BaseException``, like :class:`ProgramGone`, so that no test's ``except Exception`` can
    swallow it and pass.
    """


class ProgramGone(BaseException):
    """P ended (or stopped answering correctly) in the middle of the tests: the run is a crash."""


class ProgramError(Exception):
    """An exception the program raised that is not one of Python's built-in ones."""


# -- the wire: length-prefixed JSON --------------------------------------------------------------


def send(fd: int, message) -> None:
    body = json.dumps(message).encode()
    view = memoryview(struct.pack(">I", len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


def receive(fd: int):
    """The next message, or ``None`` at EOF (the other process is gone)."""
    head = _read(fd, 4)
    if head is None:
        return None
    size = struct.unpack(">I", head)[0]
    if size > MAX_MESSAGE:
        raise WireError(f"a {size}-byte message (at most {MAX_MESSAGE})")
    body = _read(fd, size)
    if body is None:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as err:
        raise WireError(f"not JSON: {type(err).__name__}") from None


def _read(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 16))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# -- plain data <-> JSON ---------------------------------------------------------------------------


def encode(value, handle=None, depth: int = 0, budget: list | None = None):
    """``value`` as JSON: plain data tagged by type; other objects through ``handle`` (or ``TypeError``)."""
    budget = [MAX_ITEMS] if budget is None else budget
    budget[0] -= 1
    kind = type(value)
    if budget[0] < 0 or depth > MAX_DEPTH:
        return _other(value, handle)
    if kind in PLAIN:
        return value
    if kind in CONTAINERS:
        items = [encode(v, handle, depth + 1, budget) for v in value]
        if kind in (set, frozenset) and _holds_ref(items):
            return _other(value, handle)  # a handle has no hash on this side
        return {"t": CONTAINERS[kind], "v": items}
    if kind is dict:
        keys = [encode(k, handle, depth + 1, budget) for k in value]
        if _holds_ref(keys):
            return _other(value, handle)
        return {"t": "dict", "v": [[k, encode(v, handle, depth + 1, budget)] for k, v in zip(keys, value.values())]}
    if kind is bytes:
        return {"t": "bytes", "v": base64.b64encode(value).decode()}
    if kind is complex:
        return {"t": "complex", "v": [value.real, value.imag]}
    return _other(value, handle)


def _other(value, handle):
    if handle is None:
        raise TypeError(f"a {type(value).__name__} cannot be passed to the program (plain data and its own objects only)")
    return handle(value)


def decode(data, remote=None, depth: int = 0):
    """The value ``data`` (from ``encode``) stands for; ``remote(number, type_name)`` makes handles."""
    if depth > MAX_DEPTH + 2:
        raise WireError("too deep")
    kind = type(data)
    if kind in PLAIN:
        return data
    if kind is not dict or set(data) - {"t", "v", "type"} or "t" not in data:
        raise WireError(f"not a value: {kind.__name__}")
    tag, v = data["t"], data.get("v")
    if tag in ("list", "tuple", "set", "frozenset") and type(v) is list:
        if tag in ("set", "frozenset") and _holds_ref(v):
            raise WireError(f"a handle in a {tag}")  # hashing it would ask the program (encode never sends one)
        items = [decode(x, remote, depth + 1) for x in v]
        try:
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
        except TypeError:
            raise WireError(f"unhashable item in a {tag}") from None
    if tag == "dict" and type(v) is list and all(type(p) is list and len(p) == 2 for p in v):
        if _holds_ref([k for k, _ in v]):
            raise WireError("a handle as a dict key")
        try:
            return {decode(k, remote, depth + 1): decode(x, remote, depth + 1) for k, x in v}
        except TypeError:
            raise WireError("unhashable dict key") from None
    if tag == "bytes" and type(v) is str:
        return base64.b64decode(v.encode(), validate=True)
    if tag == "complex" and type(v) is list and len(v) == 2 and all(type(x) in (int, float) for x in v):
        return complex(v[0], v[1])
    if tag == "ref" and type(v) is int and remote is not None:
        return remote(v, str(data.get("type", "object"))[:60])
    raise WireError(f"not a value: tag {str(tag)[:20]!r}")


def _holds_ref(data) -> bool:
    stack = [data]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            if item.get("t") == "ref":
                return True
            stack.append(item.get("v"))
        elif type(item) is list:
            stack.extend(item)
    return False


def describe(err: BaseException) -> str:
    name = err.type_name if isinstance(err, ProgramError) else type(err).__name__
    try:
        text = str(err)
    except Exception:
        text = "(unprintable)"
    return (f"{name}: {text}" if text else name)[:200]
