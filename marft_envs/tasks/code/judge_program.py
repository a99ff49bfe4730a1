"""The program's process in a code-repair judge run: load the program, answer requests about its objects.

Standard library only (see ``judge.py``). This process holds the program and nothing of the tests.
What it answers is decoded on the other side as plain data or a handle, so all it can decide is the
values the program's functions return. It serves one of two masters:

* **the judge** (a patch under test, the program untrusted): it loads ``candidate.py`` from its
  working directory and answers any request; the program may rewrite all of this process, which
  changes nothing on the judge's side.
* **a tester's test** (``guarded``: the program is the task's own, the test untrusted): it loads
  the program from the source it was handed in memory (no file, so ``open``, ``inspect`` and
  ``linecache`` find nothing) and answers only what a behavioural test needs: calls, operators,
  the program's own top-level functions and classes and plain-data constants by name, and public
  attributes (no leading ``_``) of the program's classes and their instances. No code object,
  frame, module or dunder attribute is handed out, so the test cannot read the program's text or
  bytecode.
"""

from __future__ import annotations

import os
import sys
import types

if __package__:  # imported on the host
    from marft_envs.tasks.code.judge_wire import WireError, decode, describe, encode, receive, send
else:  # in the run: a file beside the judge
    from judge_wire import WireError, decode, describe, encode, receive, send

# -- the program's process (P) -----------------------------------------------------------------


OPERATORS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a**b,
    "matmul": lambda a, b: a @ b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b,
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "getitem": lambda a, b: a[b],
    "delitem": lambda a, b: a.__delitem__(b),
    "neg": lambda a: -a,
    "pos": lambda a: +a,
    "abs": abs,
    "invert": lambda a: ~a,
    "len": len,
    "str": str,
    "repr": repr,
    "hash": hash,
    "int": int,
    "float": float,
    "index": lambda a: a.__index__(),
    "iter": lambda a: list(a),
    "setitem": lambda a, b, c: a.__setitem__(b, c),
}
"""What the tests' side may ask P to apply to its objects (``iter`` materialises the items); comparisons
with plain data, truth and membership are decided on the tests' side (``judge_proxy.Remote``)."""


def serve(requests: int, replies: int, source: str | None = None) -> None:
    """P's loop: load the program on the first request, then answer each request. Never returns.

    ``source``: the program's text, handed in memory (the guarded mode, for a tester's test); ``None``:
    read ``candidate.py`` (a patch judged by the judge).
    """
    guarded = source is not None
    objects: list = []

    def handle(value):
        objects.append(value)
        return {"t": "ref", "v": len(objects) - 1, "type": type(value).__name__}

    def arg(data):
        return decode(data, lambda number, _: objects[number])

    module = None
    while True:
        try:
            request = receive(requests)
        except WireError:
            os._exit(3)
        if request is None:
            os._exit(0)
        reply = {"id": request.get("id") if type(request) is dict else None}
        try:
            op = request["op"]
            if op == "load" and module is None:
                module = _load(request["entry_point"], source)
                reply["value"] = encode(module.__dict__.get(request["entry_point"]), handle)
            elif module is None:
                raise WireError("a request before the program was loaded")
            elif op == "get":
                reply["value"] = encode(_global(module, request["name"], guarded), handle)
            elif op == "call":
                kwargs = {k: arg(v) for k, v in request["kwargs"]}
                reply["value"] = encode(arg(request["f"])(*map(arg, request["args"]), **kwargs), handle)
            elif op == "getattr":
                reply["value"] = encode(getattr(_target(arg(request["obj"]), request["name"], guarded), request["name"]), handle)
            elif op == "setattr":
                setattr(_target(arg(request["obj"]), request["name"], guarded), request["name"], arg(request["value"]))
                reply["value"] = None
            elif op == "apply":
                result = OPERATORS[request["name"]](*map(arg, request["args"]))
                reply["value"] = handle(result) if request.get("keep") else encode(result, handle)
            else:
                raise WireError(f"unknown request {str(op)[:20]!r}")
        except _LoadError as err:
            reply["load_error"] = [err.status, err.reason]
        except BaseException as err:  # the program's exception, passed on by name
            try:
                text = str(err)[:200]
            except BaseException:
                text = "(unprintable)"
            reply["raise"] = [type(err).__name__, text]
        send(replies, reply)


def _programs(value) -> bool:
    """Whether ``value`` is a function or class the program defined (its module is the program's)."""
    return getattr(value, "__module__", None) == "candidate" and isinstance(value, (type, types.FunctionType))


def _global(module, name, guarded: bool):
    if guarded and (type(name) is not str or name.startswith("_")):
        raise NameError(f"name {str(name)[:60]!r}: a test may use only the program's public names")
    value = module.__dict__[name]
    if guarded and not _programs(value):
        try:
            encode(value)  # plain data: a constant of the program
        except TypeError:
            raise NameError(f"name {name!r} is not one of the program's own functions, classes or constants") from None
    return value


def _target(obj, name, guarded: bool):
    # A tester's test may touch only public attributes of the program's classes and of their instances.
    if guarded:
        if type(name) is not str or name.startswith("_"):
            raise AttributeError(f"{str(name)[:60]!r}: a test may use only public attributes")
        kind = obj if isinstance(obj, type) else type(obj)
        if getattr(kind, "__module__", None) != "candidate":
            raise AttributeError(f"{name!r}: a test may use attributes of the program's classes and their instances only")
    return obj


class _LoadError(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _load(entry_point: str, source: str | None = None):
    try:
        if source is None:
            with open("candidate.py") as f:
                code = compile(f.read(), "candidate.py", "exec")
        else:
            code = compile(source, "<candidate>", "exec")  # no file: nothing for linecache or inspect to read
    except SyntaxError as err:
        raise _LoadError("syntax_error", f"line {err.lineno}: {err.msg}") from None
    module = types.ModuleType("candidate")
    if source is None:
        module.__file__ = "candidate.py"
    sys.modules["candidate"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as err:
        raise _LoadError("import_error", describe(err)) from None
    if entry_point not in module.__dict__:
        raise _LoadError("missing_entry_point", f"the program defines no {entry_point!r}")
    return module
