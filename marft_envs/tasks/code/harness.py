"""Run a program's unit tests in the sandbox: one run per (program, tests), results cached.

Each run is the judge (``judge.py``, with ``judge_proxy.py``, ``judge_program.py`` and
``judge_wire.py``): the tests run in a process that never loads the program and reaches it only by
plain-data requests to a second process that does, and the tests reach the judge as sealed input,
after that second process was forked, so the program can neither read them nor decide a verdict
(the threat model is in ``docs/envs/code.md``). With ``untrusted="tests"`` the program comes as
sealed input too, and each test runs in a process that never held its text. A test passes when it
runs without raising. Here, on the host, a report counts only when it is the run's one stdout line,
carries the run's nonce, and holds exactly one result per test asked for; anything else is a crash.
"""

from __future__ import annotations

import ast
import hashlib
import json
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from marft_envs.sandbox import Limits, SandboxPool, shared_pool

STATUSES = ("ok", "syntax_error", "import_error", "missing_entry_point", "timeout", "crash")
"""``TestReport.status``: ``ok`` means the tests ran (some may have failed); the others score 0."""
VERDICTS = ("pass", "fail", "error")
UNTRUSTED = ("program", "tests")
"""``TestRunner.run(untrusted=...)``: whose code may be hostile, the program's (a patch) or the tests' (a tester's)."""
JUDGE_FILES = ("judge.py", "judge_wire.py", "judge_proxy.py", "judge_program.py")
"""The judge's sources (``judge.py`` is the run's ``main.py``; the others are imported before the program loads)."""
_HERE = Path(__file__).parent
HARNESS = (_HERE / "judge.py").read_text()
_JUDGE_MODULES = {name: (_HERE / name).read_text() for name in JUDGE_FILES[1:]}


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


def judge_run(program: str, tests, entry_point: str, setup: str = "", context: str = "", untrusted: str = "program") -> tuple[dict, str]:
    """The sandbox run (``run_python`` keyword arguments) that judges ``program``, and its report's nonce."""
    nonce = secrets.token_hex(16)
    spec = {"tests": list(tests), "setup": setup, "context": context, "entry_point": entry_point, "nonce": nonce}
    files = dict(_JUDGE_MODULES)
    if untrusted == "tests":
        spec["program"] = program  # in the sealed input only: the tests' processes never hold its text
    else:
        files["candidate.py"] = program
    run = {"source": HARNESS, "files": files, "env": {"MARFT_JUDGE_UNTRUSTED": untrusted}, "stdin": json.dumps(spec).encode()}
    return run, nonce


def read_report(stdout: str, nonce: str, n_tests: int) -> dict | None:
    """The judge's report from a run's stdout, or ``None`` when it is not exactly one well-formed report."""
    lines = stdout.splitlines()
    if len(lines) != 1 or not lines[0].startswith(nonce):
        return None
    try:
        data = json.loads(lines[0][len(nonce) :])
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("status") not in STATUSES:
        return None
    if data["status"] != "ok":
        return data if isinstance(data.get("reason"), str) else None
    results = data.get("results")
    if not isinstance(results, list) or len(results) != n_tests:
        return None  # one result per test asked for, never more or fewer
    if not all(isinstance(r, list) and len(r) == 2 and r[0] in VERDICTS and isinstance(r[1], str) for r in results):
        return None
    return data


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

    def run(
        self,
        program: str,
        tests: tuple[str, ...] | list[str],
        entry_point: str,
        setup: str = "",
        *,
        context: str = "",
        untrusted: str = "program",
    ) -> TestReport:
        """Run ``tests`` against ``program``; a syntax error is caught here, without a sandbox run.

        ``context`` is trusted source (the task's own program) that defines helpers the tests use
        besides the entry point; ``untrusted="tests"`` runs tests that may be hostile (a tester's
        asserts) against a trusted program, each test in a process of its own.
        """
        if untrusted not in UNTRUSTED:
            raise ValueError(f"untrusted must be one of {UNTRUSTED}, got {untrusted!r}")
        tests = tuple(tests)
        key = hashlib.sha256(json.dumps([program, tests, setup, entry_point, context, untrusted, repr(self.limits)]).encode()).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        report = self._run(program, tests, entry_point, setup, context, untrusted)
        with self._lock:
            self._cache[key] = report
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return report

    def _run(self, program: str, tests: tuple[str, ...], entry_point: str, setup: str, context: str, untrusted: str) -> TestReport:
        try:
            ast.parse(program)
        except SyntaxError as err:
            return TestReport(status="syntax_error", reason=f"line {err.lineno}: {err.msg}")
        run, nonce = judge_run(program, tests, entry_point, setup, context, untrusted)
        pool = self.pool or shared_pool()
        result = pool.run(**run, limits=self.limits)
        self.runs += 1
        if result.timed_out:
            return TestReport(
                status="timeout", reason=f"the tests did not finish within {self.limits.timeout_s:g} s", duration_s=result.duration_s
            )
        data = read_report(result.stdout, nonce, len(tests))
        if data is None:
            why = result.killed_by or f"exit status {result.returncode}"
            tail = result.stderr.strip().splitlines()[-1:] or [""]
            return TestReport(
                status="crash", reason=f"the program ended the test run ({why}) {tail[0][:200]}".strip(), duration_s=result.duration_s
            )
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
