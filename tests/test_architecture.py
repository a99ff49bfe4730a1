"""The import graph of ``marft_envs`` and ``marft_agents`` has no cycle.

Every module of both packages is parsed with :mod:`ast` (nothing is imported) and every import
statement, at the top of a module or inside a function, becomes an edge to the module it names.
Imports under ``if TYPE_CHECKING:`` do not run and are not edges. Importing ``a.b.c`` also runs the
package ``a.b``'s ``__init__``, but those implicit edges are left out: every submodule would
otherwise "import" the top-level package, whose ``__init__`` registers the envs. The modules that
``marft_agents/__init__.py`` imports on first use of a public name (its ``_PUBLIC`` table) are edges.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import warnings
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


def _lazy_imports(tree: ast.Module) -> list[str]:
    """The modules named by a top-level ``_PUBLIC`` table (name -> (module, attribute)): imported on first use."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "_PUBLIC" for t in targets) and isinstance(node.value, ast.Dict):
            return [v.elts[0].value for v in node.value.values if isinstance(v, ast.Tuple) and isinstance(v.elts[0], ast.Constant)]
    return []


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the two packages it imports (resolved to modules, not names in them)."""
    files = module_files()
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        graph[name] |= {t for t in _lazy_imports(tree) if t in files and t != name}
        for node in _imports(tree):
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
    # and so do the public names' modules, which marft_agents/__init__.py imports on first use
    assert {"marft_agents.training.trainer", "marft_agents.algorithms.base"} <= graph["marft_agents"]


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
"""A soft limit on a module's length: past it, a warning asks whether the module holds one concept.
Functions are what is held short (tests/test_function_size.py); a module is as long as its concept needs."""
DATA_CORPORA = ("marft_envs/tasks/code/corpus/",)
"""Folders of data written as Python (the programs the code tasks mutate): exempt from the limit."""


def test_modules_over_400_lines_outside_data_corpora_are_a_warning():
    assert all((ROOT / folder).is_dir() for folder in DATA_CORPORA), "a stale DATA_CORPORA entry"
    files = module_files()
    assert len(files) > 100  # both packages were found
    lengths = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines()) for path in files.values()}
    too_long = {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES and not name.startswith(DATA_CORPORA)}
    if too_long:
        warnings.warn(f"modules over {MAX_MODULE_LINES} lines (do they hold one concept?): {too_long}", stacklevel=1)


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


# -- the layers of marft_agents ------------------------------------------------------------------
#
# marft_agents is cut into wings (folders), each a layer that imports only wings below it. ALLOWED is
# the exact list of wing-to-wing imports the code makes (docs/architecture.png draws it): a new
# pair (a module of one wing importing a module of another for the first time) fails the tests
# until it is written here, and a pair no import uses any more fails until it is removed. Its
# order, bottom to top:
#
#   settings, models < engines, runs < rollout < algorithms, signal, distributed, pretraining < training < root
#
# models (the policy, model loading) and settings (config fields and text) import no other wing;
# runs/ (what a run writes) needs only those two. pretraining (``marft pretrain``) is a program
# beside the trainer: it uses the policy, the engines and the rollout engine (its evaluation plays the
# held-out split), and writes its output folder through runs/; nothing of a training run. The root
# (``cli.py``, ``__init__.py`` with its public names) sits above every wing; no wing imports the root.
# Every wing may import marft_envs, the package below all of marft_agents (marft_envs never imports
# marft_agents).

ALLOWED: dict[str, set[str]] = {
    "settings": set(),
    "models": set(),
    "engines": {"settings", "models"},
    "runs": {"settings", "models"},
    "rollout": {"models", "engines"},
    "algorithms": {"settings", "models", "rollout"},
    "signal": {"settings", "engines", "rollout"},
    "distributed": {"settings", "models", "engines", "rollout"},
    "pretraining": {"models", "engines", "rollout", "runs"},
    "training": {"settings", "models", "engines", "rollout", "algorithms", "signal", "runs", "distributed"},
    "root": {"settings", "models", "engines", "rollout", "algorithms", "runs", "distributed", "training", "pretraining"},
}
"""Wing -> the wings of marft_agents its modules import (besides their own wing and marft_envs): exactly those."""
MAX_ROOT_MODULES = 6
"""The root of marft_agents keeps at most this many modules: everything else lives in a wing."""


def wing_of(module: str) -> str:
    """``marft_agents.models.policy`` -> ``models``; the root's modules (``marft_agents``, ``marft_agents.cli``) -> ``root``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (ROOT / "marft_agents" / parts[1]).is_dir()) else "root"


def layer_violations(graph: dict[str, set[str]], allowed: dict[str, set[str]]) -> list[str]:
    """One line per import in ``graph`` from a wing of marft_agents to a wing that ``allowed`` does not list for it."""
    out = []
    for module in sorted(m for m in graph if m.split(".")[0] == "marft_agents"):
        wing = wing_of(module)
        for target in sorted(t for t in graph[module] if t.split(".")[0] == "marft_agents"):
            to = wing_of(target)
            if to != wing and to not in allowed[wing]:
                out.append(f"{module} ({wing}/) imports {target} ({to}/); {wing}/ may import only {sorted(allowed[wing])}")
    return out


def wing_pairs(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """``(wing, other wing)`` for every import in ``graph`` from a module of marft_agents into another wing of it."""
    agents = [m for m in graph if m.split(".")[0] == "marft_agents"]
    return {(wing_of(m), wing_of(t)) for m in agents for t in graph[m] if t.split(".")[0] == "marft_agents" and wing_of(t) != wing_of(m)}


def imports_between(graph: dict[str, set[str]], lower: str, higher: str) -> list[str]:
    """``module -> target`` for every import from a module of wing ``lower`` into wing ``higher``."""
    return [
        f"{m} -> {t}"
        for m in sorted(graph)
        if m.startswith("marft_agents") and wing_of(m) == lower
        for t in sorted(graph[m])
        if t.startswith("marft_agents") and wing_of(t) == higher
    ]


def test_layer_violations_on_a_hand_made_graph():
    graph = {
        "marft_agents.models.policy": {"marft_agents.models.lm", "marft_envs.core"},
        "marft_agents.models.lm": set(),
        "marft_agents.runs.report": {"marft_agents.training.trainer"},
        "marft_agents.training.trainer": {"marft_agents.models.policy"},
    }
    allowed = {"models": set(), "runs": {"models"}, "training": {"models", "runs"}}
    assert layer_violations(graph, allowed) == [
        "marft_agents.runs.report (runs/) imports marft_agents.training.trainer (training/); runs/ may import only ['models']"
    ]
    assert imports_between(graph, "runs", "training") == ["marft_agents.runs.report -> marft_agents.training.trainer"]
    assert wing_pairs(graph) == {("runs", "training"), ("training", "models")}  # models -> models is no pair
    assert wing_of("marft_agents") == wing_of("marft_agents.cli") == "root"


def test_the_layer_table_names_every_wing_and_has_no_cycle():
    on_disk = {p.name for p in (ROOT / "marft_agents").iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert on_disk == set(ALLOWED) - {"root"}, "a wing was added or removed: give it its row in ALLOWED"
    assert all(wings <= set(ALLOWED) - {"root"} for wings in ALLOWED.values())  # no wing may import the root
    assert find_cycle({w: set(ws) for w, ws in ALLOWED.items()}) is None


def test_every_import_in_marft_agents_follows_the_layer_rules():
    violations = layer_violations(import_graph(), ALLOWED)
    assert not violations, (
        "imports between wings that ALLOWED does not list (move the code to the wing of its layer; or, where the"
        " layers allow it, add the pair to ALLOWED and redraw: .venv/bin/python docs/make_architecture_png.py):\n" + "\n".join(violations)
    )


def test_the_layer_table_lists_only_the_imports_in_use():
    used = wing_pairs(import_graph())
    stale = sorted((wing, to) for wing, wings in ALLOWED.items() for to in wings if (wing, to) not in used)
    assert not stale, f"ALLOWED lists wing pairs no import uses any more: {stale}; remove them (and redraw docs/architecture.png)"


@pytest.mark.parametrize(
    "lower, higher",
    [
        ("settings", "models"),  # settings are plain values: no model, no torch
        ("models", "engines"),  # the model layer knows nothing of the engines that drive it
        ("models", "rollout"),
        ("engines", "rollout"),  # an engine answers a layer of requests; it does not play envs
        ("rollout", "algorithms"),  # rollouts do not know who learns from them
        ("algorithms", "signal"),  # the update and the batch's drawing are siblings
        ("signal", "algorithms"),
        ("signal", "training"),  # the batch's drawing takes its values; the loop owns the config
        ("algorithms", "runs"),  # an algorithm never writes a run's files
        ("runs", "training"),  # what a run writes does not know how a run runs
        ("distributed", "training"),  # the workers play rollouts; the loop drives them
        ("pretraining", "training"),  # marft pretrain is a program beside the trainer
        ("pretraining", "algorithms"),
        ("training", "root"),  # nothing below the CLI imports it or the package's __init__
        ("models", "root"),
    ],
)
def test_a_lower_wing_never_imports_a_higher_one(lower, higher):
    assert higher not in ALLOWED[lower], f"the table lets {lower}/ import {higher}/"
    found = imports_between(import_graph(), lower, higher)
    assert not found, f"{lower}/ must never import {higher}/: {found}"


def test_marft_envs_never_imports_marft_agents():
    graph = import_graph()
    found = [f"{m} -> {t}" for m in sorted(graph) if m.startswith("marft_envs") for t in sorted(graph[m]) if t.startswith("marft_agents")]
    assert not found, f"marft_envs sits below marft_agents: {found}"


def test_the_root_of_marft_agents_holds_at_most_six_modules():
    root_modules = sorted(p.name for p in (ROOT / "marft_agents").glob("*.py"))
    assert "cli.py" in root_modules and "__init__.py" in root_modules
    assert len(root_modules) <= MAX_ROOT_MODULES, f"the root of marft_agents holds {root_modules}: put modules in the wing of their layer"


def test_marft_envs_rewards_import_nothing_from_the_tasks():
    # Rewards are pure functions below the tasks that compose them (a task imports its reward, never
    # the reverse); what both need, like the booking domain's days and distances, lives in rewards/.
    graph = import_graph()
    found = [
        f"{m} -> {t}"
        for m in sorted(graph)
        if m.startswith("marft_envs.rewards")
        for t in sorted(graph[m])
        if t.startswith("marft_envs.tasks")
    ]
    assert not found, f"a reward module imports a task module: {found}"


def _picture_script():
    """docs/make_architecture_png.py as a module."""
    spec = importlib.util.spec_from_file_location("make_architecture_png", ROOT / "docs" / "make_architecture_png.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_architecture_picture_draws_the_imports_in_use(tmp_path):
    # docs/architecture.png is drawn from the imports by docs/make_architecture_png.py: a new wing needs
    # its job in JOBS, or the script (and this test) stops and names it.
    script = _picture_script()
    assert set(script.JOBS) == set(ALLOWED) | {"marft_envs"}
    assert script.layers(["a", "b", "c"], {("a", "b"), ("b", "c"), ("a", "c")}) == {"a": 2, "b": 1, "c": 0}
    arrows = script.draw(tmp_path / "architecture.png")
    assert arrows == wing_pairs(import_graph()) == {(wing, to) for wing, wings in ALLOWED.items() for to in wings}
    assert (tmp_path / "architecture.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert script.read_metadata(tmp_path / "architecture.png") == script.drawn_from()


def test_the_architecture_picture_is_up_to_date():
    script = _picture_script()
    drawn, now = script.read_metadata(ROOT / "docs" / "architecture.png"), script.drawn_from()
    assert drawn == now, (
        "docs/architecture.png shows other wing pairs or modules than the code has: .venv/bin/python docs/make_architecture_png.py"
    )


def test_the_architecture_page_lists_every_module_and_import_of_every_wing():
    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = {m.group(1): m.group(0).strip("|").split(" | ") for m in re.finditer(r"^\| `(\w+)/` \|.*\|$", page, re.M)}
    assert set(rows) == set(ALLOWED) - {"root"}, "docs/architecture.md's wing table: one row per wing"
    for wing, (_, _, imports, modules) in rows.items():
        on_disk = {p.stem for p in (ROOT / "marft_agents" / wing).glob("*.py")} - {"__init__"}
        named = set(re.findall(r"`(\w+)`", modules))
        assert named == on_disk, f"docs/architecture.md's {wing}/ row: missing {sorted(on_disk - named)}, gone {sorted(named - on_disk)}"
        assert set(re.findall(r"`(\w+)`", imports)) == ALLOWED[wing], (
            f"docs/architecture.md's {wing}/ row: it imports {sorted(ALLOWED[wing])}"
        )
