"""Truncated importance sampling (generation.tis_cap): the weights, the losses with them, every learner, a run."""

import copy
import json
import math

import numpy as np
import pytest
import torch

import marft_envs
from marft_agents.algorithms import build_learner, config_class, names
from marft_agents.algorithms.losses import action_logps, grpo_loss, ppo_clip_loss, reduce_batch, truncated_is_weights
from marft_agents.algorithms.tis import action_weights, recompute_behaviour, token_weights, weight_stats
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.episode import AgentStep
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import ConfigError, TrainConfig, load, validate
from marft_agents.training.trainer import train

# -- the weights: pure maths ------------------------------------------------------------------------


def test_truncated_is_weights_by_hand():
    trainer = torch.tensor([-1.0, -2.0, -0.5, -0.3], requires_grad=True)
    engine = torch.tensor([-1.2, -1.0, -0.5, -1.3])
    w = truncated_is_weights(trainer, engine, 2.0)
    # exp(0.2), exp(-1), exp(0), exp(1.0) = 2.718 capped at 2
    torch.testing.assert_close(w, torch.tensor([1.2214028, 0.3678794, 1.0, 2.0]))
    assert not w.requires_grad  # a weight, never a path for gradients
    assert torch.equal(truncated_is_weights(engine, engine, 1.0), torch.ones(4))  # agreement: exactly 1


def test_ppo_clip_loss_weights_each_term_by_hand():
    logp = torch.log(torch.tensor([1.1, 0.5]))  # ratios 1.1 and 0.5 against logp_old = 0
    old, adv = torch.zeros(2), torch.tensor([1.0, -2.0])
    # terms: min(1.1 * 1, 1.1 * 1) = 1.1; min(0.5 * -2, 0.8 * -2) = -1.6
    plain, _ = ppo_clip_loss(logp, old, adv, 0.2)
    assert plain.item() == pytest.approx(-(1.1 - 1.6) / 2)
    weighted, _ = ppo_clip_loss(logp, old, adv, 0.2, weights=torch.tensor([2.0, 0.5]))
    assert weighted.item() == pytest.approx(-(2.0 * 1.1 + 0.5 * -1.6) / 2)


def test_grpo_loss_weights_the_surrogate_but_not_the_kl_term_by_hand():
    logp = torch.log(torch.tensor([[1.0, 1.5]]))  # per-token ratios 1.0 and 1.5 (clipped to 1.2)
    old, adv, mask = torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool)
    ref = torch.zeros(1, 2)
    kl = torch.exp(ref - logp) - 1 - (ref - logp)  # k3 per token
    loss, _ = grpo_loss(logp, old, adv, mask, 0.2, ref, 0.1, weights=torch.tensor([[0.5, 2.0]]))
    expected = -((0.5 * 1.0 - 0.1 * kl[0, 0]) + (2.0 * 1.2 - 0.1 * kl[0, 1])) / 2
    assert loss.item() == pytest.approx(expected.item())


# -- the learners' losses with engine log-probs on the steps (as MARFT and MARFTToken compose them) ---


def step(response, trainer, engine):
    return AgentStep(
        episode=0,
        round=0,
        agent="a",
        prompt=[1],
        response=response,
        token_logps=torch.tensor(trainer),
        text="",
        engine_logps=torch.tensor(engine),
    )


def action_loss(mb, logp_tok, mask, adv, tis_cap):
    """MARFT's PPO-clip on whole actions (``action_ppo.step``), without entropy and KL."""
    weights = action_weights(mb, "sum", tis_cap)
    loss, _ = ppo_clip_loss(
        reduce_batch(logp_tok, mask, "sum"), action_logps([s.token_logps for s in mb], "sum"), adv, 0.2, weights=weights
    )
    return loss, weight_stats(weights)


def test_action_level_loss_with_a_perturbed_engine_log_prob_by_hand():
    mb = [
        step([5, 6], [-1.0, -0.5], [-1.1, -0.6]),  # engine lower by 0.2 in total: w = exp(0.2)
        step([7], [-0.3], [-1.3]),
    ]  # lower by 1.0: exp(1) = 2.72, capped at 2
    logp_tok = torch.tensor([[-0.9, -0.5], [-0.3, 0.0]])  # new policy; ratios exp(0.1) and 1
    mask = torch.tensor([[True, True], [True, False]])
    adv = torch.tensor([1.0, -1.0])
    loss, stats = action_loss(mb, logp_tok, mask, adv, tis_cap=2.0)
    assert loss.item() == pytest.approx(-(math.exp(0.2) * math.exp(0.1) * 1.0 + 2.0 * 1.0 * -1.0) / 2, rel=1e-6)
    assert stats["tis_weight_mean"] == pytest.approx((math.exp(0.2) + 2.0) / 2, rel=1e-6)
    assert stats["tis_weight_max"] == pytest.approx(2.0)
    plain, plain_stats = action_loss(mb, logp_tok, mask, adv, tis_cap=None)
    assert plain.item() == pytest.approx(-(math.exp(0.1) - 1.0) / 2, rel=1e-6) and plain_stats == {}
    # "mean" reduction: the weight of the per-token average, exp(0.2 / 2) for the two-token action
    w = action_weights(mb, "mean", 2.0)
    torch.testing.assert_close(w, torch.tensor([math.exp(0.1), 2.0]))


def test_token_level_loss_with_a_perturbed_engine_log_prob_by_hand():
    mb = [step([5, 6], [-1.0, -0.5], [-1.0, -1.0])]  # token 2's engine log-prob is 0.5 lower
    old = torch.tensor([[-1.0, -0.5]])
    logp_tok = torch.tensor([[-1.0, -0.4]])  # ratios 1 and exp(0.1)
    mask = torch.ones(1, 2, dtype=torch.bool)
    adv = torch.tensor([[1.0, 2.0]])
    weights = token_weights(mb, 2, 1.5)  # as token_ppo.step weights ppo_clip_loss per token
    loss, _ = ppo_clip_loss(logp_tok, old, adv, 0.2, mask, weights=weights)
    stats = weight_stats(weights, mask)
    # weights 1 and min(exp(0.5) = 1.65, 1.5) = 1.5
    assert loss.item() == pytest.approx(-(1.0 * 1.0 + 1.5 * math.exp(0.1) * 2.0) / 2, rel=1e-6)
    assert stats["tis_weight_max"] == pytest.approx(1.5)
    torch.testing.assert_close(token_weights(mb, 3, 1.5), torch.tensor([[1.0, 1.5, 1.0]]))  # 1 on padding


def test_the_correction_without_engine_log_probs_is_refused():
    bare = AgentStep(episode=0, round=0, agent="a", prompt=[1], response=[5], token_logps=torch.tensor([-1.0]), text="")
    with pytest.raises(ValueError, match="recompute_behaviour"):
        token_weights([bare], 1, 2.0)
    assert token_weights([bare], 1, None) is None and action_weights([bare], "sum", None) is None


# -- every learner: equal log-probs give the uncorrected update, perturbed ones another -------------

ENVS = {
    "marft": "marft/MathChain-v0",
    "marft_token": "marft/MathChain-v0",
    "grpo": "marft/MathChain-v0",
    "ppo": "marft/MathSolo-v0",
    "ippo": "marft/MathDebate-v0",
    "mappo": "marft/MathDebate-v0",
    "cory": "marft/MathCORY-v0",
}


def test_every_builtin_algorithm_is_covered():
    assert set(ENVS) == set(names())


def one_update(model_dir, algo, *, tis_cap, engine_shift):
    """One update of ``algo`` on 4 episodes of the tiny model, with varied hand-set rewards."""
    torch.manual_seed(0)  # the adapters' initialisation and the samples
    envs = [marft_envs.make(ENVS[algo]) for _ in range(4)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    settings = config_class(algo)()
    if algo == "grpo":
        settings.group_size = 2
    learner = build_learner(algo, policy, settings, 1.0, tis_cap)
    learner.before_collect(envs, 0)
    episodes = RolloutEngine(policy, Sampling(1.0, 6), record_state=learner.needs_state).collect(envs, range(4), seed_of=lambda i: i // 2)
    for e in episodes:
        for k, s in enumerate(e.steps):
            s.reward = float(e.index % 2 == 0) + 0.1 * k  # episodes of a group differ: non-zero advantages
            if tis_cap is not None:
                s.engine_logps = s.token_logps.clone()
                s.engine_logps[:1] += engine_shift  # the first token's engine log-prob
    metrics = learner.update(episodes, 0, np.random.default_rng(0))
    return {a: policy.adapter_state(a) for a in policy.adapters}, metrics


@pytest.mark.parametrize("algo", list(ENVS))
def test_each_learner_with_equal_log_probs_updates_as_without_the_correction(tiny_model_dir, algo):
    plain, plain_metrics = one_update(tiny_model_dir, algo, tis_cap=None, engine_shift=0.0)
    same, same_metrics = one_update(tiny_model_dir, algo, tis_cap=2.0, engine_shift=0.0)
    shifted, shifted_metrics = one_update(tiny_model_dir, algo, tis_cap=2.0, engine_shift=-0.5)
    for adapter, state in plain.items():
        assert all(torch.equal(state[k], same[adapter][k]) for k in state), adapter
    assert {k: v for k, v in same_metrics.items() if "tis_" not in k} == plain_metrics
    assert all(v == 1.0 for k, v in same_metrics.items() if "tis_weight" in k) and any("tis_weight" in k for k in same_metrics)
    # the engine's first-token log-prob 0.5 lower: weights above 1 on those terms, a different update
    assert any(not torch.equal(state[k], shifted[a][k]) for a, state in plain.items() for k in state)
    assert max(v for k, v in shifted_metrics.items() if k.endswith("tis_weight_max")) > 1.0


# -- the trainer's recompute and a run ---------------------------------------------------------------


def test_recompute_behaviour_keeps_the_engine_log_probs_and_takes_the_trainers(tiny_model_dir):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(3)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    steps = [s for e in RolloutEngine(policy, Sampling(1.0, 6)).collect(envs, range(3)) for s in e.steps]
    sampled = [s.token_logps.clone() for s in steps]
    stats = recompute_behaviour(policy, steps, 1.0, batch_size=2)
    for s, before in zip(steps, sampled):
        assert torch.equal(s.engine_logps, before)
        logp, _, mask = policy.score([s.prompt], [s.response], policy.adapter_of[s.agent], 1.0)
        torch.testing.assert_close(s.token_logps, logp[0][mask[0]], atol=1e-6, rtol=0)
    # the hf engine samples with the trainer's own model: the two agree to float32 rounding
    assert stats["tis/abs_logp_diff_max"] < 1e-4 and stats["tis/abs_logp_diff_mean"] <= stats["tis/abs_logp_diff_max"]
    again = recompute_behaviour(policy, steps, 1.0)  # the engine's numbers are never overwritten
    assert all(torch.equal(s.engine_logps, b) for s, b in zip(steps, sampled)) and again["tis/abs_logp_diff_max"] < 1e-4


def test_a_run_with_the_correction_logs_its_weights_and_trains(tiny_model_dir, tmp_path, monkeypatch):
    from marft_agents.training import trainer

    config = TrainConfig(
        env="signal_env:ParityChain",  # tests/agents/signal_env.py: a random model's team is paid half the time
        model=str(tiny_model_dir),
        run_dir=str(tmp_path / "run"),
        updates=2,
        episodes_per_update=4,
        eval_episodes=2,
        max_new_tokens=6,
        checkpoint_every=0,
        threads=1,
    )
    config.generation.tis_cap = 2.0
    config.algo_args.minibatch_size = 3
    batch_sizes = []

    def spy(policy, steps, temperature, batch_size=64):
        batch_sizes.append(batch_size)
        return recompute_behaviour(policy, steps, temperature, batch_size)

    monkeypatch.setattr(trainer, "recompute_behaviour", spy)
    train(config, progress=False, quiet=True)
    assert batch_sizes == [3, 3]  # the recompute scores in the learner's minibatch size (Learner.score_batch_size)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert any(row["policy/skipped_equal_returns"] == 0.0 for row in rows)
    for row in rows:
        assert row["tis/abs_logp_diff_max"] < 1e-4
        if row["policy/skipped_equal_returns"]:  # equal returns: no policy step, so no weights to log
            continue
        for agent in ("reasoner_0", "actor_0"):
            assert 0.99 < row[f"{agent}/tis_weight_mean"] <= row[f"{agent}/tis_weight_max"] < 1.01


def test_tis_cap_is_validated():
    assert TrainConfig().generation.tis_cap is None  # off by default
    assert load(overrides=["generation.tis_cap=2"]).generation.tis_cap == 2
    with pytest.raises(ConfigError, match=r"generation.tis_cap must be >= 1, got 0.5"):
        validate(load(overrides=["generation.tis_cap=0.5"]))
    with pytest.raises(ConfigError, match=r"generation.tis_cap must be a number, got 'big'"):
        validate(load(overrides=["generation.tis_cap=big"]))


def test_the_weights_do_not_change_the_steps():
    mb = [step([5], [-0.3], [-1.3])]
    frozen = copy.deepcopy(mb)
    action_loss(mb, torch.tensor([[-0.2]]), torch.ones(1, 1), torch.tensor([1.0]), tis_cap=2.0)
    token_weights(mb, 1, 2.0)
    assert torch.equal(mb[0].token_logps, frozen[0].token_logps) and torch.equal(mb[0].engine_logps, frozen[0].engine_logps)
