"""Run a program's unit tests in the sandbox: one run per (program, tests), results cached.

Inside the sandbox a small trusted harness (``HARNESS``) loads the program as module ``candidate``
and runs each test snippet in its own copy of the module's namespace (``candidate`` is bound to the
entry point, as HumanEval's checks expect). A test passes when it runs without raising. The harness
closes the cheap ways for a program to fake a pass:

* the tests and a per-run nonce are read from a file that is deleted before the program is loaded,
  and the report goes to a duplicate of stdout prefixed with the nonce, while the program's own
  prints go to stderr — printing "all passed" or exiting early (``sys.exit(0)``, ``os._exit``)
  yields no report, which counts as a crash;
* ``assert x == y`` is checked with a strict equality when either side is plain data (numbers,
  strings, lists, dicts, ...): an object that claims to equal everything does not pass.

What the program can read: in the sandbox's contained tiers, nothing on disk but the standard
library and its working directory (no task file, so no solution: the harness is never sent one
for a fix). The tests, the setup and the nonce are in the harness's own memory in the same
interpreter, so a program that deliberately inspects the harness's objects (its frames, ``gc``) can
read its own run's tests and forge the report; the sandbox guarantees containment, not honesty
(see ``docs/envs/code.md``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from marft_envs.sandbox import Limits, SandboxPool, shared_pool

STATUSES = ("ok", "syntax_error", "import_error", "missing_entry_point", "timeout", "crash")
"""``TestReport.status``: ``ok`` means the tests ran (some may have failed); the others score 0."""

HARNESS = r'''
import json, os, sys, types

def _main():
    with open(".marft_tests.json") as f:
        spec = json.load(f)
    os.unlink(".marft_tests.json")  # the program never sees the tests or the nonce
    nonce, write, exit_, dumps = spec.pop("nonce"), os.write, os._exit, json.dumps
    out = os.dup(1)
    os.dup2(2, 1)  # the program's prints go to stderr; stdout carries the report only

    def describe(err):
        text = str(err)
        return (f"{type(err).__name__}: {text}" if text else type(err).__name__)[:200]

    def report(**fields):
        write(out, (nonce + dumps(fields) + "\n").encode())
        exit_(0)

    plain = (int, float, complex, str, bytes, bool, type(None))

    def is_plain(x, depth=0):
        t = type(x)
        if t in plain:
            return True
        if depth > 50:
            return False
        if t in (list, tuple, set, frozenset):
            return all(is_plain(v, depth + 1) for v in x)
        if t is dict:
            return all(is_plain(k, depth + 1) and is_plain(v, depth + 1) for k, v in x.items())
        return False

    def strict_eq(a, b):
        if is_plain(a) != is_plain(b):
            return False  # e.g. an object whose __eq__ always says True
        return a == b

    tests = [compile(t, f"<test {k}>", "exec") for k, t in enumerate(spec["tests"])]
    setup = compile(spec["setup"], "<setup>", "exec")
    try:
        with open("candidate.py") as f:
            code = compile(f.read(), "candidate.py", "exec")
    except SyntaxError as err:
        report(status="syntax_error", reason=f"line {err.lineno}: {err.msg}")
    module = types.ModuleType("candidate")
    module.__file__ = "candidate.py"
    sys.modules["candidate"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as err:
        report(status="import_error", reason=describe(err))
    entry = module.__dict__.get(spec["entry_point"])
    if entry is None:
        report(status="missing_entry_point", reason=f"the program defines no {spec['entry_point']!r}")
    results = []
    for test in tests:
        namespace = dict(module.__dict__, candidate=entry, __marft_eq__=strict_eq)
        try:
            exec(setup, namespace)
            exec(test, namespace)
            results.append(["pass", ""])
        except AssertionError as err:
            results.append(["fail", describe(err)])
        except BaseException as err:
            results.append(["error", describe(err)])
    report(status="ok", results=results)

_main()
'''


@dataclass(frozen=True)
class TestReport:
    """What running a program's tests found."""

    __test__ = False  # not a pytest test class, despite the name

    status: str
    """One of ``STATUSES``."""
    passed: tuple[bool, ...] = ()
    """Per test: did it pass (empty unless ``status == "ok"``)."""
    messages: tuple[str, ...] = ()
    """Per test: why it failed ("" when it passed)."""
    reason: str = ""
    """For a status other than ``ok``: what went wrong, in one line."""
    duration_s: float = 0.0
    """Seconds the sandboxed run took."""

    @property
    def fraction_passed(self) -> float:
        return sum(self.passed) / len(self.passed) if self.passed else 0.0

    @property
    def all_passed(self) -> bool:
        return self.status == "ok" and bool(self.passed) and all(self.passed)


class _StrictEquality(ast.NodeTransformer):
    """``assert a == b`` -> ``assert __marft_eq__(a, b)`` (top-level comparisons of asserts only)."""

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            node.test = ast.Call(func=ast.Name("__marft_eq__", ast.Load()), args=[test.left, test.comparators[0]],
                                 keywords=[])
            ast.fix_missing_locations(node)
        return node


def harden_test(test: str) -> str:
    """A test with its ``assert a == b`` statements using the harness's strict equality."""
    tree = _StrictEquality().visit(ast.parse(test))
    return ast.unparse(tree)


def harness_files(program: str, tests, entry_point: str, setup: str = "") -> tuple[dict[str, str], str]:
    """The files a ``HARNESS`` run needs, and the nonce that marks its report."""
    nonce = secrets.token_hex(16)
    spec = {"tests": [harden_test(t) for t in tests], "setup": setup, "entry_point": entry_point, "nonce": nonce}
    return {"candidate.py": program, ".marft_tests.json": json.dumps(spec)}, nonce


class TestRunner:
    """Runs tests in the sandbox and caches reports by (program, tests, setup, entry point, limits)."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, limits: Limits | None = None, pool: SandboxPool | None = None, cache_size: int = 8192):
        self.limits = limits or Limits(timeout_s=5.0, memory_mb=512)
        self.pool = pool
        self.cache_size = cache_size
        self._cache: OrderedDict[str, TestReport] = OrderedDict()
        self._lock = threading.Lock()
        self.runs = 0
        """Sandbox runs made (cache misses)."""

    def with_limits(self, limits: Limits) -> TestRunner:
        """A runner with other limits, on the same pool (its own cache: limits change outcomes)."""
        if limits == self.limits:
            return self
        if self.pool is None:
            return runner_for(limits)
        return TestRunner(limits, pool=self.pool, cache_size=self.cache_size)

    def run(self, program: str, tests: tuple[str, ...] | list[str], entry_point: str, setup: str = "") -> TestReport:
        """Run ``tests`` against ``program``; a syntax error is caught here, without a sandbox run."""
        tests = tuple(tests)
        key = hashlib.sha256(json.dumps([program, tests, setup, entry_point, repr(self.limits)]).encode()).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        report = self._run(program, tests, entry_point, setup)
        with self._lock:
            self._cache[key] = report
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return report

    def _run(self, program: str, tests: tuple[str, ...], entry_point: str, setup: str) -> TestReport:
        try:
            ast.parse(program)
        except SyntaxError as err:
            return TestReport(status="syntax_error", reason=f"line {err.lineno}: {err.msg}")
        files, nonce = harness_files(program, tests, entry_point, setup)
        pool = self.pool or shared_pool()
        result = pool.run(HARNESS, files=files, limits=self.limits)
        self.runs += 1
        if result.timed_out:
            return TestReport(status="timeout", reason=f"the tests did not finish within {self.limits.timeout_s:g} s",
                              duration_s=result.duration_s)
        line = next((ln for ln in result.stdout.splitlines() if ln.startswith(nonce)), None)
        if line is None:
            why = result.killed_by or f"exit status {result.returncode}"
            tail = result.stderr.strip().splitlines()[-1:] or [""]
            return TestReport(status="crash", reason=f"the program ended the test run ({why}) {tail[0][:200]}".strip(),
                              duration_s=result.duration_s)
        data = json.loads(line[len(nonce):])
        if data["status"] != "ok":
            return TestReport(status=data["status"], reason=data["reason"], duration_s=result.duration_s)
        return TestReport(
            status="ok",
            passed=tuple(r[0] == "pass" for r in data["results"]),
            messages=tuple(r[1] for r in data["results"]),
            duration_s=result.duration_s,
        )


_runners: dict[Limits, TestRunner] = {}
_runners_lock = threading.Lock()


def runner_for(limits: Limits) -> TestRunner:
    """The process-wide runner (and cache) for ``limits``; envs share it, so copies of an env do too."""
    with _runners_lock:
        if limits not in _runners:
            _runners[limits] = TestRunner(limits)
        return _runners[limits]
