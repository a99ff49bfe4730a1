"""Run a page's ```python no-run TAG blocks in this venv, with tests/test_docs.py's parser and runner."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def docs_test_module():
    """tests/test_docs.py, for its block parser and runner (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("marft_docs_test", ROOT / "tests" / "test_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run_tagged_blocks(page: Path, tag: str, tmp_path: Path) -> list[tuple[object, str | None, str]]:
    """Every python block of ``page`` tagged ``tag``, run in one fresh interpreter in order.

    Returns ``(block, expected, printed)`` per block: ``expected`` is the ```text output block that
    follows it (test_docs pairs them so), else None; ``printed`` is what the block printed, normalised
    as test_docs normalises (so is ``expected``).
    """
    docs = docs_test_module()
    every = docs.code_blocks(page)
    blocks, expected = [], []
    for k, b in enumerate(every):
        if b.lang == "python" and tag in b.tags:
            after = every[k + 1] if k + 1 < len(every) else None
            blocks.append(b)
            expected.append(after.code if after is not None and after.lang == "text" and "output" in after.tags else None)
    workdir, results = tmp_path / "cwd", tmp_path / "printed.json"
    workdir.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", docs._RUNNER, str(page), str(results)],
        input=json.dumps([(b.line, b.code) for b in blocks]),
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    printed = json.loads(results.read_text())
    return [(b, None if e is None else docs._normalise(e), docs._normalise(p)) for b, e, p in zip(blocks, expected, printed)]
