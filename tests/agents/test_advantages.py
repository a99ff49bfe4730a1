"""Hand-computed checks of marft_agents.algorithms.advantages (chain GAE, normalisation, GRPO groups).

Every expected number below is worked out by hand in the comment next to it; none comes from the
function under test. Notation: agent-steps k = 0..T-1 in acting order, ``A_k = delta_k +
disc_k * lam * (1 - done_k) * A_{k+1}`` with ``disc_k = gamma_agent`` inside a round and ``gamma``
at a round's last agent.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from marft_agents.algorithms.advantages import chain_gae, group_relative, normalize

F, T_ = False, True


def _t(x):
    return torch.tensor(x, dtype=torch.float32)


def _b(x):
    return torch.tensor(x, dtype=torch.bool)


def _close(got, expected, atol=1e-6):
    assert_close(got, _t(expected), rtol=0, atol=atol)


# ----------------------------------------------------------------------------------------- chain_gae


def test_single_round_two_agents_ends_episode():
    # reasoner (k=0) -> actor (k=1); team reward on the actor; the round ends the episode.
    adv, ret = chain_gae(_t([0.0, 1.0]), _t([0.5, 0.2]), _b([F, T_]), _b([F, T_]), gamma=0.9, gamma_agent=1.0, lam=0.5)
    # k=1 (done): delta_1 = 1 + 0.9*0*V - 0.2 = 0.8 ; A_1 = 0.8
    # k=0 (in round, gamma_agent=1): delta_0 = 0 + 1.0*0.2 - 0.5 = -0.3 ; A_0 = -0.3 + 1.0*0.5*0.8 = 0.1
    _close(adv, [0.1, 0.8])
    # returns = A + V = [0.1+0.5, 0.8+0.2]
    _close(ret, [0.6, 1.0])
    assert adv.shape == (2,) and adv.dtype == torch.float32


def test_single_round_gamma_agent_half():
    adv, ret = chain_gae(_t([0.0, 1.0]), _t([0.5, 0.2]), _b([F, T_]), _b([F, T_]), gamma=0.9, gamma_agent=0.5, lam=0.5)
    # k=1: A_1 = 1 - 0.2 = 0.8
    # k=0: delta_0 = 0 + 0.5*0.2 - 0.5 = -0.4 ; A_0 = -0.4 + 0.5*0.5*0.8 = -0.4 + 0.2 = -0.2
    _close(adv, [-0.2, 0.8])
    _close(ret, [0.3, 1.0])  # [-0.2+0.5, 0.8+0.2]


# Two rounds with feedback: [a1, b1 | a2, b2] in ONE episode, done only on b2.
R2 = [0.0, 0.0, 0.0, 1.0]
V2 = [0.5, 0.4, 0.6, 0.8]
ROUND_ENDS2 = [F, T_, F, T_]
DONES2 = [F, F, F, T_]


def test_two_rounds_feedback_only_last_done():
    adv, ret = chain_gae(_t(R2), _t(V2), _b(ROUND_ENDS2), _b(DONES2), gamma=0.9, gamma_agent=0.5, lam=0.5)
    # k=3 (done):            delta = 1 - 0.8 = 0.2                  ; A_3 = 0.2
    # k=2 (in round, 0.5):   delta = 0 + 0.5*0.8 - 0.6 = -0.2       ; A_2 = -0.2 + 0.5*0.5*0.2 = -0.15
    # k=1 (round end, 0.9):  delta = 0 + 0.9*0.6 - 0.4 = 0.14       ; A_1 = 0.14 + 0.9*0.5*(-0.15) = 0.0725
    # k=0 (in round, 0.5):   delta = 0 + 0.5*0.4 - 0.5 = -0.3       ; A_0 = -0.3 + 0.5*0.5*0.0725 = -0.281875
    _close(adv, [-0.281875, 0.0725, -0.15, 0.2])
    # returns = A + V = [-0.281875+0.5, 0.0725+0.4, -0.15+0.6, 0.2+0.8]
    _close(ret, [0.218125, 0.4725, 0.45, 1.0])
    _close(ret, (adv + _t(V2)).tolist())


def test_lam_zero_is_one_step_td_and_discounts_sit_where_they_should():
    # lam = 0: A_k = delta_k exactly, which isolates which discount multiplies which link.
    adv, _ = chain_gae(_t(R2), _t(V2), _b(ROUND_ENDS2), _b(DONES2), gamma=0.9, gamma_agent=0.5, lam=0.0)
    # delta_3 = 1 - 0.8 = 0.2
    # delta_2 = 0 + gamma_agent*V_3 - V_2 = 0.5*0.8 - 0.6 = -0.2
    # delta_1 = 0 + gamma*V_2 - V_1       = 0.9*0.6 - 0.4 = 0.14
    # delta_0 = 0 + gamma_agent*V_1 - V_0 = 0.5*0.4 - 0.5 = -0.3
    _close(adv, [-0.3, 0.14, -0.2, 0.2])

    # swap the two discounts: gamma=0.5 between rounds, gamma_agent=0.9 inside a round
    adv, _ = chain_gae(_t(R2), _t(V2), _b(ROUND_ENDS2), _b(DONES2), gamma=0.5, gamma_agent=0.9, lam=0.0)
    # delta_3 = 0.2 ; delta_2 = 0.9*0.8 - 0.6 = 0.12
    # delta_1 = 0.5*0.6 - 0.4 = -0.1 ; delta_0 = 0.9*0.4 - 0.5 = -0.14
    _close(adv, [-0.14, -0.1, 0.12, 0.2])


def test_lam_one_is_monte_carlo_like():
    adv, ret = chain_gae(_t(R2), _t(V2), _b(ROUND_ENDS2), _b(DONES2), gamma=0.9, gamma_agent=0.5, lam=1.0)
    # lam = 1 telescopes: A_k = G_k - V_k with G_k the chain-discounted reward-to-go:
    # G_3 = 1 ; G_2 = 0 + 0.5*1 = 0.5 ; G_1 = 0 + 0.9*0.5 = 0.45 ; G_0 = 0 + 0.5*0.45 = 0.225
    # A = [0.225-0.5, 0.45-0.4, 0.5-0.6, 1-0.8]
    _close(adv, [-0.275, 0.05, -0.1, 0.2])
    _close(ret, [0.225, 0.45, 0.5, 1.0])
    # the Monte Carlo returns do not depend on the values
    _, ret2 = chain_gae(_t(R2), _t([3.0, -1.0, 0.25, 7.0]), _b(ROUND_ENDS2), _b(DONES2), gamma=0.9, gamma_agent=0.5, lam=1.0)
    _close(ret2, [0.225, 0.45, 0.5, 1.0], atol=1e-5)


def test_bootstrap_last_value_when_not_done():
    adv, ret = chain_gae(_t([0.0, 1.0]), _t([0.5, 0.2]), _b([F, T_]), _b([F, F]), gamma=0.9, gamma_agent=1.0, lam=0.5, last_value=2.0)
    # k=1 (round end, not done): delta_1 = 1 + 0.9*2.0 - 0.2 = 2.6
    #                            A_1 = 2.6 (no advantage beyond the stream)
    # k=0: delta_0 = 0 + 1.0*0.2 - 0.5 = -0.3 ; A_0 = -0.3 + 1.0*0.5*2.6 = 1.0
    _close(adv, [1.0, 2.6])
    _close(ret, [1.5, 2.8])  # [1.0+0.5, 2.6+0.2]


def test_last_value_ignored_when_done():
    adv, _ = chain_gae(_t([0.0, 1.0]), _t([0.5, 0.2]), _b([F, T_]), _b([F, T_]), gamma=0.9, gamma_agent=1.0, lam=0.5, last_value=100.0)
    _close(adv, [0.1, 0.8])  # same as the single-round case: done masks the bootstrap


def test_batch_of_two_envs_with_different_patterns():
    rewards = _t([R2, [0.0, 1.0, 0.0, 0.0]])
    values = _t([V2, [0.5, 0.2, 0.4, 0.1]])
    round_ends = _b([ROUND_ENDS2, [F, T_, F, T_]])
    # env 0: one 2-round episode, done at the end; env 1: a 1-round episode, then an unfinished one
    dones = _b([DONES2, [F, T_, F, F]])
    adv, ret = chain_gae(rewards, values, round_ends, dones, gamma=0.9, gamma_agent=0.5, lam=0.5, last_value=_t([7.0, 2.0]))
    # env 0: as test_two_rounds_feedback_only_last_done (its last_value 7.0 is masked by done)
    # env 1: k=3 (round end, not done): delta = 0 + 0.9*2.0 - 0.1 = 1.7     ; A_3 = 1.7
    #        k=2 (in round, 0.5):       delta = 0 + 0.5*0.1 - 0.4 = -0.35   ; A_2 = -0.35 + 0.5*0.5*1.7 = 0.075
    #        k=1 (done):                delta = 1 - 0.2 = 0.8               ; A_1 = 0.8
    #        k=0 (in round, 0.5):       delta = 0 + 0.5*0.2 - 0.5 = -0.4    ; A_0 = -0.4 + 0.5*0.5*0.8 = -0.2
    _close(adv, [[-0.281875, 0.0725, -0.15, 0.2], [-0.2, 0.8, 0.075, 1.7]])
    # env 1 returns: [-0.2+0.5, 0.8+0.2, 0.075+0.4, 1.7+0.1]
    _close(ret, [[0.218125, 0.4725, 0.45, 1.0], [0.3, 1.0, 0.475, 1.8]])
    assert adv.shape == (2, 4) and ret.shape == (2, 4)


def test_episode_boundary_keeps_agent_link_of_first_round_after_it():
    """Regression: an episode boundary cuts one link only. [ep1: a1, b1 | ep2: a2, b2], done on b1 and b2 only."""
    rewards, values = _t([0.0, 1.0, 0.0, 2.0]), _t([0.5, 0.2, 0.4, 0.1])
    round_ends, dones = _b([F, T_, F, T_]), _b([F, T_, F, T_])
    adv, ret = chain_gae(rewards, values, round_ends, dones, gamma=0.9, gamma_agent=1.0, lam=0.5)
    # k=3 (b2, done):  delta = 2 - 0.1 = 1.9                   ; A_3 = 1.9
    # k=2 (a2 -> b2):  delta = 0 + 1.0*0.1 - 0.4 = -0.3         ; A_2 = -0.3 + 1.0*0.5*1.9 = 0.65
    #                  (the buggy reference zeroed this link: A_2 = 0 - 0.4 = -0.4)
    # k=1 (b1, done):  delta = 1 - 0.2 = 0.8                    ; A_1 = 0.8   (nothing from ep2)
    # k=0 (a1 -> b1):  delta = 0 + 1.0*0.2 - 0.5 = -0.3        ; A_0 = -0.3 + 1.0*0.5*0.8 = 0.1
    _close(adv, [0.1, 0.8, 0.65, 1.9])
    _close(ret, [0.6, 1.0, 1.05, 2.0])  # A + V
    assert adv[2].item() != pytest.approx(-0.4)

    # each episode on its own gives the same numbers
    a1, _ = chain_gae(rewards[:2], values[:2], round_ends[:2], dones[:2], gamma=0.9, gamma_agent=1.0, lam=0.5)
    a2, _ = chain_gae(rewards[2:], values[2:], round_ends[2:], dones[2:], gamma=0.9, gamma_agent=1.0, lam=0.5)
    _close(a1, [0.1, 0.8])
    _close(a2, [0.65, 1.9])

    # nothing leaks from episode 2 into episode 1: change ep2 wildly, ep1 advantages stay put
    adv_b, _ = chain_gae(_t([0.0, 1.0, -50.0, 80.0]), _t([0.5, 0.2, 9.0, -4.0]), round_ends, dones, gamma=0.9, gamma_agent=1.0, lam=0.5)
    _close(adv_b[:2], [0.1, 0.8])


def test_episode_boundary_inside_a_batch_with_gamma_agent_half():
    # same boundary pattern, with gamma_agent = 0.5 so the a2 -> b2 link's discount shows
    adv, _ = chain_gae(
        _t([[0.0, 1.0, 0.0, 2.0]]),
        _t([[0.5, 0.2, 0.4, 0.1]]),
        _b([[F, T_, F, T_]]),
        _b([[F, T_, F, T_]]),
        gamma=0.9,
        gamma_agent=0.5,
        lam=0.5,
    )
    # k=3: A_3 = 1.9 ; k=2: delta = 0.5*0.1 - 0.4 = -0.35 ; A_2 = -0.35 + 0.5*0.5*1.9 = 0.125
    # k=1: A_1 = 0.8 ; k=0: delta = 0.5*0.2 - 0.5 = -0.4 ; A_0 = -0.4 + 0.5*0.5*0.8 = -0.2
    _close(adv, [[-0.2, 0.8, 0.125, 1.9]])


# ----------------------------------------------------------------------------------------- normalize


def test_normalize_hand_mean_and_population_std():
    out = normalize(_t([1.0, 2.0, 3.0, 4.0]))
    # mean = 2.5 ; var (population) = (2.25 + 0.25 + 0.25 + 2.25)/4 = 1.25 ; std = sqrt(1.25) = 1.1180340
    # (1 - 2.5)/1.1180340 = -1.3416408 ; (2 - 2.5)/1.1180340 = -0.4472136
    _close(out, [-1.3416408, -0.4472136, 0.4472136, 1.3416408], atol=1e-5)


def test_normalize_keeps_exact_zeros_as_real_values():
    """Regression: exact zeros are advantages, not padding."""
    out = normalize(_t([0.0, 2.0, 0.0, -2.0]))
    # mean = 0 ; var = (0 + 4 + 0 + 4)/4 = 2 ; std = sqrt(2) ; -> [0, sqrt2, 0, -sqrt2]
    s2 = math.sqrt(2.0)
    _close(out, [0.0, s2, 0.0, -s2], atol=1e-5)
    assert torch.isfinite(out).all()

    out = normalize(_t([0.0, 0.0, 0.0, 4.0]))
    # zeros count: mean = 1 ; var = (1 + 1 + 1 + 9)/4 = 3 ; std = sqrt(3)
    # zeros -> (0 - 1)/sqrt3 = -0.5773503 ; 4 -> (4 - 1)/sqrt3 = sqrt3 = 1.7320508
    # (treating zeros as padding would leave one valid value -> std 0 -> NaN / garbage)
    _close(out, [-0.5773503, -0.5773503, -0.5773503, 1.7320508], atol=1e-5)
    assert torch.isfinite(out).all()


def test_normalize_mask_excludes_padding():
    out = normalize(_t([1.0, 3.0, 100.0, -50.0]), _b([T_, T_, F, F]))
    # valid [1, 3]: mean 2, std 1 -> [-1, 1]; padding -> 0
    _close(out, [-1.0, 1.0, 0.0, 0.0], atol=1e-6)

    out = normalize(_t([[0.0, 4.0, 99.0], [2.0, 2.0, -7.0]]), _b([[T_, T_, F], [T_, T_, F]]))
    # valid [0, 4, 2, 2] (the zero is valid): mean 2 ; var = (4 + 4 + 0 + 0)/4 = 2 ; std sqrt2
    # -> [-2/sqrt2, 2/sqrt2, 0, 0] = [-1.4142136, 1.4142136, 0, 0]
    _close(out, [[-1.4142136, 1.4142136, 0.0], [0.0, 0.0, 0.0]], atol=1e-5)


def test_normalize_fewer_than_two_valid_gives_zeros():
    _close(normalize(_t([5.0, 7.0, 9.0]), _b([F, T_, F])), [0.0, 0.0, 0.0])
    _close(normalize(_t([5.0])), [0.0])
    _close(normalize(_t([5.0, 7.0]), _b([F, F])), [0.0, 0.0])


# ------------------------------------------------------------------------------------ group_relative


def test_group_relative_two_groups_and_an_equal_group():
    rewards = _t([1.0, 0.0, 3.0, 2.0, 4.0, 2.0, 8.0])
    groups = torch.tensor([0, 2, 0, 1, 2, 1, 2])
    out = group_relative(rewards, groups)
    # group 0: [1, 3]   mean 2, std (pop.) 1             -> [-1, 1]/(1 + 1e-6)
    # group 2: [0, 4, 8] mean 4, var (16+0+16)/3 = 32/3, std = 3.2659863
    #          -> [-4, 0, 4]/3.2659863 = [-1.2247449, 0, 1.2247449]   (4/sqrt(32/3) = sqrt(1.5))
    # group 1: [2, 2]   all equal -> exactly 0
    expected = [-1.0, -1.2247449, 1.0, 0.0, 0.0, 0.0, 1.2247449]
    assert_close(out, _t(expected), rtol=0, atol=2e-6)
    assert out[3].item() == 0.0 and out[5].item() == 0.0
    assert out[4].item() == 0.0  # the middle member of group 2 sits exactly at the mean


def test_group_relative_noncontiguous_ids_and_singleton():
    out = group_relative(_t([5.0, 1.0, 3.0]), torch.tensor([9, 4, 4]))
    # group 9: singleton -> (5 - 5)/(0 + eps) = 0 ; group 4: [1, 3] -> [-1, 1]/(1 + 1e-6)
    assert_close(out, _t([0.0, -1.0, 1.0]), rtol=0, atol=2e-6)
    assert out[0].item() == 0.0
