"""docs/adapters.md's code runs: its ```python no-run adapters blocks, in this venv (the main docs test skips them)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.adapters
for module in ("trl", "textarena", "reasoning_gym", "gem", "openenv"):
    pytest.importorskip(module)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "adapters.md"


def docs_test_module():
    """tests/test_docs.py, for its block parser and runner (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("marft_docs_test", ROOT / "tests" / "test_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_adapters_page_code_runs(tmp_path):
    docs = docs_test_module()
    every = docs.code_blocks(PAGE)
    # test_docs pairs a ```text output block with the runnable block before it; these are no-run there
    blocks, outputs = [], []
    for k, b in enumerate(every):
        if b.lang == "python" and "adapters" in b.tags:
            after = every[k + 1] if k + 1 < len(every) else None
            blocks.append(b)
            outputs.append(after.code if after is not None and after.lang == "text" and "output" in after.tags else None)
    assert len(blocks) == 7
    workdir, results = tmp_path / "cwd", tmp_path / "printed.json"
    workdir.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", docs._RUNNER, str(PAGE), str(results)],
        input=json.dumps([(b.line, b.code) for b in blocks]),
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    for block, expected, out in zip(blocks, outputs, json.loads(results.read_text())):
        if expected is not None:
            assert docs._normalise(out) == docs._normalise(expected), f"{PAGE}:{block.line} prints\n{out}"
