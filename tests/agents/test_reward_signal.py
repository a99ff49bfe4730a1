"""The reward-signal maths: diagnostics, dropped groups, the difficulty sampler, the warnings.

Every expected number is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from agent_helpers import episode

from marft_agents.algorithms.advantages import spread
from marft_agents.runs.report import zero_reward_warning
from marft_agents.signal.curriculum import DifficultySampler, level_weights, running_success, sampler_rng, succeeded
from marft_agents.signal.diagnostics import groups_of, has_spread, no_signal, no_signal_warning, options_to_try, signal_metrics, summary_of
from marft_agents.signal.dynamic import collect_informative, draw_indices, pick_groups


def solo(index: int, reward: float):
    return episode(index, [[("solver_0", reward)]])


# ------------------------------------------------------------------------------------- diagnostics


def test_signal_metrics_of_groups_hand_computed():
    # 3 groups of 2 (index // 2): returns [0, 0] flat, [1, 0] spread, [1, 1] flat
    rewards = [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    metrics = signal_metrics([solo(i, r) for i, r in enumerate(rewards)], group_size=2)
    # rewarded episodes: 3 of 6 = 0.5 ; zero-spread groups: 2 of 3 ; solver_0's mean reward 3/6 = 0.5, its positive rewards 3/6
    assert metrics == {
        "signal/rewarded_frac": 0.5,
        "signal/zero_spread_frac": pytest.approx(2 / 3),
        "signal/solver_0/reward": 0.5,
        "signal/solver_0/rewarded_frac": 0.5,
    }


def test_without_groups_the_batch_is_one_group_and_roles_are_separate():
    chain = [episode(0, [[("reasoner_0", 0.0), ("actor_0", 1.0)]]), episode(1, [[("reasoner_0", 0.0), ("actor_0", 0.0)]])]
    metrics = signal_metrics(chain, group_size=1)
    # returns [1, 0]: the one group (the batch) has spread -> 0 ; reasoner 0/2 = 0, actor 1/2 = 0.5
    assert metrics["signal/zero_spread_frac"] == 0.0 and metrics["signal/rewarded_frac"] == 0.5
    assert metrics["signal/reasoner_0/reward"] == 0.0 and metrics["signal/actor_0/reward"] == 0.5
    flat = signal_metrics([solo(0, 0.0), solo(1, 0.0)], group_size=1)
    assert flat["signal/zero_spread_frac"] == 1.0 and no_signal(flat)
    assert signal_metrics([], group_size=4) == {}


def test_a_nonzero_reward_that_cancels_still_counts_as_rewarded():
    # rewards +1 then -1: the return is 0, but the episode was rewarded
    e = episode(0, [[("a", 1.0)], [("a", -1.0)]])
    assert signal_metrics([e, solo(1, 0.0)], group_size=2)["signal/rewarded_frac"] == 0.5


def test_groups_and_spread():
    eps = [solo(i, 0.0) for i in (4, 5, 0, 1)]
    assert [[e.index for e in g] for g in groups_of(eps, 2)] == [[4, 5], [0, 1]]  # first appearance order
    assert not has_spread([3.0]) and not has_spread([2.0, 2.0]) and has_spread([2.0, 2.5])
    # population std of [1, 3] = 1 ; of the masked [1, 3] out of [1, 3, 100] = 1 ; one entry: 0
    assert spread(torch.tensor([1.0, 3.0])) == pytest.approx(1.0)
    assert spread(torch.tensor([1.0, 3.0, 100.0]), torch.tensor([True, True, False])) == pytest.approx(1.0)
    assert spread(torch.tensor([5.0])) == 0.0


def test_summary_counts_updates_without_signal():
    rows = [
        {"signal/rewarded_frac": 0.0, "signal/zero_spread_frac": 1.0},
        {"signal/rewarded_frac": 0.5, "signal/zero_spread_frac": 0.5, "signal/advantage_std": 2.0},
    ]
    # means: rewarded (0 + 0.5)/2 = 0.25, zero spread (1 + 0.5)/2 = 0.75, advantage std only in row 2: 2.0
    assert summary_of(rows) == {
        "rewarded_frac": 0.25,
        "zero_spread_frac": 0.75,
        "advantage_std": 2.0,
        "updates_without_signal": 1,
        "updates": 2,
    }


# --------------------------------------------------------------------------------- dynamic sampling


def test_pick_groups_keeps_the_informative_ones_first_then_fills_in_draw_order():
    returns = [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 1, 0]]
    # informative: groups 1, 3, 4 ; asked for 2 -> groups 1 and 3, none filled
    assert pick_groups([has_spread(r) for r in returns], 2) == ([1, 3], 2)
    # asked for 5: the 3 informative + the first 2 flat ones (0, 2), in draw order
    assert pick_groups([has_spread(r) for r in returns], 5) == ([0, 1, 2, 3, 4], 3)
    # asked for 4: 3 informative + flat group 0
    assert pick_groups([has_spread(r) for r in returns], 4) == ([0, 1, 3, 4], 3)
    assert pick_groups([has_spread([0, 0]), has_spread([2, 2])], 1) == ([0], 0)  # nothing informative: the first group


def test_draw_indices_never_collide_and_keep_groups_aligned():
    # E = 8 episodes per update, 3 updates: draw d of update u starts at d*3*8 + u*8
    assert draw_indices(0, 1, 8, 3) == range(8, 16)
    assert draw_indices(1, 0, 8, 3) == range(24, 32) and draw_indices(2, 2, 8, 3) == range(64, 72)
    seen = [i for d in range(4) for u in range(3) for i in draw_indices(d, u, 8, 3)]
    assert len(seen) == len(set(seen))


def fake_collect(rewards_by_first_index):
    """collect(indices) giving each episode the reward its draw's table says (one table per first index)."""
    calls = []

    def collect(indices):
        calls.append(indices)
        table = rewards_by_first_index[indices.start]
        return [solo(i, r) for i, r in zip(indices, table)]

    return collect, calls


def test_dynamic_sampling_draws_until_the_batch_is_informative():
    # E = 4, G = 2 -> 2 groups wanted ; updates = 10 so draw d of update 0 starts at 40 d
    collect, calls = fake_collect(
        {
            0: [0, 0, 1, 0],  # groups (0,1) flat, (2,3) informative
            40: [1, 1, 0, 0],  # both flat
            80: [0, 1, 5, 5],
        }
    )  # (80,81) informative, (82,83) flat
    batch, metrics = collect_informative(collect, update=0, episodes_per_update=4, updates=10, group_size=2, max_draws=5)
    # 3 draws, 6 groups drawn, 2 informative kept: groups (2,3) and (80,81), in draw order
    assert [c.start for c in calls] == [0, 40, 80]
    assert [e.index for e in batch] == [2, 3, 80, 81]
    assert metrics == {"signal/draws": 3.0, "signal/groups_drawn": 6.0, "signal/informative_groups": 2.0}


def test_dynamic_sampling_stops_after_max_draws_and_fills_the_batch():
    collect, calls = fake_collect({0: [0, 0, 0, 0], 40: [0, 1, 0, 0], 80: [0, 1, 0, 1]})
    batch, metrics = collect_informative(collect, update=0, episodes_per_update=4, updates=10, group_size=2, max_draws=2)
    # 2 draws allowed: informative (40,41) ; filled with the first flat group (0,1): the batch stays 4 episodes
    assert len(calls) == 2 and [e.index for e in batch] == [0, 1, 40, 41]
    assert metrics["signal/informative_groups"] == 1.0 and metrics["signal/groups_drawn"] == 4.0
    # max_draws=1 is the plain collection, whatever it holds
    collect, calls = fake_collect({0: [0, 0, 0, 0]})
    batch, _ = collect_informative(collect, update=0, episodes_per_update=4, updates=10, group_size=2, max_draws=1)
    assert [e.index for e in batch] == [0, 1, 2, 3] and len(calls) == 1


def test_dynamic_sampling_starts_no_draw_once_a_stop_is_asked_for():
    flat = {40 * d: [0, 0, 0, 0] for d in range(100)}  # never informative: all 100 draws would run
    for stop_after in (1, 2):  # the first draw always runs: it is the batch
        collect, calls = fake_collect(flat)
        stopping = functools.partial(lambda calls, n: len(calls) >= n, calls, stop_after)  # asked for while draw n plays
        sizes = dict(update=0, episodes_per_update=4, updates=10, group_size=2)
        batch, metrics = collect_informative(collect, **sizes, max_draws=100, stopping=stopping)
        assert len(calls) == stop_after and metrics["signal/draws"] == stop_after and [e.index for e in batch] == [0, 1, 2, 3]


# --------------------------------------------------------------------------------------- curriculum


def test_level_weights_hand_computed():
    rates = {0: 1.0, 1: 0.5, 2: 0.0, 3: None}
    # band (0, 1) exclusive: level 1 inside -> 1, level 3 untried -> 1, levels 0 and 2 outside -> floor 0.1
    # total 2.2 -> [0.1, 1, 0.1, 1] / 2.2
    w = level_weights(rates, low=0.0, high=1.0, floor=0.1)
    assert w == pytest.approx({0: 1 / 22, 1: 10 / 22, 2: 1 / 22, 3: 10 / 22})
    # a narrower band (0.2, 0.8): 0.5 still inside; floor 0: only levels 1 and 3, half each
    assert level_weights(rates, low=0.2, high=0.8, floor=0.0) == pytest.approx({0: 0, 1: 0.5, 2: 0, 3: 0.5})
    # every level outside with floor 0: uniform rather than a division by zero
    assert level_weights({1: 0.0, 2: 1.0}, low=0.0, high=1.0, floor=0.0) == {1: 0.5, 2: 0.5}


def test_running_success_is_the_share_of_the_window():
    assert running_success([]) is None
    assert running_success([True, False, False, True]) == 0.5


def outcome(index, solved, reward=0.0):
    e = solo(index, reward)
    e.solved = solved
    return e


def test_sampler_records_outcomes_per_level_in_a_window():
    sampler = DifficultySampler([1, 2], window=3, low=0.0, high=1.0, floor=0.1)
    assert sampler.probabilities() == {1: 0.5, 2: 0.5}  # nothing tried yet
    levels = sampler.assign(range(8, 12), group_size=2, rng=np.random.default_rng(0))
    assert levels[8] == levels[9] and levels[10] == levels[11]  # one level per group
    sampler.level_of = {0: 1, 1: 1, 2: 1, 3: 1, 4: 2, 5: 2}  # say which level each index played
    sampler.record(
        [outcome(0, True), outcome(1, False), outcome(2, False), outcome(3, False), outcome(4, False), outcome(5, False), outcome(99, True)]
    )  # 99 was never assigned: ignored
    # level 1 keeps its last 3 of [T, F, F, F] -> [F, F, F] = 0 ; level 2 [F, F] = 0 -> both too hard
    assert sampler.outcomes == {1: [False, False, False], 2: [False, False]}
    sampler.level_of = {6: 2}
    sampler.record([outcome(6, None, reward=0.5)])  # no `solved`: a positive return counts as solved
    # level 2: [F, F, T] = 1/3, inside the band -> weight 1 ; level 1: 0 -> 0.1 ; total 1.1
    assert sampler.probabilities() == pytest.approx({1: 0.1 / 1.1, 2: 1 / 1.1})
    assert sampler.metrics()["signal/level_2/success"] == pytest.approx(1 / 3)
    restored = DifficultySampler([1, 2], window=3, low=0.0, high=1.0, floor=0.1)
    restored.load_state_dict(sampler.state_dict())
    assert restored.outcomes == sampler.outcomes
    with pytest.raises(ValueError, match="not the env's"):
        DifficultySampler([1, 2, 3], window=3, low=0.0, high=1.0, floor=0.1).load_state_dict(sampler.state_dict())


def test_sampler_draws_are_reproducible_and_follow_the_weights():
    sampler = DifficultySampler([0, 1], window=10, low=0.0, high=1.0, floor=0.0)
    sampler.outcomes = {0: [True] * 10, 1: [True, False]}  # level 0 too easy (weight 0), level 1 at 0.5
    levels = sampler.assign(range(0, 40), group_size=4, rng=sampler_rng(7, 3, 0))
    assert set(levels.values()) == {1}
    a = DifficultySampler([0, 1], window=10, low=0.0, high=1.0, floor=0.1).assign(range(16), 2, sampler_rng(7, 3, 0))
    b = DifficultySampler([0, 1], window=10, low=0.0, high=1.0, floor=0.1).assign(range(16), 2, sampler_rng(7, 3, 0))
    assert a == b
    assert succeeded(outcome(0, False, reward=1.0)) is False  # the env's `solved` wins over the return


# ----------------------------------------------------------------------------------------- warnings


def test_the_warnings_name_only_options_not_in_use():
    common = dict(
        env_kwargs={}, dynamic_sampling=False, curriculum=False, init_from=None, grouped=True, has_difficulties=True, has_format_reward=True
    )
    on_real = options_to_try(model="smollm2-135m-instruct", **common)
    assert not any("model=" in o for o in on_real)
    assert [o.split(" ")[0] for o in on_real] == [
        "env_kwargs.format_reward=0.1",
        "signal.curriculum=true",
        "signal.dynamic_sampling=true",
        "init_from=RUN_DIR",
    ]
    on_embedded = options_to_try(model="embedded", **common)
    assert on_embedded[-1].startswith("model=smollm2-135m-instruct")
    used = options_to_try(
        model="x",
        env_kwargs={"format_reward": 0.1},
        dynamic_sampling=True,
        curriculum=True,
        init_from="runs/a",
        grouped=True,
        has_difficulties=True,
        has_format_reward=True,
    )
    assert used == []
    critic = options_to_try(model="x", **{**common, "grouped": False, "has_difficulties": False})
    assert "algo=grpo with signal.dynamic_sampling=true" in critic and not any("curriculum" in o for o in critic)

    line = no_signal_warning(3, {"signal/rewarded_frac": 0.25, "signal/zero_spread_frac": 1.0}, on_real)
    assert "\n" not in line and "update 3 had no reward signal" in line and "25%" in line
    assert "smollm2" not in line and "When the reward is zero" in line
    # What the step did: by a group-relative learner, skipped, or taken with the skip switched off.
    for skipped, effect in [
        (None, "so every advantage was 0"),
        (1.0, "so no policy step was taken"),
        (0.0, "yet the policy took a step on the critic's advantages (skip_equal_returns=false)"),
    ]:
        metrics = {"signal/rewarded_frac": 0.0} | ({} if skipped is None else {"policy/skipped_equal_returns": skipped})
        assert effect in no_signal_warning(1, metrics, on_real)
    assert "try a real model" not in zero_reward_warning(2, "smollm2-135m-instruct", on_real)
    assert "model=smollm2-135m-instruct" not in zero_reward_warning(2, "smollm2-135m-instruct", on_real)
    assert "try a real model such as model=smollm2-135m-instruct" in zero_reward_warning(2, "embedded", on_embedded)
    assert "model cannot do the task" in zero_reward_warning(2)
