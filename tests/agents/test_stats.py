"""The statistics of a result table (``marft_agents.runs.stats``) against hand-computed numbers."""

import math

import pytest

from marft_agents.runs import stats

# Two-sided 95 % critical values of Student's t, as printed in any table (3 decimals).
T_TABLE = [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (9, 2.262), (10, 2.228), (29, 2.045), (30, 2.042), (1000, 1.962)]


@pytest.mark.parametrize(("df", "t"), T_TABLE)
def test_t_quantile_matches_the_printed_table(df, t):
    assert stats.t_quantile(df) == pytest.approx(t, abs=5e-4)
    assert stats.t_two_sided_mass(stats.t_quantile(df), df) == pytest.approx(0.95, abs=1e-12)


def test_t_mass_by_hand():
    assert stats.t_two_sided_mass(1.0, 1) == pytest.approx(0.5)  # Cauchy: atan(1) = pi / 4
    t = 3.0  # df 2: P(|T| < t) = t / sqrt(t^2 + 2)
    assert stats.t_two_sided_mass(t, 2) == pytest.approx(t / math.sqrt(t * t + 2))
    assert stats.t_two_sided_mass(0.0, 7) == 0.0 and stats.t_two_sided_mass(math.inf, 3) == 1.0
    assert stats.t_quantile(4, level=0.90) == pytest.approx(2.132, abs=5e-4)
    with pytest.raises(ValueError, match="df must be an integer of at least 1"):
        stats.t_two_sided_mass(1.0, 0)


# values, mean, standard error, t(0.975, n - 1): the interval is mean ± t · se
INTERVALS = [
    ([1, 2, 3], 2.0, 1 / math.sqrt(3), 4.302653),  # n = 3: ± 4.303 se
    ([1, 2, 3, 4, 5], 3.0, math.sqrt(2.5) / math.sqrt(5), 2.776445),  # n = 5: ± 2.776 se
    ([0.5, 0.7], 0.6, 0.1, 12.706205),  # n = 2: ± 12.706 se
]


@pytest.mark.parametrize(("values", "mean", "se", "t"), INTERVALS)
def test_t_interval_is_mean_plus_minus_t_se(values, mean, se, t):
    i = stats.t_interval(values)
    assert (i.estimate, i.n) == (pytest.approx(mean), len(values)) and i.se == pytest.approx(se)
    assert (i.low, i.high) == (pytest.approx(mean - t * se, abs=1e-5), pytest.approx(mean + t * se, abs=1e-5))


def test_f1s_three_seeds_give_the_interval_the_issue_quotes():
    # F1's changes (results/credit/f1_marft_s*/summary.json: 28, 57 and 31 of 112 after, 24 before)
    changes = [(28 - 24) / 112, (57 - 24) / 112, (31 - 24) / 112]
    i = stats.t_interval(changes)
    assert 100 * i.estimate == pytest.approx(13.095, abs=1e-3) and 100 * i.se == pytest.approx(8.221, abs=1e-3)
    assert (round(100 * i.low, 1), round(100 * i.high, 1)) == (-22.3, 48.5)


def test_one_value_has_no_interval():
    i = stats.t_interval([0.25])
    assert i.estimate == 0.25 and math.isnan(i.low) and math.isnan(i.high) and i.n == 1
    with pytest.raises(ValueError, match="at least one value"):
        stats.t_interval([])


def test_paired_t_by_hand():
    test = stats.paired_t([3, 5, 7], [1, 2, 3])  # differences 2, 3, 4: mean 3, se 1 / sqrt(3)
    assert test.difference.estimate == 3 and test.t == pytest.approx(3 * math.sqrt(3))
    assert test.p == pytest.approx(1 - 3 * math.sqrt(3) / math.sqrt(27 + 2))  # df 2: 1 - t / sqrt(t^2 + 2) = 0.0351
    assert test.p == pytest.approx(0.035099, abs=1e-6)
    same = stats.paired_t([3, 4], [1, 2])  # every difference 2: no spread
    assert same.t == math.inf and same.p == 0.0
    assert math.isnan(stats.paired_t([1], [0]).p)
    with pytest.raises(ValueError, match="one value of each method per seed"):
        stats.paired_t([1, 2], [1])


WILSON = [  # successes, n, low, high (hand-computed; 0 of 10: the textbook 0.2775)
    (11, 112, 0.05573, 0.16735),
    (0, 10, 0.0, 0.27753),
    (10, 10, 0.72247, 1.0),
    (5, 10, 0.23659, 0.76341),
]


@pytest.mark.parametrize(("k", "n", "low", "high"), WILSON)
def test_wilson_interval_by_hand(k, n, low, high):
    i = stats.wilson(k, n)
    assert i.estimate == k / n and (i.low, i.high) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))


def _outcomes(only_a: int, only_b: int, both: int, neither: int) -> tuple[list[bool], list[bool]]:
    pairs = [(True, False)] * only_a + [(False, True)] * only_b + [(True, True)] * both + [(False, False)] * neither
    return [a for a, _ in pairs], [b for _, b in pairs]


MCNEMAR = [  # only a, only b, both, neither, two-sided exact p
    (8, 2, 5, 3, 2 * (1 + 10 + 45) / 1024),  # 0.109
    (6, 0, 4, 4, 2 / 64),  # 0.031
    (5, 5, 1, 1, 1.0),
    (0, 0, 3, 3, 1.0),
]


@pytest.mark.parametrize(("only_a", "only_b", "both", "neither", "p"), MCNEMAR)
def test_mcnemar_exact_by_hand(only_a, only_b, both, neither, p):
    m = stats.mcnemar(*_outcomes(only_a, only_b, both, neither))
    assert (m.only_a, m.only_b, m.both, m.neither) == (only_a, only_b, both, neither) and m.p == pytest.approx(p)


def test_pair_outcomes_matches_problems_by_uid():
    a = [{"uid": "x", "correct": True}, {"uid": "y", "correct": False}, {"uid": "z", "correct": True}]
    b = [{"uid": "z", "correct": False}, {"uid": "x", "correct": True}, {"uid": "y", "correct": True}]
    assert stats.pair_outcomes(a, b) == ([True, False, True], [True, True, False])
    with pytest.raises(ValueError, match="not of the same problems"):
        stats.pair_outcomes(a, b[:2])
    with pytest.raises(ValueError, match="not of the same problems"):
        stats.pair_outcomes(a, [*b[:2], {"uid": "x", "correct": False}])
