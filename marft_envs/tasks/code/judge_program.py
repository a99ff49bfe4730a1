"""The program's process in a code-repair judge run: load the patched program, answer the judge.

Standard library only (see ``judge.py``). This process holds the program and nothing of the tests:
it was forked before the judge read them. What it answers is decoded by the judge as plain data,
so all it can decide is the values the program's functions return.
"""

from __future__ import annotations

import os
import sys

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
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "contains": lambda a, b: b in a,
    "getitem": lambda a, b: a[b],
    "delitem": lambda a, b: a.__delitem__(b),
    "neg": lambda a: -a,
    "pos": lambda a: +a,
    "abs": abs,
    "invert": lambda a: ~a,
    "len": len,
    "bool": bool,
    "str": str,
    "repr": repr,
    "hash": hash,
    "int": int,
    "float": float,
    "index": lambda a: a.__index__(),
    "iter": lambda a: list(a),
    "setitem": lambda a, b, c: a.__setitem__(b, c),
}
"""What J may ask P to apply to its objects (``iter`` materialises the items)."""


def serve(requests: int, replies: int) -> None:
    """P's loop: load the program on J's word, then answer each request. Never returns."""
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
        reply = {"id": request.get("id")}
        try:
            op = request["op"]
            if op == "load":
                module = _load(request["entry_point"])
                reply["value"] = encode(module.__dict__.get(request["entry_point"]), handle)
            elif op == "get":
                reply["value"] = encode(module.__dict__[request["name"]], handle)
            elif op == "call":
                kwargs = {k: arg(v) for k, v in request["kwargs"]}
                reply["value"] = encode(arg(request["f"])(*map(arg, request["args"]), **kwargs), handle)
            elif op == "getattr":
                reply["value"] = encode(getattr(arg(request["obj"]), request["name"]), handle)
            elif op == "setattr":
                setattr(arg(request["obj"]), request["name"], arg(request["value"]))
                reply["value"] = None
            elif op == "apply":
                reply["value"] = encode(OPERATORS[request["name"]](*map(arg, request["args"])), handle)
            elif op == "run":  # untrusted tests: run one against the trusted program, report only that
                reply["value"] = encode(_run_alone(request, module))
            else:
                raise WireError(f"unknown request {op!r}")
        except _LoadError as err:
            reply["load_error"] = [err.status, err.reason]
        except BaseException as err:  # the program's exception, passed on by name
            try:
                text = str(err)[:200]
            except BaseException:
                text = "(unprintable)"
            reply["raise"] = [type(err).__name__, text]
        send(replies, reply)


class _LoadError(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _load(entry_point: str):
    import types

    try:
        with open("candidate.py") as f:
            code = compile(f.read(), "candidate.py", "exec")
    except SyntaxError as err:
        raise _LoadError("syntax_error", f"line {err.lineno}: {err.msg}") from None
    module = types.ModuleType("candidate")
    module.__file__ = "candidate.py"
    sys.modules["candidate"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as err:
        raise _LoadError("import_error", describe(err)) from None
    if entry_point not in module.__dict__:
        raise _LoadError("missing_entry_point", f"the program defines no {entry_point!r}")
    return module


def _run_alone(request: dict, module) -> list:
    # Only with untrusted tests: this process runs one test and ends (J forks one per test).
    namespace = dict(module.__dict__, candidate=module.__dict__[request["entry_point"]])
    try:
        exec(request["setup"], namespace)
        exec(request["test"], namespace)
        return ["pass", ""]
    except AssertionError as err:
        return ["fail", describe(err)]
    except BaseException as err:
        return ["error", describe(err)]
