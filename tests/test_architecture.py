"""The import graph of ``marft_envs`` and ``marft_agents`` has no cycle.

Every module of both packages is parsed with :mod:`ast` (nothing is imported) and every import
statement, at the top of a module or inside a function, becomes an edge to the module it names.
Imports under ``if TYPE_CHECKING:`` do not run and are not edges. Importing ``a.b.c`` also runs the
package ``a.b``'s ``__init__``, but those implicit edges are left out: every submodule would
otherwise "import" the top-level package, whose ``__init__`` registers the envs.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("marft_envs", "marft_agents")


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the two packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the two packages it imports (resolved to modules, not names in them)."""
    files = module_files()
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parent = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join(parent + ([base] if base else []))
                # "from pkg import sub" names the submodule when there is one, else a name in pkg
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            graph[name] |= {t for t in targets if t in files and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None; depth-first search with three colours."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_graph_covers_both_packages_and_sees_lazy_imports():
    graph = import_graph()
    assert {"marft_envs.core", "marft_agents.training.run_parts"} <= set(graph)
    assert "marft_envs.core" in graph["marft_envs.registration"]
    assert "marft_envs" in graph["marft_agents.training.run_parts"]
    # imports inside a function count: FlexEnv.branch imports the branching module when called
    assert "marft_envs.branching" in graph["marft_envs.core"]


def test_find_cycle_on_a_hand_made_graph():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_in_either_package():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("name", sorted(module_files()))
def test_every_module_imports(name):
    if name.endswith("__main__"):
        pytest.skip("runs the CLI")
    importlib.import_module(name)


MAX_MODULE_LINES = 400
"""The team's limit on a module's length: one concept per file, readable top to bottom."""
DATA_CORPORA = ("marft_envs/tasks/code/corpus/",)
"""Folders of data written as Python (the programs the code tasks mutate): exempt from the limit."""


def test_no_module_is_over_400_lines_outside_data_corpora():
    assert all((ROOT / folder).is_dir() for folder in DATA_CORPORA), "a stale DATA_CORPORA entry"
    files = module_files()
    assert len(files) > 100  # both packages were found
    lengths = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines()) for path in files.values()}
    too_long = {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES and not name.startswith(DATA_CORPORA)}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split them by concept): {too_long}"


def test_marft_envs_is_torch_free_even_inside_functions():
    heavy = ("torch", "transformers", "peft", "trl", "accelerate")
    found = []
    for path in sorted((Path(__file__).parent.parent / "marft_envs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in heavy]
    assert not found, f"marft_envs must stay torch-free (put such code in marft_agents): {found}"


def test_model_loading_is_the_bottom_layer_of_marft_agents():
    # The policy and the engines load models through marft_agents.models; the training programs that
    # use the policy (marft pretrain) live in marft_agents.pretraining, so no import runs back up.
    graph = import_graph()
    loading = {name for name in graph if name.startswith("marft_agents.models")}
    assert loading >= {"marft_agents.models.named", "marft_agents.models.tiny"}
    for name in loading:
        above = {t for t in graph[name] if t.startswith("marft_agents.") and t not in loading}
        assert not above, f"{name} imports {sorted(above)}, which sit above model loading"
