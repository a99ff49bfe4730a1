"""A fixer's answer as a patch: a whole function (or class), or a unified diff, applied to the buggy program.

:func:`extract_patch` finds the patch in free text: the last fenced code block (a ```diff / ```patch
block, or any block that looks like a diff, is a diff), else the whole text (a diff if it has
``@@`` hunk headers). :func:`apply_patch` turns it into the candidate program:

* **code**: each top-level function or class it defines replaces the buggy program's definition of
  the same name; anything else it contains (imports, new helpers) goes just before the first
  replaced definition. It must define the entry point.
* **diff**: the hunks are applied to the buggy program; each hunk's removed and context lines must
  match the program (at the stated line, or the nearest place they do), else the patch is rejected.

Errors are :class:`PatchError` with a one-line reason that the env puts in the info.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """A patch that cannot be turned into a program (no code, wrong target, a hunk that does not apply)."""


@dataclass(frozen=True)
class Patch:
    """A fixer's patch: ``kind`` is ``"code"`` or ``"diff"``."""

    kind: str
    text: str


def extract_patch(text: str) -> Patch:
    """The patch in a fixer's answer (see the module docstring)."""
    blocks = _FENCE.findall(text)
    if blocks:
        lang, body = blocks[-1]
        is_diff = lang.lower() in ("diff", "patch", "udiff") or bool(re.search(r"^@@ -\d", body, re.M))
        return Patch("diff" if is_diff else "code", body)
    if re.search(r"^@@ -\d", text, re.M):
        return Patch("diff", text)
    return Patch("code", text)


def apply_patch(buggy: str, patch: Patch, entry_point: str) -> str:
    """The candidate program: ``patch`` applied to ``buggy``; raises PatchError or SyntaxError."""
    if patch.kind == "diff":
        return apply_unified_diff(buggy, patch.text)
    return splice_definitions(buggy, patch.text, entry_point)


def splice_definitions(buggy: str, code: str, entry_point: str) -> str:
    """``buggy`` with its top-level definitions replaced by the same-named ones in ``code``."""
    if not code.strip():
        raise PatchError("the answer contains no code")
    new_tree = ast.parse(code)  # a SyntaxError is the caller's "syntax_error"
    named = {n.name: n for n in new_tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    if entry_point not in named:
        raise PatchError(f"the patch does not define {entry_point!r}: give the whole corrected function or a diff")
    old_tree = ast.parse(buggy)
    old_lines = buggy.splitlines(keepends=True)
    new_lines = code.splitlines(keepends=True)
    if new_lines and not new_lines[-1].endswith("\n"):
        new_lines[-1] += "\n"

    def span(node, lines):  # a definition's lines, decorators included
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        return first, node.end_lineno, "".join(lines[first : node.end_lineno])

    replaced = {}
    for node in old_tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in named:
            replaced[node.name] = span(node, old_lines)
    extras = [
        span(n, new_lines)[2]
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        else "".join(new_lines[n.lineno - 1 : n.end_lineno])
        for n in new_tree.body
        if getattr(n, "name", None) not in replaced
    ]
    out, cursor = [], 0
    for name, (first, last, _) in sorted(replaced.items(), key=lambda kv: kv[1][0]):
        out.append("".join(old_lines[cursor:first]))
        if extras:  # new imports and helpers go before the first replaced definition
            out.append("".join(extras))
            extras = []
        out.append(span(named[name], new_lines)[2])
        cursor = last
    out.append("".join(old_lines[cursor:]))
    return "".join(out)


def apply_unified_diff(source: str, diff: str) -> str:
    """Apply a unified diff to ``source``; file headers are optional, hunk headers are required."""
    lines = source.splitlines()
    hunks = _parse_hunks(diff)
    if not hunks:
        raise PatchError("the diff has no hunks (lines starting with @@ -a,b +c,d @@)")
    offset = 0
    for k, (start, old, new) in enumerate(hunks, 1):
        at = _find(lines, old, start - 1 + offset)
        if at is None:
            raise PatchError(f"hunk {k} does not apply: its context and removed lines are not in the program")
        lines[at : at + len(old)] = new
        offset = at + len(new) - (start - 1) - len(old)
    return "\n".join(lines) + "\n"


def _parse_hunks(diff: str) -> list[tuple[int, list[str], list[str]]]:
    hunks, current = [], None
    for raw in diff.splitlines():
        header = _HUNK.match(raw)
        if header:
            current = (int(header.group(1)), [], [])
            hunks.append(current)
        elif current is None or raw.startswith(("--- ", "+++ ", "diff ", "index ")):
            continue
        elif raw.startswith("\\"):
            continue  # "\ No newline at end of file"
        elif raw.startswith("-"):
            current[1].append(raw[1:])
        elif raw.startswith("+"):
            current[2].append(raw[1:])
        else:  # context; a blank line in a diff is an empty context line
            text = raw[1:] if raw.startswith(" ") else raw
            current[1].append(text)
            current[2].append(text)
    return hunks


def _find(lines: list[str], block: list[str], hint: int) -> int | None:
    if not block:
        return max(0, min(hint, len(lines)))
    candidates = [i for i in range(len(lines) - len(block) + 1) if lines[i : i + len(block)] == block]
    if not candidates:  # tolerate trailing-whitespace differences, as `patch -l` does
        stripped = [s.rstrip() for s in block]
        candidates = [i for i in range(len(lines) - len(block) + 1) if [s.rstrip() for s in lines[i : i + len(block)]] == stripped]
    return min(candidates, key=lambda i: abs(i - hint)) if candidates else None


def make_diff(buggy: str, fixed: str) -> str:
    """The unified diff from ``buggy`` to ``fixed`` (what an oracle fixer answers in diff form)."""
    return "".join(
        difflib.unified_diff(
            buggy.splitlines(keepends=True), fixed.splitlines(keepends=True), fromfile="a/program.py", tofile="b/program.py", n=2
        )
    )


def definition_source(program: str, name: str) -> str:
    """The source of the top-level function or class ``name`` in ``program`` (decorators included)."""
    lines = program.splitlines(keepends=True)
    for node in ast.parse(program).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            return "".join(lines[first : node.end_lineno])
    raise ValueError(f"no top-level definition of {name!r}")
