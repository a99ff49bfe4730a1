"""Seeded bug operators: each turns a correct program into a buggy one by one small AST change.

=====================  ==========================================================================
operator               change
=====================  ==========================================================================
``off_by_one``         an integer literal ``n`` becomes ``n + 1`` or ``n - 1``
``wrong_operator``     ``+`` <-> ``-``, ``*`` -> ``+``, ``//`` -> ``/``, ``%`` -> ``//``, ``and`` <-> ``or``, ...
``wrong_comparison``   ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in`` <-> ``not in``, ...
``swapped_arguments``  the first two positional arguments of a call, or the operands of ``-``, ``/``, ...
``missing_base_case``  a recursive function loses an ``if ...: return ...`` guard
``dropped_statement``  an assignment, call, ``return`` or ``raise`` statement is deleted
``negated_condition``  the condition of an ``if``, ``while``, conditional expression or filter is negated
``flipped_boolean``    ``True`` <-> ``False``
=====================  ==========================================================================

Only the entry point (the function or class under repair) is mutated, never its docstring. The
buggy text keeps the original's formatting except on the changed lines, and every mutant is checked
to parse to exactly the intended AST. :func:`seeded_mutants` orders the candidates with a seed,
alternating between operators; :mod:`marft_envs.tasks.code.generate` keeps the mutants that the
tests catch.
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

OPERATORS = (
    "off_by_one",
    "wrong_operator",
    "wrong_comparison",
    "swapped_arguments",
    "missing_base_case",
    "dropped_statement",
    "negated_condition",
    "flipped_boolean",
)

_ARITHMETIC = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.Div: ast.FloorDiv,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}
_COMPARISON = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)
_DROPPABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise)


@dataclass(frozen=True)
class Mutant:
    """A buggy version of a program."""

    operator: str
    """Which bug operator made it (one of ``OPERATORS``)."""
    source: str
    """The buggy program."""
    description: str
    """What changed, e.g. ``line 5: `if a < b:` -> `if a <= b:```."""
    lines: tuple[int, ...]
    """Lines of the buggy program (1-based) that must change to fix it; a deleted statement is located
    at the line that now follows the gap (the last line, when the gap is at the end)."""


@dataclass(frozen=True)
class _Site:
    operator: str
    index: int  # position of the node in ast.walk order over the entry point
    apply: Callable[[ast.AST, dict], ast.AST | None]  # mutates the copied node; returns what to re-render


def candidate_mutants(source: str, entry_point: str) -> list[Mutant]:
    """Every mutant the operators can make of ``entry_point`` in ``source``, in a fixed order."""
    tree = ast.parse(source)
    target = _entry(tree, entry_point)
    out, seen = [], set()
    for site in _sites(target):
        mutant = _render(source, tree, entry_point, site)
        if mutant is not None and mutant.source not in seen:
            seen.add(mutant.source)
            out.append(mutant)
    return out


def seeded_mutants(source: str, entry_point: str, seed: int) -> list[Mutant]:
    """The candidates in a seeded order that alternates operators (so the first few differ in kind).

    The order depends on ``seed`` and on the program itself, so that programs do not all start with
    the same operator.
    """
    rng = np.random.default_rng([seed, int(hashlib.sha256(source.encode()).hexdigest()[:8], 16)])
    by_operator: dict[str, list[Mutant]] = {}
    for m in candidate_mutants(source, entry_point):
        by_operator.setdefault(m.operator, []).append(m)
    queues = []
    for name in [OPERATORS[i] for i in rng.permutation(len(OPERATORS))]:
        group = by_operator.get(name, [])
        queues.append([group[i] for i in rng.permutation(len(group))])
    ordered = []
    while any(queues):
        for q in queues:
            if q:
                ordered.append(q.pop(0))
    return ordered


def changed_lines(fixed: str, buggy: str) -> tuple[int, ...]:
    """Lines of ``buggy`` (1-based) that differ from ``fixed``; a deletion counts at the line after it."""
    a, b = fixed.splitlines(), buggy.splitlines()
    lines: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            lines.update(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            lines.add(min(j1 + 1, max(len(b), 1)))
    return tuple(sorted(lines))


# -- where each operator applies ---------------------------------------------------------------------


def _entry(tree: ast.Module, name: str) -> ast.AST:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
    raise ValueError(f"the program defines no top-level function or class named {name!r}")


def _docstrings(target: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(target):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first))
                ids.add(id(first.value))
    return ids


def _sites(target: ast.AST) -> Iterator[_Site]:
    docs = _docstrings(target)
    recursive = _recursive_functions(target)
    for k, node in enumerate(ast.walk(target)):
        if id(node) in docs:
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) <= 1000:
            for delta in (1, -1):
                yield _Site("off_by_one", k, _set_attr("value", node.value + delta))
        if isinstance(node, ast.Constant) and type(node.value) is bool:
            yield _Site("flipped_boolean", k, _set_attr("value", not node.value))
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITHMETIC:
            yield _Site("wrong_operator", k, _set_attr("op", _ARITHMETIC[type(node.op)]()))
        if isinstance(node, ast.BoolOp):
            yield _Site("wrong_operator", k, _set_attr("op", ast.Or() if isinstance(node.op, ast.And) else ast.And()))
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _COMPARISON:
                    yield _Site("wrong_comparison", k, _replace_compare_op(i, _COMPARISON[type(op)]()))
        if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            if ast.dump(node.args[0]) != ast.dump(node.args[1]):
                yield _Site("swapped_arguments", k, _swap_call_args)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _NON_COMMUTATIVE):
            if ast.dump(node.left) != ast.dump(node.right):
                yield _Site("swapped_arguments", k, _swap_operands)
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            yield _Site("negated_condition", k, _negate_test)
        if isinstance(node, ast.comprehension):
            for i in range(len(node.ifs)):
                yield _Site("negated_condition", k, _negate_filter(i))
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            for i, stmt in enumerate(stmts):
                if id(stmt) in docs:
                    continue
                if isinstance(stmt, _DROPPABLE):
                    yield _Site("dropped_statement", k, _drop(field, i))
                if (
                    id(node) in recursive
                    and field == "body"
                    and isinstance(stmt, ast.If)
                    and not stmt.orelse
                    and any(isinstance(s, ast.Return) for s in stmt.body)
                ):
                    yield _Site("missing_base_case", k, _drop(field, i))


def _recursive_functions(target: ast.AST) -> set[int]:
    """Functions (or methods) that call themselves by name (``f(...)`` or ``self.f(...)``)."""
    out = set()
    for node in ast.walk(target):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for call in ast.walk(node):
                if isinstance(call, ast.Call):
                    f = call.func
                    if (isinstance(f, ast.Name) and f.id == node.name) or (isinstance(f, ast.Attribute) and f.attr == node.name):
                        out.add(id(node))
                        break
    return out


# -- the edits (applied to a copy of the node; return the node whose text is re-rendered) ----------


def _set_attr(name: str, value):
    def apply(node, parents):
        setattr(node, name, value)
        return node

    return apply


def _replace_compare_op(i: int, op: ast.cmpop):
    def apply(node, parents):
        node.ops[i] = op
        return node

    return apply


def _swap_call_args(node, parents):
    node.args[0], node.args[1] = node.args[1], node.args[0]
    return node


def _swap_operands(node, parents):
    node.left, node.right = node.right, node.left
    return node


def _negate_test(node, parents):
    node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    return node.test  # only the condition's text changes


def _negate_filter(i: int):
    def apply(node, parents):
        node.ifs[i] = ast.UnaryOp(op=ast.Not(), operand=node.ifs[i])
        return node.ifs[i]

    return apply


def _drop(field: str, i: int):
    def apply(node, parents):
        stmts = getattr(node, field)
        removed = stmts.pop(i)
        if not stmts:  # a body may not be empty
            stmts.append(ast.Pass())
        return ("drop", removed, stmts[0] if isinstance(stmts[0], ast.Pass) and len(stmts) == 1 else None)

    return apply


# -- rendering: the original text with only the changed lines rewritten ------------------------------


def _render(source: str, tree: ast.Module, entry_point: str, site: _Site) -> Mutant | None:
    mutated = copy.deepcopy(tree)
    original_node = list(ast.walk(_entry(tree, entry_point)))[site.index]
    node = list(ast.walk(_entry(mutated, entry_point)))[site.index]
    changed = site.apply(node, {})
    expected = ast.dump(mutated)
    lines = source.splitlines(keepends=True)
    if isinstance(changed, tuple):  # a dropped statement: delete its lines (or leave `pass`)
        text = _without_statement(lines, changed[1], leave_pass=changed[2] is not None)
    else:
        if changed is node:
            old = original_node
        else:  # a negated condition: re-render the condition only
            old = _matching_original(original_node, node, changed)
        if old is None or old.lineno != old.end_lineno:
            return None
        text = None
        for template in ("{}", "({})"):
            candidate = _replace_span(lines, old, template.format(ast.unparse(changed)))
            if _parses_to(candidate, expected):
                text = candidate
                break
    if text is None or not _parses_to(text, expected):
        return None
    bug_lines = changed_lines(source, text)
    if not bug_lines:
        return None
    return Mutant(site.operator, text, _describe(source, text, bug_lines), bug_lines)


def _matching_original(original_parent: ast.AST, parent: ast.AST, changed: ast.AST) -> ast.AST | None:
    # The condition that was wrapped in `not (...)`: the same field of the original parent.
    if isinstance(parent, ast.comprehension):
        index = next(i for i, f in enumerate(parent.ifs) if f is changed)
        return original_parent.ifs[index]
    return original_parent.test


def _replace_span(lines: list[str], node: ast.AST, text: str) -> str:
    row = node.lineno - 1
    line = lines[row].encode()  # col offsets are in UTF-8 bytes
    new = line[: node.col_offset] + text.encode() + line[node.end_col_offset :]
    return "".join(lines[:row] + [new.decode()] + lines[row + 1 :])


def _without_statement(lines: list[str], removed: ast.stmt, leave_pass: bool) -> str | None:
    first, last = removed.lineno - 1, removed.end_lineno - 1
    head = lines[first].encode()[: removed.col_offset]
    tail = lines[last].encode()[removed.end_col_offset :].strip()
    if head.strip() or (tail and not tail.startswith(b"#")):
        return None  # the statement shares a line with other code
    replacement = [f"{head.decode()}pass\n"] if leave_pass else []
    return "".join(lines[:first] + replacement + lines[last + 1 :])


def _parses_to(text: str, expected_dump: str) -> bool:
    try:
        return ast.dump(ast.parse(text)) == expected_dump
    except SyntaxError:
        return False


def _describe(fixed: str, buggy: str, bug_lines: tuple[int, ...]) -> str:
    a, b = fixed.splitlines(), buggy.splitlines()
    parts = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        old = " / ".join(s.strip() for s in a[i1:i2]) or "(nothing)"
        new = " / ".join(s.strip() for s in b[j1:j2]) or "(deleted)"
        where = j1 + 1 if tag != "delete" else min(j1 + 1, max(len(b), 1))  # as in changed_lines
        parts.append(f"line {where}: `{old}` -> `{new}`")
    return "; ".join(parts)
