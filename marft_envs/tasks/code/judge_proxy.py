"""The tests' side of a code-repair judge run: the program's objects as proxies, and running the tests.

Standard library only (see ``judge.py``). The tests run here, with the entry point bound to a
:class:`Remote`: every use of one of the program's objects is a numbered request to the program's
process, and only plain data comes back (``judge_wire.decode``). What a test checks is decided here:

* **Comparisons and truth tests.** One of the program's objects is never compared with plain data:
  ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` against plain data raise ``TypeError`` (the test errors),
  and so does asking whether it is true (``assert f(x)``, ``not``, ``if``, ``all``). Only two of the
  program's own objects are compared by the program (``Vector2(1, 2) == Vector2(1, 2)``), and its
  answer must be a ``bool``; ``!=`` is the negation of its ``==``.
* **Operators.** Arithmetic on one of the program's objects (``f(x) - y``, ``abs(v)``, ``v * 3``) is
  done by the program, and the result stays the program's object: it can then be compared only with
  another of its objects, never with plain data. So ``abs(f(x) - y) < 1e-6`` passes only when ``f``
  returns a number.
* **Membership** (``x in obj``) goes through the object's items, which cross as plain data, and is
  decided here.

Conversions that must produce plain data (``len``, ``int``, ``float``, ``str``, ``repr``, ``hash``,
iteration) are answered by the program and type-checked here: like a method's return value, they
are what the program decides.
"""

from __future__ import annotations

import ast
import builtins

if __package__:  # imported on the host (tests)
    from marft_envs.tasks.code.judge_wire import ProgramError, ProgramGone, WireError, decode, describe, encode, receive, send
else:  # in the run: a file beside the judge
    from judge_wire import ProgramError, ProgramGone, WireError, decode, describe, encode, receive, send


class Link:
    """One end of the pipes to the program's process: numbered requests, one matching reply each."""

    def __init__(self, requests: int, replies: int):
        self.requests, self.replies, self.sent = requests, replies, 0

    def request(self, op: str, **fields):
        self.sent += 1
        try:
            send(self.requests, {"op": op, "id": self.sent, **fields})
        except OSError as err:
            raise ProgramGone(f"the program's process closed its pipe ({err.strerror})") from None
        reply = receive(self.replies)
        if reply is None:
            raise ProgramGone("the program's process ended")
        if type(reply) is not dict or reply.get("id") != self.sent:
            raise WireError("a reply out of turn")
        if "raise" in reply:
            raise _program_exception(reply["raise"])
        if "load_error" in reply and op == "load":
            status, reason = reply["load_error"]
            raise Refused(str(status), str(reason)[:200])
        if "value" not in reply:
            raise WireError("a reply without a value")
        value = decode(reply["value"], Remote)
        if fields.get("keep") and type(value) is not Remote:
            raise WireError("an operator's result came back as plain data (it must stay the program's object)")
        return value

    def out(self, value):
        """A value sent to the program: plain data, or one of its own objects."""
        return encode(value, _ref_of)

    def apply(self, name: str, *args, keep: bool = False):
        return self.request("apply", name=name, args=[self.out(a) for a in args], keep=keep)


class Refused(Exception):
    """The program could not be loaded: ``status`` and ``reason`` become the run's report."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _program_exception(raised) -> Exception:
    if type(raised) is not list or len(raised) != 2 or not all(type(x) is str for x in raised):
        raise WireError("a malformed exception")
    name, text = raised[0][:60], raised[1][:200]
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, Exception) and name not in ("ExceptionGroup", "BaseExceptionGroup"):
        try:
            return kind(text)
        except Exception:
            pass
    err = ProgramError(text)
    err.type_name = name
    return err


def _ref_of(value):
    if type(value) is not Remote:
        raise TypeError(f"a {type(value).__name__} cannot be passed to the program (plain data and its own objects only)")
    return {"t": "ref", "v": object.__getattribute__(value, "_number"), "type": object.__getattribute__(value, "_type")}


LINK: Link | None = None
"""The link to the program's process (one per process that runs tests)."""


def _typed(value, kinds: tuple, what: str):
    if type(value) not in kinds:
        raise TypeError(f"the program's {what} returned {type(value).__name__}")
    return value


def _name(value) -> str:
    return object.__getattribute__(value, "_type") if type(value) is Remote else type(value).__name__


def _compare(op: str, a, b) -> bool:
    # Only two of the program's own objects are compared by the program; never one with plain data.
    if type(a) is not Remote or type(b) is not Remote:
        raise TypeError(f"the program returned a {_name(a if type(a) is Remote else b)} object, which is not compared with plain data")
    return _typed(LINK.apply(op, a, b), (bool,), f"__{op}__")


class Remote:
    """One of the program's objects, seen from the tests: every use of it is a request to its process."""

    __slots__ = ("_number", "_type")

    def __init__(self, number: int, type_name: str):
        object.__setattr__(self, "_number", number)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # the protocols this side looks up stay on this side
        return LINK.request("getattr", obj=LINK.out(self), name=name)

    def __setattr__(self, name, value):
        LINK.request("setattr", obj=LINK.out(self), name=name, value=LINK.out(value))

    def __call__(self, *args, **kwargs):
        return LINK.request(
            "call", f=LINK.out(self), args=[LINK.out(a) for a in args], kwargs=[[str(k), LINK.out(v)] for k, v in kwargs.items()]
        )

    def __eq__(self, other):
        return _compare("eq", self, other)

    def __ne__(self, other):
        return not _compare("eq", self, other)

    def __lt__(self, other):
        return _compare("lt", self, other)

    def __le__(self, other):
        return _compare("le", self, other)

    def __gt__(self, other):
        return _compare("gt", self, other)

    def __ge__(self, other):
        return _compare("ge", self, other)

    def __bool__(self):
        raise TypeError(f"the program returned a {_name(self)} object, whose truth is not asked (compare plain data)")

    def __hash__(self):
        return _typed(LINK.apply("hash", self), (int,), "__hash__")

    def __len__(self):
        return _typed(LINK.apply("len", self), (int,), "__len__")

    def __iter__(self):  # also what ``in`` uses: membership is decided here, item by item
        return iter(_typed(LINK.apply("iter", self), (list,), "__iter__"))

    def __str__(self):
        return _typed(LINK.apply("str", self), (str,), "__str__")

    def __repr__(self):
        return _typed(LINK.apply("repr", self), (str,), "__repr__")

    def __int__(self):
        return _typed(LINK.apply("int", self), (int,), "__int__")

    def __float__(self):
        return _typed(LINK.apply("float", self), (float,), "__float__")

    def __index__(self):
        return _typed(LINK.apply("index", self), (int,), "__index__")

    def __getitem__(self, key):
        return LINK.apply("getitem", self, key)

    def __setitem__(self, key, value):
        LINK.apply("setitem", self, key, value)

    def __delitem__(self, key):
        LINK.apply("delitem", self, key)


def _binary(name: str):
    def forward(self, other):
        return LINK.apply(name, self, other, keep=True)

    def reflected(self, other):
        return LINK.apply(name, other, self, keep=True)

    return forward, reflected


for _name_ in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift"):
    _forward, _reflected = _binary(_name_)
    setattr(Remote, f"__{_name_}__", _forward)
    setattr(Remote, f"__r{_name_}__", _reflected)
for _name_ in ("neg", "pos", "abs", "invert"):
    setattr(Remote, f"__{_name_}__", lambda self, _n=_name_: LINK.apply(_n, self, keep=True))


def free_names(tree: ast.AST) -> list[str]:
    """Names a test reads and never binds itself (the program's, the context's or builtins)."""
    bound, read = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read.append(node.id) if isinstance(node.ctx, ast.Load) else bound.add(node.id))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return sorted({n for n in read if n not in bound})


def run_tests(spec: dict, entry) -> list[list[str]]:
    """Every test of ``spec`` here, against the program through ``entry`` (and the names the tests use)."""
    setup = compile(spec["setup"], "<setup>", "exec")
    tests = [(compile(t, f"<test {k}>", "exec"), free_names(ast.parse(t))) for k, t in enumerate(spec["tests"])]
    context: dict | None = None
    results = []
    for code, names in tests:
        namespace = {"__builtins__": builtins, "__name__": "__marft_test__"}
        try:
            exec(setup, namespace)
            for name in names:
                if name in namespace or hasattr(builtins, name):
                    continue
                if name in (spec["entry_point"], "candidate"):
                    namespace[name] = entry
                    continue
                if context is None:
                    context = _context(spec.get("context", ""), spec["entry_point"])
                namespace[name] = context[name] if name in context else LINK.request("get", name=name)
            exec(code, namespace)
            results.append(["pass", ""])
        except AssertionError as err:
            results.append(["fail", describe(err)])
        except Exception as err:  # ProgramGone and WireError are not Exceptions: they end the run
            results.append(["error", describe(err)])
    return results


def _context(source: str, entry_point: str) -> dict:
    # The task's own program (trusted): helpers a test uses (HumanEval's ``poly``) come from it, not
    # from the patch, which could redefine them.
    namespace = {"__builtins__": builtins, "__name__": "__marft_context__"}
    try:
        exec(compile(source, "<context>", "exec"), namespace)
    except Exception:
        return {}
    namespace.pop(entry_point, None)
    return namespace
