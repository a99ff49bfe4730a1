"""Scripted (non-LLM) policies for the code-repair envs: for tests, demos and benchmarks.

:func:`oracle_policy` **peeks at the task's solution**: the locator names the bug's lines, the tester
writes the tests the bug fails, the fixer answers with the correct definition (or, with
``patch_format="diff"``, the unified diff to it) and the reviewer accepts exactly the patches that
turn the program into the solution. With probability ``slip`` a fixer answers with the buggy
definition unchanged instead — a stand-in for an imperfect model, not a solver.
"""

from __future__ import annotations

import ast

import numpy as np

from marft_envs.tasks.code.base import CodeRepairTask, role_of
from marft_envs.tasks.code.patches import PatchError, apply_patch, definition_source, extract_patch, make_diff

PATCH_FORMATS = ("function", "diff", "mixed")


def oracle_patch(task, patch_format: str = "function") -> str:
    """The fix for ``task`` as a fixer would write it: the corrected definition, or a diff."""
    if patch_format == "diff":
        return f"```diff\n{make_diff(task.buggy, task.solution)}```"
    return f"```python\n{definition_source(task.solution, task.entry_point)}```"


def oracle_policy(env: CodeRepairTask, slip: float = 0.0, patch_format: str = "function"):
    """A policy ``(agent, observation, rng) -> str`` that knows each task's solution (see module docstring)."""
    if patch_format not in PATCH_FORMATS:
        raise ValueError(f"unknown patch_format {patch_format!r}: use one of {list(PATCH_FORMATS)}")

    def policy(agent: str, observation: dict, rng: np.random.Generator | None = None) -> str:
        rng = rng if rng is not None else np.random.default_rng(0)
        task, role = env.problem, role_of(agent)
        if role == "locator":
            return "Lines: " + ", ".join(str(n) for n in task.bug_lines)
        if role == "tester":
            failing = task.fail_to_pass or range(len(task.tests))
            return "```python\n" + "\n".join(task.tests[i] for i in failing if task.tests[i].startswith("assert")) + "\n```"
        if role == "reviewer":
            return "ACCEPT" if _fixes(task, observation["text"]) else "REJECT"
        if rng.random() < slip:
            return f"```python\n{definition_source(task.buggy, task.entry_point)}```"
        fmt = patch_format if patch_format != "mixed" else ("diff" if rng.random() < 0.5 else "function")
        return oracle_patch(task, fmt)

    return policy


def _fixes(task, observation_text: str) -> bool:
    # The reviewer's parents' answers follow the task text as "fixer_0: ..." lines; judge the last patch.
    marker = observation_text.rfind("\nfixer_")
    if marker < 0:
        return False
    answer = observation_text[marker + 1 :].split(": ", 1)[1]
    try:
        program = apply_patch(task.buggy, extract_patch(answer), task.entry_point)
        return ast.dump(ast.parse(program)) == ast.dump(ast.parse(task.solution))
    except (PatchError, SyntaxError):
        return False
