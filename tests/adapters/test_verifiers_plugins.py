"""The verifiers plugin packages shipped in ``plugins/verifiers/`` (read as text: no verifiers needed).

``vf-eval NAME`` imports the module ``NAME``; each env marft ships has one, named as
``marft_envs.adapters.verifiers.plugin`` names it, and the wheel includes it (pyproject's package find).
``tests/adapters/test_verifiers.py`` runs verifiers' commands on them where verifiers is installed.
"""

from __future__ import annotations

import ast
import fnmatch
import subprocess
import sys
from pathlib import Path

import tomllib

from marft_envs.adapters.verifiers import _module_name

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins" / "verifiers"


def shipped_envs() -> list[str]:
    """The env ids marft itself registers (not those of an adapter's library, a plugin of yours, or a test's),
    read in a fresh process: other tests in this one register envs of their own."""
    code = (
        "import marft_envs; from marft_envs.registration import entry_point; "
        "print('\\n'.join(e for e in marft_envs.list_envs() if entry_point(marft_envs.spec(e).target).startswith('marft_envs.tasks.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return sorted(out.split())


def defined_env(package: Path) -> str:
    """The env id the package's ``__all__ = define_plugin(__name__, ENV)`` names."""
    tree = ast.parse((package / "__init__.py").read_text())
    (call,) = [n.value for n in tree.body if isinstance(n, ast.Assign) and [t.id for t in n.targets] == ["__all__"]]
    assert isinstance(call, ast.Call) and call.func.id == "define_plugin" and call.args[0].id == "__name__" and len(call.args) == 2
    return call.args[1].value


def test_every_shipped_env_has_its_plugin_package_named_as_plugin_names_it():
    packages = {p.name: defined_env(p) for p in sorted(PLUGINS.iterdir()) if p.is_dir() and p.name != "__pycache__"}
    assert packages == {_module_name(env, {}): env for env in shipped_envs()}


def test_the_wheel_includes_every_plugin_package():
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert "plugins/verifiers" in find["where"]
    for package in PLUGINS.iterdir():
        if package.is_dir() and package.name != "__pycache__":
            assert any(fnmatch.fnmatch(package.name, pattern) for pattern in find["include"]), package.name
