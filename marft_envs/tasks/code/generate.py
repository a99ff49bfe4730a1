"""Make repair tasks from correct programs: seeded mutants, kept only when the tests catch them.

For each program the original must pass every test (else the program is skipped with a warning);
then the seeded mutants (:func:`~marft_envs.tasks.code.mutations.seeded_mutants`) are tried in order
and a mutant is kept when its tests run (no syntax error, no crash at import, no timeout) and at
least one fails. A mutant that hangs is not kept: a task's buggy code must finish, so that grading
it is fast and its failures are informative.

Regenerate the shipped corpus tasks (``marft_envs/tasks/code/data/corpus_tasks.jsonl``)::

    python -m marft_envs.tasks.code.generate [--seed 0] [--per-program 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import warnings
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

from marft_envs.sandbox import Limits
from marft_envs.tasks.code.corpus import Program, load_corpus
from marft_envs.tasks.code.harness import TestRunner
from marft_envs.tasks.code.mutations import seeded_mutants
from marft_envs.tasks.code.task import CodeTask

CORPUS_FILE = "data/corpus_tasks.jsonl"
"""The shipped corpus tasks, relative to the ``marft_envs.tasks.code`` package."""
MAX_TRIES = 16
"""Mutants tried per program before giving up on finding ``per_program`` that the tests catch."""
GENERATION_LIMITS = Limits(timeout_s=30.0, memory_mb=512)
"""Limits of the original program's run."""
SLOWDOWN = 10.0
"""A mutant may take this many times the original's time (at least 2 s): one that loops forever
is discarded without waiting long, and a loaded machine slows both alike."""


def mutate_program(program: Program, runner: TestRunner, *, seed: int = 0, per_program: int = 3, source: str = "corpus") -> list[CodeTask]:
    """Up to ``per_program`` tasks from ``program`` (none if the original fails its own tests)."""
    original = runner.run(program.source, program.tests, program.entry_point, program.setup)
    if not original.all_passed:
        why = original.reason or f"fails tests {[i for i, ok in enumerate(original.passed) if not ok]}"
        warnings.warn(f"{source}/{program.name}: the original program does not pass its tests ({why}); skipped", stacklevel=2)
        return []
    budget = min(GENERATION_LIMITS.timeout_s, max(2.0, round(SLOWDOWN * original.duration_s)))
    mutant_runner = runner.with_limits(dataclasses.replace(runner.limits, timeout_s=budget))
    tasks = []
    for mutant in seeded_mutants(program.source, program.entry_point, seed)[:MAX_TRIES]:
        report = mutant_runner.run(mutant.source, program.tests, program.entry_point, program.setup)
        if report.status != "ok" or report.all_passed:
            continue
        tasks.append(
            CodeTask(
                task_id=f"{source}/{program.name}/{len(tasks)}",
                entry_point=program.entry_point,
                buggy=mutant.source,
                tests=program.tests,
                solution=program.source,
                setup=program.setup,
                fail_to_pass=tuple(i for i, ok in enumerate(report.passed) if not ok),
                pass_to_pass=tuple(i for i, ok in enumerate(report.passed) if ok),
                bug_lines=mutant.lines,
                bug=f"{mutant.operator}: {mutant.description}",
                source=source,
            )
        )
        if len(tasks) == per_program:
            break
    return tasks


def generate_tasks(
    programs: list[Program], runner: TestRunner, *, seed: int = 0, per_program: int = 3, source: str = "corpus", threads: int | None = None
) -> list[CodeTask]:
    """Tasks from every program, in program order (programs are mutated in parallel on the pool)."""
    threads = threads or (runner.pool.size if runner.pool is not None else 2)
    with ThreadPoolExecutor(max_workers=threads) as ex:
        per = ex.map(lambda p: mutate_program(p, runner, seed=seed, per_program=per_program, source=source), programs)
        return [task for tasks in per for task in tasks]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Regenerate the shipped corpus repair tasks.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-program", type=int, default=3)
    parser.add_argument("--out", default=str(resources.files("marft_envs.tasks.code").joinpath(CORPUS_FILE)))
    args = parser.parse_args(argv)

    from marft_envs.sandbox import SandboxPool

    with SandboxPool() as pool:
        runner = TestRunner(GENERATION_LIMITS, pool=pool)
        tasks = generate_tasks(load_corpus(), runner, seed=args.seed, per_program=args.per_program)
    with open(args.out, "w") as f:
        for task in tasks:
            f.write(json.dumps(task.to_json()) + "\n")
    operators = {}
    for t in tasks:
        operators[t.bug.split(":")[0]] = operators.get(t.bug.split(":")[0], 0) + 1
    print(f"{len(tasks)} tasks from {len(load_corpus())} programs -> {args.out}")
    print(json.dumps(operators, sort_keys=True))


if __name__ == "__main__":
    main()
