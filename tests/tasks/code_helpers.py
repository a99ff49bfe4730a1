"""Shared by the code-repair tests: let the project's own (non-hostile) programs run on any tier."""

import pytest

from marft_envs.sandbox import detect_isolation


@pytest.fixture(autouse=True)
def own_programs_may_run_on_a_weak_tier(monkeypatch):
    # These tests run oracle patches, known bugs and the harness's own checks — never hostile code —
    # so on a machine without contained isolation they opt in to the weak tier rather than skip.
    if not detect_isolation().contained:
        monkeypatch.setenv("MARFT_SANDBOX_ALLOW_WEAK", "1")
