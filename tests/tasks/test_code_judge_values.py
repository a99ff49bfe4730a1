"""The judge decides every comparison and truth test against plain data itself (issue 38, item 1).

A patch whose function returns an object that says yes to ``<``, ``>``, ``!=`` and ``bool()`` and
answers every operator with itself scored 1.00 on HumanEval/4 (``abs(f(x) - y) < 1e-6`` tests)
and 0.67 on HumanEval/2: the judge forwarded those questions to the program's object. Now one of
the program's objects is never compared with plain data or asked whether it is true, and an
operator applied to it gives another of its objects, never plain data; such a patch scores no more
than ``return None``, and honest fixes still score 1.
"""

import json

import pytest
from code_helpers import own_programs_may_run_on_a_weak_tier  # noqa: F401  (autouse fixture)

import marft_envs
from marft_envs.sandbox import Limits
from marft_envs.tasks.code.harness import TestRunner

SAYS_YES = '''
class _Yes:
    """Yes to every comparison, truth test and membership; every operator gives itself back."""
    def __eq__(self, other):
        return True
    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __eq__
    def __bool__(self):
        return True
    def __len__(self):
        return 1
    def __hash__(self):
        return 0
    def _itself(self, *args):
        return self
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _itself
    __floordiv__ = __rfloordiv__ = __mod__ = __pow__ = __abs__ = __neg__ = __pos__ = __round__ = _itself
def ENTRY(*args, **kwargs):
    return _Yes()
'''
ANSWERS_ZERO = '''
class _Zero:
    """Every operator answers with plain 0.0, so that |f(x) - y| looks small."""
    def _zero(self, *args):
        return 0.0
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __abs__ = __neg__ = _zero
    def __float__(self):
        return 0.0
def ENTRY(*args, **kwargs):
    return _Zero()
'''
RETURN_NONE = "def ENTRY(*args, **kwargs):\n    return None\n"
HOSTILE = {"says yes": SAYS_YES, "operators answer 0.0": ANSWERS_ZERO}

USER_TASK = {
    "task_id": "user/ratio",
    "entry_point": "ratio",
    "buggy": "def ratio(a, b):\n    return a * b\n",
    "solution": "def ratio(a, b):\n    return a / b\n",
    "tests": [
        "assert abs(ratio(1, 3) - 0.3333333) < 1e-6",
        "assert ratio(1, 2) != 2",
        "assert ratio(3, 4) < 1",
        "assert ratio(6, 2) >= 3 and ratio(6, 2) <= 3",
        "assert bool(ratio(1, 1))",
        "assert ratio(2, 1)",
        "assert not ratio(0, 5)",
        "assert ratio(1, 4) in (0.25, 0.5)",
    ],
}


def _patch(template: str, entry: str) -> str:
    return "```python\n" + template.replace("ENTRY", entry) + "```"


def _env_and_task(where: str, tmp_path):
    if where == "user":
        path = tmp_path / "user.jsonl"
        path.write_text(json.dumps(USER_TASK) + "\n")
        env = marft_envs.make("marft/CodeRepairSolo-v0", tasks=str(path), split="all", timeout_s=5.0)
        return env, env.problems.tasks[0]
    env = marft_envs.make("marft/CodeRepairSolo-v0", tasks="humaneval", split="all", timeout_s=5.0)
    index = next(k for k, p in enumerate(env.problems.programs) if p.name == where)
    return env, env.problems.tasks_of(index)[0]


def _reward(env, task, answer: str) -> float:
    env.reset(seed=0, options={"problem": task})
    return env.step({"fixer_0": answer}).rewards["fixer_0"]


@pytest.mark.parametrize("where", ["HumanEval/4", "HumanEval/2", "user"])
def test_an_object_that_answers_for_the_judge_scores_no_more_than_return_none(where, tmp_path):
    env, task = _env_and_task(where, tmp_path)
    assert _reward(env, task, f"```python\n{task.solution}```") == 1.0  # the honest fix: the table can fail
    none = _reward(env, task, _patch(RETURN_NONE, task.entry_point))
    for name, template in HOSTILE.items():
        assert _reward(env, task, _patch(template, task.entry_point)) <= none, (where, name)


@pytest.fixture(scope="module")
def runner():
    return TestRunner(Limits(timeout_s=5.0, memory_mb=256))


def test_every_question_about_plain_data_fails_for_the_programs_object(runner):
    tests = USER_TASK["tests"]
    honest = runner.run(USER_TASK["solution"], tests, "ratio")
    assert honest.passed == (True,) * len(tests)
    hostile = runner.run(SAYS_YES.replace("ENTRY", "ratio"), tests, "ratio")
    assert hostile.status == "ok" and not any(hostile.passed), hostile
    assert "not compared with plain data" in hostile.messages[1] and "truth is not asked" in hostile.messages[4]


def test_an_operator_on_the_programs_object_gives_its_object_not_plain_data(runner):
    report = runner.run(ANSWERS_ZERO.replace("ENTRY", "ratio"), USER_TASK["tests"][:4], "ratio")
    assert report.status == "ok" and not any(report.passed), report  # |f(x) - y| stays the program's object
    assert all("not compared with plain data" in m for m in report.messages), report.messages


VECTOR = """
class V:
    def __init__(self, x):
        self.x = x
    def __add__(self, other):
        return V(self.x + (other.x if isinstance(other, V) else other))
    def __mul__(self, k):
        return V(self.x * k)
    def __eq__(self, other):
        return isinstance(other, V) and self.x == other.x
    def __lt__(self, other):
        return self.x < other.x
    def __len__(self):
        return self.x
    def __iter__(self):
        return iter(range(self.x))
"""


@pytest.mark.parametrize(
    "test, passes",
    [
        ("assert V(1) + V(2) == V(3)", True),  # two of the program's objects: compared by the program
        ("assert V(2) * 3 == V(6)", True),  # an operator's result stays the program's object
        ("assert V(1) != V(2) and not V(1) != V(1)", True),  # != is the negation of the program's ==
        ("assert sorted([V(3), V(1)]) == [V(1), V(3)]", True),
        ("assert V(1).x == 1 and len(V(4)) == 4 and 2 in V(3)", True),  # plain data, and membership decided here
        ("assert (V(1) + 2).x == 3", True),
        ("assert V(3) == 3", False),  # never equal to plain data ...
        ("assert V(3) != 4", False),  # ... nor unequal
        ("assert V(1) < 2", False),
        ("assert V(1)", False),  # no truth test
        ("assert (V(1) + 2) == V(3) and V(1) + 2 == 3", False),
    ],
)
def test_the_programs_own_objects_are_compared_by_the_program_and_never_with_plain_data(runner, test, passes):
    report = runner.run(VECTOR, (test,), "V")
    assert report.status == "ok" and report.passed == (passes,), report
