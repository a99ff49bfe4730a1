"""The test harness: per-test results, statuses, the cache, and the cheap ways to fake a pass that it closes."""

import pytest
from code_helpers import own_programs_may_run_on_a_weak_tier  # noqa: F401  (autouse fixture)

import marft_envs
from marft_envs.sandbox import Limits, detect_isolation
from marft_envs.tasks.code.harness import TestRunner

TESTS = ("assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert candidate(2, 2) == 4")
NONZERO = ("assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert candidate(5, 5) == 10")


@pytest.fixture(scope="module")
def runner():
    return TestRunner(Limits(timeout_s=3.0, memory_mb=256))


def test_per_test_results(runner):
    report = runner.run("def add(a, b):\n    return a + b if a > 0 else a - b\n", TESTS, "add")
    assert report.status == "ok" and report.passed == (True, False, True)
    assert report.messages[1].startswith("AssertionError") and report.fraction_passed == pytest.approx(2 / 3)
    assert not report.all_passed


@pytest.mark.parametrize(
    "program, status, reason",
    [
        ("def add(a, b) return a + b\n", "syntax_error", "line 1"),
        ("raise RuntimeError('at import')\ndef add(a, b):\n    return a + b\n", "import_error", "RuntimeError: at import"),
        ("def plus(a, b):\n    return a + b\n", "missing_entry_point", "'add'"),
        ("def add(a, b):\n    while True:\n        pass\n", "timeout", "did not finish"),
        ("import os\ndef add(a, b):\n    os._exit(0)\n", "crash", "exit status 0"),
        ("def add(a, b):\n    return bytearray(1 << 34)\n", "ok", ""),
    ],
)
def test_statuses(runner, program, status, reason):
    limits_runner = runner.with_limits(Limits(timeout_s=1.0, memory_mb=256)) if status == "timeout" else runner
    report = limits_runner.run(program, TESTS, "add")
    assert report.status == status and reason in report.reason, report
    if status == "ok":
        assert report.passed == (False, False, False) and "MemoryError" in report.messages[0]


@pytest.mark.parametrize(
    "name, program",
    [
        ("always-equal object", "class Eq:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Eq()\n"),
        ("exit 0 before the tests", "import sys\nsys.exit(0)\ndef add(a, b):\n    return 0\n"),
        ("exit 0 inside the function", "import os\ndef add(a, b):\n    os._exit(0)\n"),
        (
            "print a fake report",
            'print(\'{"status": "ok", "results": [["pass", ""], ["pass", ""], ["pass", ""]]}\')\ndef add(a, b):\n    return 0\n',
        ),
        (
            "read the tests to answer",
            "import json, os\n"
            "SEEN = os.path.exists('.marft_tests.json')\n"
            "def add(a, b):\n    assert not SEEN, 'the tests were readable'\n    return 0\n",
        ),
    ],
)
def test_cheap_ways_to_fake_a_pass_fail(runner, name, program):
    report = runner.run(program, NONZERO, "add")
    assert not report.all_passed, name
    assert report.status != "ok" or not any(report.passed), (name, report)


def test_strict_equality_is_only_for_plain_data(runner):
    program = (
        "class V:\n    def __init__(self, x):\n        self.x = x\n"
        "    def __eq__(self, other):\n        return isinstance(other, V) and self.x == other.x\n"
        "def add(a, b):\n    return V(a + b)\n"
    )
    report = runner.run(program, ("assert add(1, 2) == V(3)", "assert add(1, 2) == 3"), "add")
    assert report.passed == (True, False)  # two objects compare as they say; an object never equals plain 3


def test_setup_runs_before_each_test_and_tests_are_independent(runner):
    report = runner.run("def add(a, b):\n    return a + b\n", ("X.append(1)\nassert X == [1]", "assert X == []"), "add", setup="X = []")
    assert report.passed == (True, True)


def test_reports_are_cached(runner):
    before = runner.runs
    for _ in range(3):
        runner.run("def add(a, b):\n    return a + b\n", TESTS, "add")
    assert runner.runs - before <= 1
    runner.run("def add(a, b):\n    return b + a\n", TESTS, "add")
    assert runner.runs - before <= 2


# A patch that fixes nothing: it looks for the shipped solution where this project keeps it (its
# checkout, its site-packages, the folders around sys.path and the working directory, an editable
# install's .pth file) and runs it. The sandbox shows a run only the standard library and its working
# directory, so it finds nothing and scores 0 (it scored 0.98 mean reward before that rule).
THIEF = """
def _stolen():
    import glob, json, os, sys
    dirs = []
    for start in [os.getcwd(), *sys.path, os.path.expanduser("~"), "/work", "/home", "/root", "/opt", "/srv"]:
        d = os.path.abspath(start)
        while d not in dirs:
            dirs.append(d)
            d = os.path.dirname(d)
    for d in list(dirs):
        for pth in glob.glob(os.path.join(d, "*.pth")):
            try:
                dirs += [line.strip() for line in open(pth) if line.startswith("/")]
            except OSError:
                pass
    for d in dirs:
        for depth in ("", "*/", "*/*/", "*/*/*/"):
            for path in glob.glob(os.path.join(d, depth + "marft_envs/tasks/code/data/corpus_tasks.jsonl")):
                try:
                    rows = [json.loads(line) for line in open(path)]
                except OSError:
                    continue
                for row in rows:
                    if row.get("buggy") == BUGGY:
                        namespace = {}
                        exec(row["solution"], namespace)
                        return namespace[ENTRY]
    raise RuntimeError("no solution found")


def ENTRY_POINT(*args, **kwargs):
    return _stolen()(*args, **kwargs)
"""


def thief_patch(task) -> str:
    source = f"BUGGY = {task.buggy!r}\nENTRY = {task.entry_point!r}\n" + THIEF.replace("ENTRY_POINT", task.entry_point)
    return f"```python\n{source}```"


def test_a_patch_that_steals_the_shipped_solution_scores_0():
    if not detect_isolation().contained:
        pytest.skip("only a contained sandbox hides the host's files; weak tiers are refused for model output")
    env = marft_envs.make("marft/CodeRepairSolo-v0", split="test")
    tasks = env.problems.heldout(10, seed=0)
    namespace = {}
    exec(thief_patch(tasks[0]).strip("`").removeprefix("python\n"), namespace)
    assert namespace["_stolen"]() is not None  # outside the sandbox the attack does find the solution
    stolen, honest = [], []
    for task in tasks:
        env.reset(seed=0, options={"problem": task})
        stolen.append(env.step({"fixer_0": thief_patch(task)}).rewards["fixer_0"])
        env.reset(seed=0, options={"problem": task})
        honest.append(env.step({"fixer_0": f"```python\n{task.solution}```"}).rewards["fixer_0"])
    assert honest == [1.0] * len(tasks)  # the harness works: the real fix scores 1
    assert stolen == [0.0] * len(tasks), stolen
