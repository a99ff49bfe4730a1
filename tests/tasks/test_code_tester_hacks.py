"""A tester is paid for behaviour, never for reading the program's text (issue 38, item 2).

A tester's asserts ran beside ``candidate.py``, so ``assert open('candidate.py').read().strip() !=
BUGGY`` (the buggy source copied from its own observation) passed on the fix and failed on the bug:
tester reward 1.00 on 10 of 10 test-split tasks; ``inspect.getsource`` worked too. Now each assert
runs in a process that never held the program's text and reaches the program only through the
judge's guarded proxy. Each row below reads the program some other way than by its behaviour; it
must earn no more than a tester that asserts nothing useful, while the oracle's behavioural asserts
still earn full credit.
"""

import re
import subprocess
import sys

import pytest
from code_helpers import own_programs_may_run_on_a_weak_tier  # noqa: F401  (autouse fixture)

import marft_envs
from marft_envs.sandbox import detect_isolation


def _bug_line(task) -> str:
    """A line of the buggy program that the fix does not have, without quotes or backslashes."""
    fixed = set(task.solution.splitlines())
    return next((line.strip() for line in task.buggy.splitlines() if line not in fixed and re.fullmatch(r"[^'\"\\]{6,}", line.strip())), "")


def _reads(task) -> dict[str, str]:
    """Asserts (one statement each, as a tester must answer) that pass on the fix and fail on the bug by reading the text."""
    buggy, entry = task.buggy.strip(), task.entry_point
    hidden = _bug_line(task)[::-1]  # reversed, so that this assert's own text does not hold the line it looks for
    return {
        "the file read": f"assert open('candidate.py').read().strip() != {buggy!r}",
        "inspect.getsource": f"assert __import__('inspect').getsource({entry}).strip() not in {buggy!r}",
        "linecache and __file__": (
            f"assert ''.join(__import__('linecache').getlines(__import__('sys').modules[{entry}.__module__].__file__)).strip() != {buggy!r}"
        ),
        "the bytecode compared": (
            f"assert {entry}.__code__.co_code != [c for c in compile({buggy!r}, 'b', 'exec').co_consts "
            f"if getattr(c, 'co_name', '') == {entry!r}][0].co_code"
        ),
        "the program found through gc": (
            f"assert [o for o in __import__('gc').get_objects() if getattr(o, '__name__', '') == {entry!r} "
            f"and hasattr(o, '__code__')][0].__code__.co_code != [c for c in compile({buggy!r}, 'b', 'exec').co_consts "
            f"if getattr(c, 'co_name', '') == {entry!r}][0].co_code"
        ),
        "its own memory scanned for the bug's line": (
            "assert not any(__import__('re').search('(?:)'.join(__import__('re').escape(c) for c in reversed("
            f"{hidden!r})).encode(), (__import__('ctypes').c_char * (hi - lo)).from_address(lo)) for lo, hi in "
            "[tuple(int(x, 16) for x in m.split()[0].split('-')) for m in open('/proc/self/maps') "
            "if m.split()[1].startswith('r') and 'vvar' not in m and 'vsyscall' not in m] if hi - lo < (256 << 20))"
        ),
    }


def _tester_reward(env, task, answer: str) -> float:
    env.reset(seed=0, options={"problem": task})
    env.step({"tester_0": answer})
    return env.step({"fixer_0": f"```python\n{task.buggy}```"}).rewards["tester_0"]


def _oracle(task) -> str:
    return "```python\n" + "\n".join(task.tests[i] for i in task.fail_to_pass if task.tests[i].startswith("assert")) + "\n```"


BESIDE = """
import sys
sys.path.insert(0, ".")
import candidate
try:
    exec(sys.argv[1], {ENTRY: getattr(candidate, ENTRY)})
except AssertionError:
    sys.exit(1)
"""


def test_the_text_readers_do_read_the_text_outside_the_judge(tmp_path):
    """Run beside the program in a process of its own, as before, each row tells the fix from the bug: a real attack."""
    env = marft_envs.make("marft/CodeRepair-v0", roles=["tester", "fixer"], split="test")
    task = next(t for t in env.problems.heldout(5, seed=0) if not t.entry_point[:1].isupper() and _bug_line(t))
    passed = {}
    for name, program in (("fix", task.solution), ("bug", task.buggy)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "candidate.py").write_text(program)
        for row, assertion in _reads(task).items():
            if row == "its own memory scanned for the bug's line":
                continue  # the old judge's run held the program in its input's copy; a bare import frees its text
            script = BESIDE.replace("ENTRY", repr(task.entry_point))
            run = subprocess.run([sys.executable, "-B", "-c", script, assertion], cwd=tmp_path / name, capture_output=True, timeout=60)
            assert run.returncode in (0, 1), run.stderr.decode()[-500:]
            passed[row, name] = run.returncode == 0
    assert all(passed[row, "fix"] and not passed[row, "bug"] for row, _ in passed), sorted(passed.items())


def test_a_tester_that_reads_the_program_earns_no_more_than_one_that_asserts_nothing():
    if not detect_isolation().contained:
        pytest.skip("hostile asserts are run only in a contained sandbox (weak tiers refuse model output)")
    env = marft_envs.make("marft/CodeRepair-v0", roles=["tester", "fixer"], credit="per_agent", split="test")
    tasks = env.problems.heldout(5, seed=0)
    paid = {}
    for task in tasks:
        nothing = _tester_reward(env, task, "```python\nassert True\n```")
        assert _tester_reward(env, task, _oracle(task)) == 1.0, task.task_id  # behaviour still earns full credit
        for row, assertion in _reads(task).items():
            reward = _tester_reward(env, task, f"```python\n{assertion}\n```")
            if reward > nothing:
                paid[row, task.task_id] = reward
    assert not paid, f"these testers were paid for reading the program: {paid}"
