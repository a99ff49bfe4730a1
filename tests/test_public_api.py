"""The public API: ``import marft_agents`` gives what a user's code needs, lazily, and the docs and benchmarks use it.

Docs, the tests of the docs and the benchmarks import from ``marft_agents`` itself, never from a module
inside one of its folders (``from marft_agents.training.config import load`` is
``from marft_agents import load``). A few benchmarks measure an internal piece that no user calls;
those imports are listed in :data:`INTERNAL`, each with its reason.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import marft_agents

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = sorted(ROOT.glob("docs/**/*.md")) + [ROOT / "README.md", ROOT / "tests" / "test_docs.py", ROOT / "tests" / "test_readme.py"]
BENCHMARKS = sorted(ROOT.glob("benchmarks/*.py"))

INTERNAL = {
    "marft_agents.training.allocator": "allocator_speed.py and memory.py measure the mmap-threshold hold itself",
    "marft_agents.models.lm": "rollout_throughput.py compares the sampling mechanics with a plain generate",
    "marft_agents.models.tiny": "rollout_throughput.py and memory.py build untrained tiny models of other sizes",
    "marft_agents.pretraining.sft_data": "rollout_throughput.py trains a tokenizer for those models",
    "marft_agents.models.named": "the named real models' local folders (resolve, the list)",
    "marft_agents.models.dtype": "roofline.py reads the CPU's flags",
    "marft_agents.engines.seeded": "episode_sampler.py times the per-episode sampler itself",
    "marft_agents.rollout.evaluation": "real_model_baselines.py runs the pieces of evaluate one by one",
    "marft_agents.runs.plots": "compare.py and overlap.py smooth curves as a run's plots do",
    "marft_agents.distributed.cluster": "distributed.py and overlap.py share one Ray cluster across runs",
    "marft_agents.distributed.config": "the settings of that cluster",
    "marft_agents.algorithms.critic": "critic_fit.py replays the value head's fit on recorded features",
    "marft_agents.algorithms.marft": "critic_fit.py computes MARFT's chain-GAE returns for that fit",
    "marft_agents.signal.collection": "data_parallel.py deals each rank its share of the batch (rank_share) as a run does",
    "marft_agents.training.launch": "data_parallel.py opens the ranks' process group as a run under torchrun does",
}
"""Module inside a wing -> why a benchmark may import it."""


def test_import_is_cheap_and_loads_no_torch():
    code = "import sys, marft_agents; print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_train_and_its_config_are_the_real_ones():
    from marft_agents.training.config import TrainConfig
    from marft_agents.training.trainer import train

    assert marft_agents.train is train and marft_agents.TrainConfig is TrainConfig
    assert callable(marft_agents.algorithms.register) and marft_agents.load is marft_agents.__dict__["load"]


@pytest.mark.parametrize("name", marft_agents.__all__)
def test_every_public_name_resolves_and_is_listed(name):
    assert getattr(marft_agents, name) is not None
    assert name in dir(marft_agents)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="'Trainer'"):
        marft_agents.Trainer  # noqa: B018
    assert not hasattr(marft_agents, "lm")  # an internal module is not a public name


def test_docs_list_every_public_name():
    page = (ROOT / "docs" / "agents.md").read_text()
    section = page.split("## The public API", 1)[1].split("\n## ", 1)[0]
    missing = [n for n in marft_agents.__all__ if f"`{n}`" not in section]
    assert not missing, f"docs/agents.md's 'The public API' does not list {missing}"


def _modules(base: str, names: list[str]) -> set[str]:
    """The modules ``from base import names`` reads: ``base.name`` where that is a module, else ``base``."""
    return {f"{base}.{n}" if (ROOT / Path(*f"{base}.{n}".split("."))).with_suffix(".py").is_file() else base for n in names}


def python_imports(source: str) -> set[str]:
    """Every ``marft_agents`` module a Python source imports (``marft_agents`` itself included)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "marft_agents":
            found |= _modules(node.module, [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "marft_agents"}
    return found


_DOC_IMPORT = re.compile(r"^\s*(?:from\s+(marft_agents(?:\.\w+)*)\s+import|import\s+(marft_agents(?:\.\w+)*))", re.M)


def test_the_scanners_on_hand_made_text():
    assert python_imports("from marft_agents import train\nfrom marft_agents.models import lm\nimport marft_agents.cli") == {
        "marft_agents",
        "marft_agents.models.lm",
        "marft_agents.cli",
    }
    text = "```python\nfrom marft_agents import load\n    from marft_agents.training.config import load\n```\n`marft_agents.train`"
    assert [m.group(1) or m.group(2) for m in _DOC_IMPORT.finditer(text)] == ["marft_agents", "marft_agents.training.config"]


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_import_only_the_public_api(path):
    found = [m.group(1) or m.group(2) for m in _DOC_IMPORT.finditer(path.read_text())]
    inside = sorted({m for m in found if m != "marft_agents"})
    assert not inside, f"{path.name} imports {inside}: import the public names from marft_agents (docs/agents.md, 'The public API')"


def test_benchmarks_import_the_public_api_or_a_listed_internal():
    used: dict[str, list[str]] = {}
    for path in BENCHMARKS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "marft_agents":
                unknown = [a.name for a in node.names if a.name not in marft_agents.__all__]
                assert not unknown, f"{path.name}:{node.lineno} imports {unknown}, not public names of marft_agents"
        for module in python_imports(path.read_text()) - {"marft_agents"}:
            used.setdefault(module, []).append(path.name)
    assert BENCHMARKS and "marft_agents.models.lm" in used  # the scan sees the benchmarks' imports
    unlisted = {m: files for m, files in used.items() if m not in INTERNAL}
    assert not unlisted, f"benchmarks import modules inside marft_agents: {unlisted}; use the public names (or list a real internal)"
    stale = sorted(set(INTERNAL) - set(used))
    assert not stale, f"INTERNAL lists modules no benchmark imports any more: {stale}"
