"""One repair task: the :class:`CodeTask` record and its JSON form (the lines of ``data/corpus_tasks.jsonl``).

Where tasks come from — the shipped corpus, HumanEval, files, generated bugs — is
:mod:`marft_envs.tasks.code.tasks`; how bugs are generated is :mod:`marft_envs.tasks.code.generate`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


class TaskSpecError(ValueError):
    """A task spec, file or row that cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class CodeTask:
    """One repair task: a buggy program, the tests that catch it, and the fix."""

    task_id: str
    """Stable id, ``<source>/<program>/<k>``."""
    entry_point: str
    """The function or class under repair."""
    buggy: str
    """The program the agents see and patch."""
    tests: tuple[str, ...]
    """Test snippets run against the patched program; each passes when it runs without raising."""
    solution: str | None = None
    """The correct program (the oracle patch); ``None`` for user tasks that give none."""
    setup: str = ""
    """Code run before each test."""
    fail_to_pass: tuple[int, ...] | None = None
    """Tests the buggy program fails (and the solution passes): the fix must make them pass."""
    pass_to_pass: tuple[int, ...] | None = None
    """Tests the buggy program already passes: the fix must not break them."""
    bug_lines: tuple[int, ...] = ()
    """Lines of ``buggy`` (1-based) that are wrong; a missing statement is located at the line after it."""
    bug: str = ""
    """The bug operator and what it changed."""
    source: str = ""
    """``corpus``, ``humaneval`` or a file name."""

    @property
    def program_id(self) -> str:
        """The program the task was made from (its id without the mutant number)."""
        return self.task_id.rsplit("/", 1)[0]

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, row: dict, where: str = "task") -> CodeTask:
        missing = [k for k in ("buggy", "tests", "entry_point") if k not in row]
        if missing:
            raise TaskSpecError(f"{where}: a task needs 'buggy', 'tests' and 'entry_point'; missing {missing}")
        if not isinstance(row["tests"], list) or not all(isinstance(t, str) for t in row["tests"]) or not row["tests"]:
            raise TaskSpecError(f"{where}: 'tests' must be a non-empty list of code strings")
        tup = lambda v: None if v is None else tuple(int(x) for x in v)  # noqa: E731
        return cls(
            task_id=str(row.get("task_id") or where),
            entry_point=row["entry_point"],
            buggy=row["buggy"],
            tests=tuple(row["tests"]),
            solution=row.get("solution"),
            setup=row.get("setup", ""),
            fail_to_pass=tup(row.get("fail_to_pass")),
            pass_to_pass=tup(row.get("pass_to_pass")),
            bug_lines=tup(row.get("bug_lines")) or (),
            bug=row.get("bug", ""),
            source=row.get("source", ""),
        )
