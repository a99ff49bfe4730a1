"""Code-repair reward functions, as tables (marft_envs.testing.check_table)."""

import pytest

from marft_envs.rewards.code import extra_tests_score, locate_scores, parse_lines, parse_verdict, repair_reward, review_score
from marft_envs.testing import Case, check_table

F2P, P2P = (0, 1), (2, 3)


def reward(status, passed, mode="partial"):
    return repair_reward(status, passed, F2P, P2P, mode)["reward"]


def test_repair_reward_table():
    check_table(
        reward,
        [
            Case(("ok", [True] * 4), 1.0, id="all pass: full credit"),
            Case(("ok", [True, True, True, False]), 0.75, id="partial credit is the fraction passing"),
            Case(("ok", [False, False, True, True]), 0.5, id="the unfixed program keeps its pass-to-pass"),
            Case(("ok", [True] * 4, "resolved"), 1.0, id="resolved mode: all pass"),
            Case(("ok", [True, True, True, False], "resolved"), 0.0, id="resolved mode: one fails"),
            Case(("syntax_error", []), 0.0, id="syntax error scores 0"),
            Case(("timeout", []), 0.0, id="timeout scores 0"),
            Case(("crash", [True] * 4), 0.0, id="a crash scores 0 whatever it claims"),
            Case(("import_error", []), 0.0, id="crash at import scores 0"),
            Case(("ok", []), 0.0, id="no tests ran"),
        ],
    )


def test_swe_bench_components():
    parts = repair_reward("ok", [True, False, True, False], F2P, P2P)
    assert parts == {"tests_passed": 0.5, "resolved": 0.0, "fail_to_pass": 0.5, "pass_to_pass": 0.5, "reward": 0.5}
    parts = repair_reward("ok", [True, True], None, None)
    assert set(parts) == {"tests_passed", "resolved", "reward"}  # unknown split: no f2p/p2p
    assert repair_reward("timeout", [], F2P, P2P)["fail_to_pass"] == 0.0
    with pytest.raises(ValueError, match="unknown reward mode 'binary'"):
        repair_reward("ok", [True], mode="binary")


def test_parse_lines_table():
    check_table(
        parse_lines,
        [
            Case(("Lines: 3, 7",), (3, 7)),
            Case(("line 4",), (4,)),
            Case(("The bug is on L12.",), (12,)),
            Case(("lines 3-5 and 9",), (3, 4, 5, 9)),
            Case(("Lines: 2 to 3\nbecause 100 items",), (2, 3)),
            Case(("probably 6",), (6,)),
            Case(("no idea",), ()),
            Case(("lines 1-100000",), ()),
            Case(("line 0",), ()),
        ],
    )


def test_locate_scores():
    assert locate_scores((3,), (3,)) == {"locate_f1": 1.0, "locate_exact": 1.0}
    assert locate_scores((3, 4), (3,)) == {"locate_f1": pytest.approx(2 / 3), "locate_exact": 0.0}
    assert locate_scores((5,), (3,)) == {"locate_f1": 0.0, "locate_exact": 0.0}
    assert locate_scores((), (3,)) == {"locate_f1": 0.0, "locate_exact": 0.0}


def test_tester_and_reviewer_scores():
    assert extra_tests_score([True, True, False], [False, True, False]) == pytest.approx(1 / 3)
    assert extra_tests_score([], []) == 0.0
    check_table(
        parse_verdict,
        [
            Case(("ACCEPT",), True),
            Case(("I reject this patch.",), False),
            Case(("Accepted, but REJECT...",), True),
            Case(("looks fine",), None),
        ],
    )
    assert review_score(True, True) == 1.0 and review_score(False, True) == 0.0
    assert review_score(False, False) == 1.0 and review_score(None, False) == 0.0
