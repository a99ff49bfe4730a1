"""The code-repair judge: a program's tests run in a process that never loads the program.

This file is the ``main.py`` of one sandbox run (``marft_envs.sandbox``), standard library only;
:class:`marft_envs.tasks.code.harness.TestRunner` sends it with the patched program as
``candidate.py`` and the tests as the run's *sealed input* (its stdin: see ``run_python``). The
run holds two processes with two roles::

    judge (J)       forks P first, only then reads the tests from stdin, so nothing P can read
                    ever held them; runs each test; writes the one report on stdout
      └─ program (P)  stdout closed, stdin closed: loads candidate.py, then answers J's requests
                      (call this, get that attribute, apply this operator) with plain data

The verdict is decided only where the program cannot reach:

* **Plain data crosses, never objects.** P answers with JSON that J decodes itself into ``None``,
  ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``, ``set``,
  ``frozenset`` and ``dict`` (exact types: an ``int`` subclass is not an ``int``); anything else
  stays in P and J gets a numbered handle (:class:`Remote`). J's tests compare values with J's own
  builtins; a handle never equals plain data (an object that claims to equal everything gains
  nothing), and two handles compare as P's ``==`` says (a test of the program's own objects trusts
  their ``__eq__``: that is what such a test asks).
* **P cannot touch J.** J drops its working directory from ``sys.path`` (P can write there), sets
  itself non-dumpable (no ``/proc/J/mem``, ``/proc/J/fd``), and the sandbox's syscall filter refuses
  ``ptrace``, ``process_vm_readv`` and ``pidfd_getfd``. P may kill or stop J: then no report comes,
  which scores as a crash or a timeout (0).
* **One result per test.** J answers every request with the matching reply number; the host
  accepts exactly one report line, with the run's nonce and exactly one result per test.

Trusted inputs (the tests, their ``setup``, and ``context``: the task's own program, which defines
helpers some tests use, as HumanEval's ``poly``) run in J. With ``untrusted="tests"`` the roles
flip (a tester's asserts run against a task's own program): every test then runs alone in a
process forked for it, that can report only its own result.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import json
import os
import sys

if __package__:  # imported on the host (tests)
    from marft_envs.tasks.code.judge_program import serve
    from marft_envs.tasks.code.judge_wire import ProgramError, ProgramGone, WireError, decode, describe, encode, receive, send
else:  # the run's main.py: its siblings are files in the working directory, imported before P exists
    from judge_program import serve
    from judge_wire import ProgramError, ProgramGone, WireError, decode, describe, encode, receive, send

PR_SET_DUMPABLE = 4

# -- the judge's side (J) --------------------------------------------------------------------------


class Link:
    """J's end of the pipes to P: numbered requests, one matching reply each."""

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
            raise _Refused(str(status), str(reason)[:200])
        if "value" not in reply:
            raise WireError("a reply without a value")
        return decode(reply["value"], Remote)

    def out(self, value):
        """A value J sends: plain data, or one of P's own objects."""
        return encode(value, lambda r: _ref_of(r))

    def apply(self, name: str, *args):
        return self.request("apply", name=name, args=[self.out(a) for a in args])


class _Refused(Exception):
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
    return {"t": "ref", "v": object.__getattribute__(value, "_number")}


LINK: Link | None = None
"""The judge's link to P (one per run)."""


def _typed(value, kinds: tuple, what: str):
    if type(value) not in kinds:
        raise TypeError(f"the program's {what} returned {type(value).__name__}")
    return value


class Remote:
    """One of the program's objects, seen from the judge: every use of it is a request to P."""

    __slots__ = ("_number", "_type")

    def __init__(self, number: int, type_name: str):
        object.__setattr__(self, "_number", number)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # the protocols J itself looks up stay on this side
        return LINK.request("getattr", obj=LINK.out(self), name=name)

    def __setattr__(self, name, value):
        LINK.request("setattr", obj=LINK.out(self), name=name, value=LINK.out(value))

    def __call__(self, *args, **kwargs):
        return LINK.request(
            "call", f=LINK.out(self), args=[LINK.out(a) for a in args], kwargs=[[str(k), LINK.out(v)] for k, v in kwargs.items()]
        )

    def __eq__(self, other):  # an object of the program never equals plain data
        return type(other) is Remote and LINK.apply("eq", self, other)

    def __ne__(self, other):
        return type(other) is not Remote or LINK.apply("ne", self, other)

    def __hash__(self):
        return _typed(LINK.apply("hash", self), (int,), "__hash__")

    def __bool__(self):
        return _typed(LINK.apply("bool", self), (bool,), "__bool__")

    def __len__(self):
        return _typed(LINK.apply("len", self), (int,), "__len__")

    def __iter__(self):
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

    def __contains__(self, item):
        return bool(LINK.apply("contains", self, item))

    def __getitem__(self, key):
        return LINK.apply("getitem", self, key)

    def __setitem__(self, key, value):
        LINK.apply("setitem", self, key, value)

    def __delitem__(self, key):
        LINK.apply("delitem", self, key)


def _binary(name: str):
    def forward(self, other):
        return LINK.apply(name, self, other)

    def reflected(self, other):
        return LINK.apply(name, other, self)

    return forward, reflected


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift"):
    _forward, _reflected = _binary(_name)
    setattr(Remote, f"__{_name}__", _forward)
    setattr(Remote, f"__r{_name}__", _reflected)
for _name in ("lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _binary(_name)[0])
for _name in ("neg", "pos", "abs", "invert"):
    setattr(Remote, f"__{_name}__", lambda self, _n=_name: LINK.apply(_n, self))


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
    """Every test in J, against P through ``entry`` (and the names the tests use); one result each."""
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


def _start_program(keep_stdin: bool = False) -> tuple[int, int, int]:
    """Fork P: ``(pid, request fd, reply fd)`` on J's side; P keeps none of J's channels."""
    p_reads, j_writes = os.pipe()
    j_reads, p_writes = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(2, 1)  # P's prints go to stderr: stdout is the report's channel, J's alone
            if not keep_stdin:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # never the sealed input
            _close_all_but({0, 1, 2, p_reads, p_writes})
            serve(p_reads, p_writes)
        except BaseException:
            import traceback

            traceback.print_exc()  # to stderr: a bug here must be visible, not a silent crash
        finally:
            os._exit(70)
    os.close(p_reads)
    os.close(p_writes)
    return pid, j_writes, j_reads


def _close_all_but(keep: set[int]) -> None:
    import resource

    for fd in range(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0]):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _ended(pid: int) -> str:
    import signal

    os.kill(pid, signal.SIGKILL)  # P may already be gone; this is then a no-op
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGKILL:
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else "killed"


def _read_spec() -> dict:
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    return json.loads(b"".join(chunks))


def _untrusted_tests(spec: dict) -> dict:
    # Each test in a process of its own, against the task's own program: it can report its own result only.
    global LINK
    results = []
    for test in spec["tests"]:
        pid, requests, replies = _start_program()
        LINK = Link(requests, replies)
        try:
            LINK.request("load", entry_point=spec["entry_point"])
            result = LINK.request("run", test=test, setup=spec["setup"], entry_point=spec["entry_point"])
            ok = type(result) is list and len(result) == 2 and result[0] in ("pass", "fail", "error")
            results.append([result[0], str(result[1])[:200]] if ok else ["error", "a malformed result"])
        except _Refused as err:
            return {"status": err.status, "reason": err.reason}
        except (ProgramGone, WireError) as err:
            results.append(["error", f"the test ended its process: {err}"[:200]])
        except Exception as err:
            results.append(["error", describe(err)])
        finally:
            os.close(requests)
            os.close(replies)
            _ended(pid)
    return {"status": "ok", "results": results}


def _untrusted_program(spec: dict, pid: int, requests: int, replies: int) -> dict:
    global LINK
    LINK = Link(requests, replies)
    try:
        entry = LINK.request("load", entry_point=spec["entry_point"])
        results = run_tests(spec, entry)
    except _Refused as err:
        return {"status": err.status, "reason": err.reason}
    except ProgramGone:
        return {"status": "crash", "reason": f"the program ended the test run ({_ended(pid)})"}
    except WireError as err:
        _ended(pid)
        return {"status": "crash", "reason": f"the program's process broke the judge's protocol ({err})"[:240]}
    _ended(pid)
    return {"status": "ok", "results": results}


def main() -> None:
    here = os.getcwd()
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]  # P can write the workdir
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no /proc/J/mem or /proc/J/fd for P
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    report_fd = os.dup(1)
    os.dup2(2, 1)
    if os.environ.get("MARFT_JUDGE_UNTRUSTED", "program") == "tests":
        spec = _read_spec()
        report = _untrusted_tests(spec)
    else:
        pid, requests, replies = _start_program()  # before the tests are read: P never holds them
        spec = _read_spec()
        report = _untrusted_program(spec, pid, requests, replies)
    line = (spec["nonce"] + json.dumps(report) + "\n").encode()
    view = memoryview(line)
    while view:
        view = view[os.write(report_fd, view) :]
    os._exit(0)


if __name__ == "__main__":
    main()
