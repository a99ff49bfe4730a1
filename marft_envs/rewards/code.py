"""Rewards for code repair: plain functions of test outcomes and of the agents' text.

- :func:`repair_reward` — a patch's reward from its test run, with SWE-bench's semantics: the tests
  the buggy program failed (*fail-to-pass*) must now pass, those it passed (*pass-to-pass*) must still
  pass. ``mode="partial"``: the fraction of tests passing (1.0 only when all pass); ``"resolved"``:
  1.0 when all pass, else 0.0. A run that did not get to run the tests (syntax error, crash at
  import, timeout, crash) scores 0 in both modes.
- :func:`parse_lines` and :func:`locate_scores` — grade a locator's answer against the bug's lines.
- :func:`extra_tests_score` — the fraction of a tester's asserts that are right about the fix and catch the bug.
- :func:`parse_verdict` and :func:`review_score` — grade a reviewer's ACCEPT / REJECT.

All pure and deterministic; the env runs the sandbox and passes the outcomes in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

REWARD_MODES = ("partial", "resolved")
MAX_RANGE = 200  # "lines 1-100000" is not a location


def repair_reward(
    status: str,
    passed: Sequence[bool],
    fail_to_pass: Sequence[int] | None = None,
    pass_to_pass: Sequence[int] | None = None,
    mode: str = "partial",
) -> dict[str, float]:
    """Reward components of one patch: ``reward``, ``tests_passed``, ``resolved`` and, when the task
    says which tests are which, ``fail_to_pass`` and ``pass_to_pass`` (fractions passing)."""
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode {mode!r}: use one of {list(REWARD_MODES)}")
    ran = status == "ok" and len(passed) > 0
    passed = [bool(p) for p in passed] if ran else []
    out = {"tests_passed": sum(passed) / len(passed) if ran else 0.0, "resolved": float(ran and all(passed))}
    for name, indices in (("fail_to_pass", fail_to_pass), ("pass_to_pass", pass_to_pass)):
        if indices is not None:
            out[name] = (sum(passed[i] for i in indices) / len(indices) if indices else 1.0) if ran else 0.0
    out["reward"] = out["tests_passed"] if mode == "partial" else out["resolved"]
    return out


_LINES_WORD = re.compile(r"\blines?\b|\bL(?=\d)", re.IGNORECASE)
_NUMBER_OR_RANGE = re.compile(r"(\d+)\s*(?:-|–|to|\.\.)\s*(\d+)|(\d+)")


def parse_lines(text: str) -> tuple[int, ...]:
    """Line numbers named in ``text``: the numbers after the first "line"/"lines", else every number.

    ``"Lines: 3, 5-6"`` -> ``(3, 5, 6)``. Ranges longer than 200 lines are ignored.
    """
    match = _LINES_WORD.search(text)
    if match:
        first_line = text[match.end() :].splitlines()[:1]
        text = first_line[0] if first_line else ""
    out: set[int] = set()
    for a, b, single in _NUMBER_OR_RANGE.findall(text):
        if single:
            out.add(int(single))
        elif 0 <= int(b) - int(a) <= MAX_RANGE:
            out.update(range(int(a), int(b) + 1))
    return tuple(sorted(n for n in out if n > 0))


def locate_scores(predicted: Sequence[int], gold: Sequence[int]) -> dict[str, float]:
    """``locate_f1`` (F1 of the predicted line set against the bug's lines) and ``locate_exact`` (1.0 if equal)."""
    p, g = set(predicted), set(gold)
    if not p or not g:
        return {"locate_f1": float(p == g and bool(g)), "locate_exact": float(p == g and bool(g))}
    hits = len(p & g)
    f1 = 0.0 if hits == 0 else 2 * hits / (len(p) + len(g))
    return {"locate_f1": f1, "locate_exact": float(p == g)}


def extra_tests_score(on_solution: Sequence[bool], on_buggy: Sequence[bool]) -> float:
    """Fraction of a tester's tests that pass on the correct program and fail on the buggy one."""
    if not on_solution:
        return 0.0
    return sum(s and not b for s, b in zip(on_solution, on_buggy)) / len(on_solution)


_VERDICT = re.compile(r"\b(ACCEPT|REJECT)(?:S|ED)?\b", re.IGNORECASE)


def parse_verdict(text: str) -> bool | None:
    """``True`` for ACCEPT, ``False`` for REJECT (the first one named), ``None`` if neither."""
    match = _VERDICT.search(text)
    return None if match is None else match.group(1).upper() == "ACCEPT"


def review_score(verdict: bool | None, resolved: bool) -> float:
    """1.0 when the reviewer accepted a patch that resolves the bug or rejected one that does not."""
    return float(verdict is not None and verdict == resolved)
