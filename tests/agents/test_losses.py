"""Hand-computed checks of marft_agents.algorithms.losses (PPO clip, value loss, KL, entropy).

Every expected number is worked out by hand in the comment next to it; none comes from the function
under test.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from marft_agents.algorithms.losses import (
    action_logps,
    approx_kl,
    clipped_value_loss,
    entropy_from_logits,
    masked_mean,
    mean_stats,
    ppo_clip_loss,
    reduce_batch,
)

LN15, LN05, LN11 = math.log(1.5), math.log(0.5), math.log(1.1)

# k3 KL per sample with ratio rho = pi/pi_old: r = 1/rho ; kl = r - 1 - log r = 1/rho - 1 + ln rho
KL_15 = 2.0 / 3.0 - 1.0 + LN15  # = -0.3333333 + 0.4054651 = 0.0721318
KL_05 = 2.0 - 1.0 + LN05  # = 1 - 0.6931472 = 0.3068528
KL_11 = 1.0 / 1.1 - 1.0 + LN11  # = 0.9090909 - 1 + 0.0953102 = 0.0044011


def _t(x):
    return torch.tensor(x, dtype=torch.float32)


def _close(got, expected, atol=1e-6):
    assert_close(got, _t(expected), rtol=0, atol=atol)


# --------------------------------------------------------------------------------------- masked_mean


def test_masked_mean():
    x = _t([1.0, 2.0, 3.0, 4.0])
    assert masked_mean(x).item() == pytest.approx(2.5)  # (1+2+3+4)/4
    assert masked_mean(x, torch.tensor([True, False, True, False])).item() == pytest.approx(2.0)  # (1+3)/2
    assert masked_mean(x, _t([0.0, 1.0, 1.0, 1.0])).item() == pytest.approx(3.0)  # (2+3+4)/3, float mask
    assert masked_mean(x, torch.zeros(4, dtype=torch.bool)).item() == 0.0  # empty mask: 0/1, no NaN
    x2 = _t([[1.0, 2.0, 100.0], [5.0, 100.0, 100.0]])
    m2 = torch.tensor([[True, True, False], [True, False, False]])
    assert masked_mean(x2, m2).item() == pytest.approx(8.0 / 3.0)  # (1+2+5)/3


# ------------------------------------------------------------------------------------- ppo_clip_loss


def test_ppo_clip_inside_and_outside_clip_both_signs():
    logp_old = _t([-1.0, -2.0, -1.5, -0.5, -3.0, -1.0])
    ratios_log = _t([LN15, LN15, LN05, LN05, LN11, 0.0])
    adv = _t([2.0, -2.0, 2.0, -2.0, 1.0, -1.0])
    loss, stats = ppo_clip_loss(logp_old + ratios_log, logp_old, adv, clip_eps=0.2)
    # s0: rho 1.5, A=+2: min(1.5*2=3.0, 1.2*2=2.4)         = 2.4   (clipped)
    # s1: rho 1.5, A=-2: min(1.5*-2=-3.0, 1.2*-2=-2.4)     = -3.0  (unclipped: min picks 1.5*A)
    # s2: rho 0.5, A=+2: min(0.5*2=1.0, 0.8*2=1.6)         = 1.0   (unclipped)
    # s3: rho 0.5, A=-2: min(0.5*-2=-1.0, 0.8*-2=-1.6)     = -1.6  (clipped)
    # s4: rho 1.1, A=+1: inside the range                  = 1.1
    # s5: rho 1.0, A=-1:                                   = -1.0
    # sum = 2.4 - 3.0 + 1.0 - 1.6 + 1.1 - 1.0 = -1.1 ; mean = -1.1/6 ; loss = 1.1/6 = 0.1833333
    assert loss.item() == pytest.approx(1.1 / 6.0, abs=1e-6)
    # clip_frac: |rho - 1| > 0.2 for s0..s3 (0.5 each), not for s4 (0.1) or s5 (0) -> 4/6
    assert stats["clip_frac"] == pytest.approx(4.0 / 6.0, abs=1e-6)
    # approx_kl = (2*KL_15 + 2*KL_05 + KL_11 + 0)/6 = (0.1442636 + 0.6137056 + 0.0044011)/6 = 0.1270617
    assert stats["approx_kl"] == pytest.approx((2 * KL_15 + 2 * KL_05 + KL_11) / 6.0, abs=1e-5)
    assert stats["approx_kl"] == pytest.approx(0.1270617, abs=1e-5)
    assert stats["ratio_max"] == pytest.approx(1.5, abs=1e-5)


def test_ppo_clip_only_inside_range_is_plain_surrogate():
    # all ratios inside [0.8, 1.2]: loss = -mean(rho*A)
    loss, stats = ppo_clip_loss(_t([LN11, 0.0]), _t([0.0, 0.0]), _t([2.0, 3.0]), clip_eps=0.2)
    # -(1.1*2 + 1.0*3)/2 = -(2.2 + 3.0)/2 = -2.6
    assert loss.item() == pytest.approx(-2.6, abs=1e-6)
    assert stats["clip_frac"] == 0.0


def test_ppo_clip_gradients():
    logp_old = _t([-1.0, -1.0, -1.0, -1.0])
    logp = (logp_old + _t([LN15, LN15, LN05, LN05])).requires_grad_(True)
    adv = _t([2.0, -2.0, 2.0, -2.0])
    loss, _ = ppo_clip_loss(logp, logp_old, adv, clip_eps=0.2)
    loss.backward()
    # clipped terms are constants -> zero gradient (s0: rho 1.5, A>0 ; s3: rho 0.5, A<0).
    # unclipped term -rho*A/N has d/dlogp = -rho*A/N:
    #   s1: -1.5*(-2)/4 = 0.75 ;  s2: -0.5*2/4 = -0.25
    _close(logp.grad, [0.0, 0.75, -0.25, 0.0], atol=1e-6)
    assert logp.grad[0].item() == 0.0


def test_ppo_clip_token_level_masked():
    logp_old = torch.full((2, 3), -1.0)
    log_ratio = _t([[LN15, 0.0, LN05], [LN11, 5.0, -5.0]])  # (1,1), (1,2) are padding with wild ratios
    adv = _t([[1.0, 0.5, -1.0], [2.0, 100.0, -100.0]])
    mask = torch.tensor([[True, True, True], [True, False, False]])
    loss, stats = ppo_clip_loss(logp_old + log_ratio, logp_old, adv, clip_eps=0.2, mask=mask)
    # (0,0): rho 1.5, A=1:    min(1.5, 1.2)   = 1.2
    # (0,1): rho 1.0, A=0.5:                    0.5
    # (0,2): rho 0.5, A=-1:   min(-0.5, -0.8) = -0.8
    # (1,0): rho 1.1, A=2:                      2.2
    # mean over 4 valid = (1.2 + 0.5 - 0.8 + 2.2)/4 = 3.1/4 = 0.775 ; loss = -0.775
    assert loss.item() == pytest.approx(-0.775, abs=1e-6)
    # clip_frac: (0,0) and (0,2) out of range -> 2/4
    assert stats["clip_frac"] == pytest.approx(0.5)
    # approx_kl = (KL_15 + 0 + KL_05 + KL_11)/4 = (0.0721318 + 0.3068528 + 0.0044011)/4 = 0.0958464
    assert stats["approx_kl"] == pytest.approx((KL_15 + KL_05 + KL_11) / 4.0, abs=1e-5)
    assert stats["ratio_max"] == pytest.approx(1.5, abs=1e-5)  # exp(5) sits in padding

    # a float mask gives the same loss
    loss_f, _ = ppo_clip_loss(logp_old + log_ratio, logp_old, adv, clip_eps=0.2, mask=mask.float())
    assert loss_f.item() == pytest.approx(-0.775, abs=1e-6)


# ----------------------------------------------------------------------------------------- approx_kl


def test_approx_kl_zero_positive_and_hand_value():
    lp = _t([-0.3, -1.0, -7.0])
    _close(approx_kl(lp, lp), [0.0, 0.0, 0.0])
    # logp=-1, logp_ref=-2: log r = -1 ; r = e^-1 ; kl = e^-1 - 1 + 1 = e^-1 = 0.3678794
    assert approx_kl(_t([-1.0]), _t([-2.0])).item() == pytest.approx(math.exp(-1.0), abs=1e-6)
    # logp=-2, logp_ref=-1: log r = 1 ; kl = e - 1 - 1 = 0.7182818
    assert approx_kl(_t([-2.0]), _t([-1.0])).item() == pytest.approx(math.e - 2.0, abs=1e-6)
    assert (approx_kl(_t([-1.0, -2.0, -0.1]), _t([-2.0, -1.0, -0.2])) > 0).all()


def test_approx_kl_is_unbiased_on_a_two_point_distribution():
    # p = [0.5, 0.5], ref = [0.25, 0.75]; E_p[k3] = KL(p||ref)
    #   = 0.5*ln(0.5/0.25) + 0.5*ln(0.5/0.75) = 0.5*ln(4/3) = 0.1438410
    p, q = _t([0.5, 0.5]), _t([0.25, 0.75])
    expectation = (p * approx_kl(p.log(), q.log())).sum()
    assert expectation.item() == pytest.approx(0.5 * math.log(4.0 / 3.0), abs=1e-6)


# ------------------------------------------------------------------------------- clipped_value_loss

V_OLD = [0.0, 0.0, 0.0, 0.0, 1.0]
V_NEW = [1.0, 0.1, 1.0, 1.0, 0.0]
RET = [1.0, 1.0, 2.0, -1.0, 0.0]


def test_clipped_value_loss_with_and_without_clip():
    v, vo, r = _t(V_NEW), _t(V_OLD), _t(RET)
    # clip = 0.2 ; V_clipped = V_old + clip(V - V_old, -0.2, 0.2)
    # s0: unclipped 0.5*(1-1)^2 = 0 ;      Vc = 0.2 -> 0.5*(0.8)^2 = 0.32     ; max = 0.32  (clipped larger)
    # s1: unclipped 0.5*(0.9)^2 = 0.405 ;  Vc = 0.1 (inside)                  ; max = 0.405
    # s2: unclipped 0.5*(1)^2 = 0.5 ;      Vc = 0.2 -> 0.5*(1.8)^2 = 1.62     ; max = 1.62
    # s3: unclipped 0.5*(-2)^2 = 2.0 ;     Vc = 0.2 -> 0.5*(-1.2)^2 = 0.72    ; max = 2.0   (unclipped larger)
    # s4: unclipped 0.5*0^2 = 0 ;          Vc = 1 - 0.2 = 0.8 -> 0.5*0.64 = 0.32 ; max = 0.32 (downward clip)
    # mean = (0.32 + 0.405 + 1.62 + 2.0 + 0.32)/5 = 4.665/5 = 0.933
    assert clipped_value_loss(v, vo, r, clip=0.2).item() == pytest.approx(0.933, abs=1e-6)
    # no clipping: (0 + 0.405 + 0.5 + 2.0 + 0)/5 = 2.905/5 = 0.581
    assert clipped_value_loss(v, vo, r, clip=None).item() == pytest.approx(0.581, abs=1e-6)


def test_clipped_value_loss_mask_and_gradient():
    v = _t([1.0, 0.1, 50.0]).requires_grad_(True)
    vo, r = _t([0.0, 0.0, 0.0]), _t([1.0, 1.0, -50.0])
    mask = torch.tensor([True, True, False])
    loss = clipped_value_loss(v, vo, r, clip=0.2, mask=mask)
    # valid s0 = 0.32, s1 = 0.405 (see above) -> (0.32 + 0.405)/2 = 0.3625
    assert loss.item() == pytest.approx(0.3625, abs=1e-6)
    loss.backward()
    # s0: the clipped term (a constant in V) is the max -> grad 0
    # s1: d/dV 0.5*(R-V)^2 / 2 = -(R - V)/2 = -0.9/2 = -0.45 ; s2 masked -> 0
    _close(v.grad, [0.0, -0.45, 0.0])


# ------------------------------------------------------------------------------- entropy_from_logits


def test_entropy_uniform_is_log_n():
    _close(entropy_from_logits(torch.zeros(4)).reshape(1), [math.log(4.0)])  # ln 4 = 1.3862944
    # shift invariance and batching: rows uniform over 4 and over 4 (constant 7)
    out = entropy_from_logits(_t([[0.0, 0.0, 0.0, 0.0], [7.0, 7.0, 7.0, 7.0]]))
    _close(out, [math.log(4.0), math.log(4.0)])
    assert out.shape == (2,)


def test_entropy_one_hot_and_two_point():
    # one dominant logit: p ~ (1, e^-100, e^-100) -> entropy ~ 0
    assert entropy_from_logits(_t([100.0, 0.0, 0.0])).item() == pytest.approx(0.0, abs=1e-6)
    # logits [0, ln 3] -> p = [1/4, 3/4]
    # H = 0.25*ln4 + 0.75*ln(4/3) = 0.3465736 + 0.2157616 = 0.5623351
    h = entropy_from_logits(_t([0.0, math.log(3.0)])).item()
    assert h == pytest.approx(0.25 * math.log(4.0) + 0.75 * math.log(4.0 / 3.0), abs=1e-6)
    assert h == pytest.approx(0.5623351, abs=1e-6)
    # bf16 logits are computed in float32
    h8 = entropy_from_logits(torch.zeros(8, dtype=torch.bfloat16)).item()
    assert h8 == pytest.approx(math.log(8.0), abs=1e-5)  # ln 8 = 2.0794415


# ------------------------------------------------------------------- action log-probs and update stats


def test_action_logps_and_reduce_batch_sum_or_average_the_tokens():
    tokens = [_t([-1.0, -0.5]), _t([-0.3])]
    _close(action_logps(tokens, "sum"), [-1.5, -0.3])
    _close(action_logps(tokens, "mean"), [-0.75, -0.3])
    padded = _t([[-1.0, -0.5], [-0.3, -9.0]])  # -9 is padding
    mask = torch.tensor([[True, True], [True, False]])
    _close(reduce_batch(padded, mask, "sum"), [-1.5, -0.3])
    _close(reduce_batch(padded, mask, "mean"), [-0.75, -0.3])


def test_mean_stats_averages_over_the_minibatches_that_have_a_key_and_keeps_maxima():
    rows = [
        {"kl_ref": 0.1},  # a gated minibatch: only its KL is logged
        {"kl_ref": 0.3, "loss": 1.0, "tis_weight_max": 1.5},
        {"kl_ref": 0.5, "loss": 2.0, "tis_weight_max": 1.2},
    ]
    assert mean_stats(rows, "a/") == pytest.approx({"a/kl_ref": 0.3, "a/loss": 1.5, "a/tis_weight_max": 1.5})
    assert mean_stats([]) == {}
