"""No function of ``marft_agents`` is over 80 lines (docs: keep functions short; a module is as long as its concept).

Every ``.py`` file is parsed with :mod:`ast` (nothing is imported); a function or method counts from its
``def`` (decorators left out) to its last line, docstring and comments included. ruff holds the rest of a
function's size: C901 (branches) and PLR0915 (statements), set in ``pyproject.toml``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
"""The longest a function may be: one screen, read top to bottom."""

ALLOWED: dict[str, str] = {
    # "marft_agents/path/module.py:function": "why it reads better whole than split",
}
"""Functions allowed over the limit, each with its reason; a stale entry fails the test too."""


def function_lengths() -> list[tuple[str, int, int]]:
    """(``"path:function"``, first line, lines) for every function and method of ``marft_agents``.

    A list, not a dict: two classes of one module may each have a method of the same name.
    """
    out = []
    for path in sorted((ROOT / "marft_agents").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((f"{name}:{node.name}", node.lineno, node.end_lineno - node.lineno + 1))
    return out


def test_no_function_is_over_80_lines():
    lengths = function_lengths()
    assert len(lengths) > 500  # the package was found
    too_long = [
        f"{key.split(':')[0]}:{line} {key.split(':')[1]} ({n} lines)"
        for key, line, n in sorted(lengths)
        if n > MAX_FUNCTION_LINES and key not in ALLOWED
    ]
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines (split them by concept): {too_long}"


def test_every_allowed_function_is_still_over_the_limit():
    over = {key for key, _, n in function_lengths() if n > MAX_FUNCTION_LINES}
    stale = sorted(set(ALLOWED) - over)
    assert not stale, f"ALLOWED entries no longer needed (remove them): {stale}"
