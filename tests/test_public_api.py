"""The public API: ``import marft_agents`` gives the few names a user's code calls, lazily.

At most :data:`MAX_PUBLIC` names, each importable. Everything else (the pieces of a learner, config
fields, engines, episodes, the TRL helpers) is imported from the module that defines it,
``from marft_agents.algorithms.base import minibatches``. So that a name dropped from the API or a
module moved inside a wing cannot leave a stale line behind, every ``from marft_agents import X`` of the
docs, tests, benchmarks and plug-ins names a public name (or a wing), and every module path they name
(``from marft_agents.a.b import c``, ``marft_agents.a.b.c`` in the docs' text, ``marft_agents/a/b.py``)
exists, with ``c`` defined in it. Nothing is imported to check it: the sources are parsed with :mod:`ast`.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

import marft_agents

ROOT = Path(__file__).resolve().parents[1]
MAX_PUBLIC = 20
"""``marft_agents.__all__`` holds at most this many names: what a user calls, not what the code is built of."""
DOC_FILES = sorted(ROOT.glob("docs/**/*.md")) + [ROOT / "README.md"]
PYTHON_FILES = sorted(p for folder in ("benchmarks", "tests", "plugins") for p in (ROOT / folder).rglob("*.py") if p != Path(__file__))
"""The Python files scanned (this one asks for unknown names on purpose)."""


def test_import_is_cheap_and_loads_no_torch():
    code = "import sys, marft_agents; print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_public_api_is_small():
    n = len(marft_agents.__all__)
    assert n <= MAX_PUBLIC, f"marft_agents.__all__ holds {n} names: keep it to what a user calls"
    assert marft_agents.__all__ == sorted(marft_agents._PUBLIC)
    # the pieces of a learner and the config fields are reached by their module, not from the top
    for internal in ("minibatches", "apply", "by_adapter", "Minibatch", "losses", "Ranged", "POSITIVE", "make_engine", "Episode"):
        assert internal not in marft_agents.__all__


def test_train_and_its_config_are_the_real_ones():
    from marft_agents.algorithms.base import Learner
    from marft_agents.training.config import TrainConfig
    from marft_agents.training.export import export
    from marft_agents.training.from_run import policy_from_run
    from marft_agents.training.trainer import train

    assert marft_agents.train is train and marft_agents.TrainConfig is TrainConfig and marft_agents.export is export
    assert marft_agents.Learner is Learner and marft_agents.policy_from_run is policy_from_run
    assert callable(marft_agents.algorithms.register) and marft_agents.load is marft_agents.__dict__["load"]


@pytest.mark.parametrize("name", marft_agents.__all__)
def test_every_public_name_resolves_and_is_listed(name):
    assert getattr(marft_agents, name) is not None
    assert name in dir(marft_agents)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="'Trainer'"):
        marft_agents.Trainer  # noqa: B018
    assert not hasattr(marft_agents, "lm")  # an internal module is not a public name
    assert not hasattr(marft_agents, "minibatches")  # nor a piece of a learner: marft_agents.algorithms.base.minibatches


def test_docs_list_every_public_name():
    page = (ROOT / "docs" / "agents.md").read_text()
    section = page.split("## The public API", 1)[1].split("\n## ", 1)[0]
    table = section.split("| for | names |", 1)[1].split("\n\n", 1)[0]
    missing = [n for n in marft_agents.__all__ if f"`{n}`" not in table]
    assert not missing, f"docs/agents.md's 'The public API' table does not list {missing}"


# -- module paths that exist ----------------------------------------------------------------------


def module_file(module: str) -> Path | None:
    """The file of a dotted module of the repository (``a/b.py`` or ``a/b/__init__.py``), or None."""
    path = ROOT / Path(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def top_level_names(path: Path) -> frozenset[str]:
    """The names a module binds at its top level (defs, classes, assignments, imports; inside ``if``/``try`` too)."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                for block in (node.body, node.orelse, getattr(node, "finalbody", []), *[h.body for h in getattr(node, "handlers", [])]):
                    visit(block)

    visit(ast.parse(path.read_text()).body)
    return frozenset(names)


def import_problem(module: str, name: str | None) -> str | None:
    """What is wrong with ``from module import name`` (``import module`` when ``name`` is None), or None."""
    path = module_file(module)
    if path is None:
        return f"no module {module}"
    if name is None or name == "*" or module_file(f"{module}.{name}") is not None:
        return None
    if module == "marft_agents":
        return None if name in marft_agents.__all__ else f"{name} is not a public name of marft_agents: import it from its module"
    return None if name in top_level_names(path) else f"{module} defines no {name}"


def path_problem(dotted: str) -> str | None:
    """What is wrong with a dotted path ``marft_agents.a.b.c`` (modules, then at most one name in the last), or None."""
    parts = dotted.split(".")
    k = 1
    while k < len(parts) and module_file(".".join(parts[: k + 1])) is not None:
        k += 1
    if k == len(parts):
        return None
    if parts[k].startswith("_"):
        return None  # marft_agents.__all__, a module's __file__, a private name a test reaches for
    return import_problem(".".join(parts[:k]), parts[k])


_FROM = re.compile(r"\bfrom\s+(marft_agents(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n`]*)")
_IMPORT = re.compile(r"(?:^|`)\s*import\s+(marft_agents(?:\.\w+)*)", re.M)
_DOTTED = re.compile(r"\bmarft_agents(?:\.\w+)+")
_FILE = re.compile(r"\bmarft_agents/[\w/.-]*\w")


def imported_names(clause: str) -> list[str]:
    """``"(a, b as c,  # note\\n d)"`` -> ``["a", "b", "d"]``: the names of an import's clause."""
    text = re.sub(r"#[^\n]*", "", clause).strip("() \n")
    return [item.split()[0] for item in text.split(",") if item.split()]


def text_problems(text: str) -> list[str]:
    """Each import, dotted path and file path of ``marft_agents`` in a page's text that does not exist."""
    found = [import_problem(m.group(1), n) for m in _FROM.finditer(text) for n in imported_names(m.group(2))]
    found += [import_problem(m.group(1), None) for m in _IMPORT.finditer(text)]
    found += [path_problem(m.group(0)) for m in _DOTTED.finditer(text)]
    found += [None if (ROOT / m.group(0)).exists() else f"no file {m.group(0)}" for m in _FILE.finditer(text)]
    return [p for p in found if p]


def python_problems(source: str) -> list[str]:
    """Each ``from marft_agents... import``, ``import marft_agents...`` and ``marft_agents.X`` of a Python source that does not exist."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "marft_agents":
            found += [(node.lineno, import_problem(node.module, a.name)) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, import_problem(a.name, None)) for a in node.names if a.name.split(".")[0] == "marft_agents"]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "marft_agents":
            found.append((node.lineno, path_problem(f"marft_agents.{node.attr}")))
    return [f"line {line}: {p}" for line, p in found if p]


def test_the_scanners_on_hand_made_text():
    assert imported_names("(a, b as c,  # a note\n    d)") == ["a", "b", "d"]
    good = "```python\nfrom marft_agents import load\nfrom marft_agents.algorithms.base import minibatches\n```\n"
    good += "`marft_agents.algorithms.tis.action_weights`, `marft_agents/algorithms/base.py` and `marft_agents.__all__`"
    assert text_problems(good) == []
    bad = "from marft_agents import minibatches\nfrom marft_agents.algorithms.base import CriticLearner\n"
    bad += "`marft_agents.nowhere.x`, `marft_agents/old.py`"
    assert text_problems(bad) == [
        "minibatches is not a public name of marft_agents: import it from its module",
        "marft_agents.algorithms.base defines no CriticLearner",
        "nowhere is not a public name of marft_agents: import it from its module",
        "no file marft_agents/old.py",
    ]
    assert python_problems("import marft_agents\nfrom marft_agents import algorithms, train\nmarft_agents.CriticLearner") == [
        "line 3: CriticLearner is not a public name of marft_agents: import it from its module"
    ]


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_only_modules_and_names_that_exist(path):
    problems = text_problems(path.read_text())
    assert not problems, f"{path.relative_to(ROOT)} names what marft_agents does not hold: {problems}"


def test_benchmarks_tests_and_plugins_import_what_exists():
    assert len(PYTHON_FILES) > 50 and ROOT / "benchmarks" / "critic_fit.py" in PYTHON_FILES
    problems = {str(p.relative_to(ROOT)): found for p in PYTHON_FILES if (found := python_problems(p.read_text()))}
    assert not problems, f"imports of names marft_agents does not hold (a dropped public name, a moved module): {problems}"
