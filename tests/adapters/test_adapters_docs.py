"""docs/adapters.md's code runs: its ```python no-run adapters blocks, in this venv (the main docs test skips them)."""

from __future__ import annotations

import pytest
from docs_blocks import ROOT, run_tagged_blocks

pytestmark = pytest.mark.adapters
for module in ("trl", "textarena", "reasoning_gym", "gem", "openenv"):
    pytest.importorskip(module)

PAGE = ROOT / "docs" / "adapters.md"


def test_adapters_page_code_runs(tmp_path):
    runs = run_tagged_blocks(PAGE, "adapters", tmp_path)
    assert len(runs) == 7
    for block, expected, printed in runs:
        if expected is not None:
            assert printed == expected, f"{PAGE}:{block.line} prints\n{printed}"
