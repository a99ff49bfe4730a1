"""Single-agent PPO on MathSolo: plain GAE by hand, a CPU smoke test, selection through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.marft import compute_advantages
from marft_agents.algorithms.ppo import PPO, PPOConfig
from marft_agents.cli import main as cli
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.episode import AgentStep
from marft_agents.rollout.layered import RolloutEngine


def solo_step(t: int, reward: float, done: bool) -> AgentStep:
    return AgentStep(
        episode=0,
        round=t,
        agent="solver_0",
        prompt=[],
        response=[],
        token_logps=torch.zeros(0),
        text="",
        reward=reward,
        round_end=True,
        done=done,
    )


def test_one_agent_gae_is_plain_gae_whatever_gamma_agent():
    # two attempts of one solver: wrong (r=0), then right (r=1)
    steps = [solo_step(0, 0.0, False), solo_step(1, 1.0, True)]
    values = torch.tensor([0.5, 0.2])
    # t=1 (done): delta = 1 - 0.2 = 0.8 ; A_1 = 0.8
    # t=0: delta = 0 + 0.9*0.2 - 0.5 = -0.32 ; A_0 = -0.32 + 0.9*0.5*0.8 = 0.04
    for gamma_agent in (0.9, 0.0, 1.0):  # every step ends its round, so gamma_agent never applies
        adv, ret = compute_advantages(steps, values, gamma=0.9, gamma_agent=gamma_agent, lam=0.5)
        torch.testing.assert_close(adv, torch.tensor([0.04, 0.8]))
        torch.testing.assert_close(ret, torch.tensor([0.54, 1.0]))


def snapshot(policy):
    models = {id(m): m for m in [policy.base, *policy.models.values()]}.values()
    return {(id(m), n): (p.detach().clone(), p.requires_grad) for m in models for n, p in m.named_parameters()}


def test_rejects_a_multi_agent_env(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["reasoner_0", "actor_0"])
    with pytest.raises(ValueError, match="one-agent env such as marft/MathSolo-v0"):
        PPO(policy, PPOConfig(), temperature=1.0)


def test_two_updates_change_every_trainable_parameter_and_no_frozen_one(tiny_model_dir):
    torch.set_num_threads(1)
    envs = [marft_envs.make("marft/MathSolo-v0", rounds=2) for _ in range(6)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = PPO(policy, PPOConfig(minibatch_size=4, kl_coef=0.1, gamma=0.9), temperature=1.0)
    torch.manual_seed(0)
    engine = RolloutEngine(policy, Sampling(1.0, 8))
    critic_before = {n: p.detach().clone() for n, p in algo.critic.head.named_parameters()}
    before = snapshot(policy)
    rng = np.random.default_rng(0)
    for update in range(2):
        episodes = plant_rewards(engine.collect(envs, range(6 * update, 6 * update + 6)))
        metrics = algo.update(episodes, update, rng)
        assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert {"solver_0/loss", "solver_0/kl_ref", "critic/value_loss"} <= set(metrics)
    after = snapshot(policy)
    trainable = {k for k, (_, grad) in before.items() if grad}
    assert trainable
    unchanged = [k[1] for k in trainable if torch.equal(before[k][0], after[k][0])]
    assert not unchanged, f"trainable parameters that did not change: {unchanged[:5]}"
    changed_frozen = [k[1] for k in before.keys() - trainable if not torch.equal(before[k][0], after[k][0])]
    assert not changed_frozen, f"frozen parameters that changed: {changed_frozen[:5]}"
    assert all(not torch.equal(critic_before[n], p) for n, p in algo.critic.head.named_parameters())


def test_cli_algo_flag_trains_ppo_on_a_one_agent_env(tiny_model_dir, tmp_path):
    run = tmp_path / "ppo"
    argv = [
        "train",
        "--algo",
        "ppo",
        "--no-progress",
        "env=signal_env:ParityTask",  # tests/agents/signal_env.py: a random model earns a reward half the time
        f"model={tiny_model_dir}",
        f"run_dir={run}",
        "updates=2",
        "episodes_per_update=4",
        "eval_episodes=4",
        "eval_rounds=0",
        "max_new_tokens=6",
        "ppo.minibatch_size=4",
        "threads=1",
    ]
    assert cli(argv) == 0
    assert json.loads((run / "config.json").read_text())["algo"] == "ppo"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    stepped = [r for r in rows if r["policy/skipped_equal_returns"] == 0.0]  # a batch with equal returns takes no step
    assert stepped and all(np.isfinite(r["solver_0/loss"]) for r in stepped)
    assert all("solver_0/loss" not in r for r in rows if r not in stepped)
