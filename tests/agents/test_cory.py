"""CORY: the env's roles and cooperative reward, the KL controller, role swaps, a 2-update smoke test."""

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.cory import CORY, CORYConfig, adaptive_kl_coef, pioneer_at
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine


def test_adaptive_kl_coef_by_hand():
    # kl/target - 1 = 12/6 - 1 = 1, clipped to 0.2; coef * (1 + 0.2 * 100 / 1000) = 0.1 * 1.02
    assert adaptive_kl_coef(0.1, kl=12.0, target=6.0, horizon=1000, n_steps=100) == pytest.approx(0.102)
    # 5.7/6 - 1 = -0.05 (inside the clip): 0.1 * (1 - 0.05 * 10 / 100) = 0.0995
    assert adaptive_kl_coef(0.1, kl=5.7, target=6.0, horizon=100, n_steps=10) == pytest.approx(0.0995)


def test_pioneer_alternates_every_swap_interval():
    agents = ["solver_0", "solver_1"]
    assert [pioneer_at(agents, u, 2) for u in range(6)] == ["solver_0"] * 2 + ["solver_1"] * 2 + ["solver_0"] * 2
    assert {pioneer_at(agents, u, 0) for u in range(6)} == {"solver_0"}  # the no-swap ablation


def test_env_graph_flips_and_both_agents_get_the_summed_reward():
    env = marft_envs.make("marft/MathCORY-v0")
    env.reset(seed=0)
    assert env.ready_agents() == ["solver_0"]
    right = f"so \\boxed{{{env.problem.answer}}}"
    env.step({"solver_0": right})
    assert env.observe("solver_1")["text"].endswith(f"solver_0: {right}")  # the reference
    result = env.step({"solver_1": "no idea"})
    assert result.rewards == {"solver_0": 1.0, "solver_1": 1.0}  # r(q, a_p) + r(q, a_o) = 1 + 0
    assert result.infos["solver_0"]["role"] == "pioneer" and result.infos["solver_1"]["role"] == "observer"
    assert not result.infos["solver_1"]["solved"]  # the team's answer is the observer's

    env.set_pioneer("solver_1")  # the swap: from the next reset on
    env.reset(seed=0)
    assert env.ready_agents() == ["solver_1"] and env.info("solver_0")["parents"] == ["solver_1"]
    env.step({"solver_1": right})
    result = env.step({"solver_0": right})
    assert result.rewards == {"solver_0": 2.0, "solver_1": 2.0} and result.infos["solver_0"]["solved"]

    alone = marft_envs.make("marft/MathCORY-v0", reference=False)  # the evaluation protocol
    alone.reset(seed=0)
    assert alone.ready_agents() == ["solver_0", "solver_1"]
    assert alone.observe("solver_0")["text"] == alone.observe("solver_1")["text"] == f"Problem: {alone.problem.question}"


def setup(model_dir, **cfg):
    envs = [marft_envs.make("marft/MathCORY-v0") for _ in range(4)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = CORY(policy, CORYConfig(minibatch_size=2, **cfg), temperature=1.0)
    torch.manual_seed(0)
    return policy, algo, RolloutEngine(policy, Sampling(1.0, 6)), envs


def run(algo, engine, envs, updates, planted=True):
    """``updates`` updates; ``planted``: every other episode paid (a random tiny model earns nothing, and an agent
    whose returns are all equal takes no policy step)."""
    metrics = {}
    for update in updates:
        algo.before_collect(envs, update)
        episodes = engine.collect(envs, range(4 * update, 4 * update + 4))
        metrics = algo.update(plant_rewards(episodes) if planted else episodes, update, np.random.default_rng(update))
    return metrics


def test_an_agent_whose_returns_are_all_equal_takes_no_policy_step(tiny_model_dir):
    policy, algo, engine, envs = setup(tiny_model_dir)
    adapters = {a: [p.detach().clone() for p in policy.parameters(a)] for a in policy.adapters}
    critics = {a: [p.detach().clone() for p in c.parameters()] for a, c in algo.critics.items()}
    metrics = run(algo, engine, envs, [0], planted=False)  # nothing earned: every return 0
    assert metrics["policy/skipped_equal_returns"] == 1.0 and not any(k.endswith("/loss") for k in metrics)
    for a in policy.adapters:
        assert all(torch.equal(x, y) for x, y in zip(adapters[a], policy.parameters(a)))
        assert any(not torch.equal(x, y) for x, y in zip(critics[a], algo.critics[a].parameters()))  # it still fits


def test_two_updates_change_every_trainable_parameter_and_no_frozen_one(tiny_model_dir):
    policy, algo, engine, envs = setup(tiny_model_dir, kl_target=1.0, entropy_coef=0.01)
    before = {n: (p.detach().clone(), p.requires_grad) for n, p in policy.base.named_parameters()}
    critics = {a: [p.detach().clone() for p in c.parameters()] for a, c in algo.critics.items()}
    metrics = run(algo, engine, envs, range(2))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert {"solver_0/loss", "solver_1/loss", "solver_0/kl_ref", "solver_1/critic/value_loss"} <= set(metrics)
    assert algo.kl_coefs["solver_0"] != 0.05  # the adaptive controller moved
    trainable = {n for n, (_, grad) in before.items() if grad}
    after = dict(policy.base.named_parameters())
    assert not [n for n in trainable if torch.equal(before[n][0], after[n])]
    assert not [n for n in before.keys() - trainable if not torch.equal(before[n][0], after[n])]
    for a, c in algo.critics.items():
        assert all(not torch.equal(b, p) for b, p in zip(critics[a], c.parameters()))


@pytest.mark.parametrize("reset_on_swap", [False, True])
def test_a_swap_flips_the_roles_and_keeps_state_unless_asked(tiny_model_dir, reset_on_swap):
    policy, algo, engine, envs = setup(tiny_model_dir, swap_interval=1, kl_target=1.0, reset_on_swap=reset_on_swap)
    run(algo, engine, envs, [0])
    assert all(env.pioneer == "solver_0" for env in envs)
    optimizers, kl = dict(algo.optimizers), dict(algo.kl_coefs)
    algo.before_collect(envs, 1)  # a swap
    assert all(env.pioneer == "solver_1" for env in envs)
    if reset_on_swap:  # the original's behaviour: fresh optimizers and KL coefficients
        assert all(not o.state for o in algo.optimizers.values())
        assert algo.kl_coefs == {"solver_0": 0.05, "solver_1": 0.05}
    else:  # ours: each agent keeps its optimizer state and KL coefficient across the swap
        assert all(algo.optimizers[a] is optimizers[a] and algo.optimizers[a].state for a in optimizers)
        assert algo.kl_coefs == kl
    episodes = engine.collect(envs, range(4, 8))
    assert all(e.steps[0].agent == "solver_1" and e.steps[0].info["role"] == "pioneer" for e in episodes)


def test_cory_needs_two_adapters(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["solver_0", "solver_1"], mode="shared")
    with pytest.raises(ValueError, match="two agents with their own adapters"):
        CORY(policy, CORYConfig(), temperature=1.0)


def test_trainer_evaluates_each_policy_alone(tiny_model_dir, tmp_path, monkeypatch):
    from marft_agents.training import run_parts, trainer
    from marft_agents.training.config import TrainConfig

    seen = []
    real = run_parts.evaluate
    monkeypatch.setattr(run_parts, "evaluate", lambda policy, **kw: seen.append(kw["env_kwargs"]) or real(policy, **kw))
    config = TrainConfig(
        model=str(tiny_model_dir),
        run_dir=str(tmp_path / "run"),
        algo="cory",
        env="marft/MathCORY-v0",
        updates=2,
        episodes_per_update=4,
        eval_episodes=4,
        eval_rounds=0,
        max_new_tokens=6,
        checkpoint_every=0,
        seed=1,
    )
    config.algo_args.minibatch_size = 4
    config.algo_args.swap_interval = 1
    summary = trainer.train(config, progress=False, quiet=True)
    # before and after: query-only prompts (no reference), with solver_0's answer as the headline
    assert seen == [{"reference": False, "pioneer": "solver_1"}] * 2
    for key in ("eval_before", "eval_after"):
        assert set(summary[key]["roles"]) == {"solver_0", "solver_1"}


@pytest.mark.parametrize("algo", ["cory", "marft_token"])
def test_resumed_run_ends_with_the_same_metrics(tiny_model_dir, tmp_path, algo):
    # CORY's state includes per-agent critics, optimizers and KL coefficients, and swaps (here with
    # the original's reset) happen in before_collect: a resumed run must replay all of it exactly.
    import json

    from marft_agents.training.config import TrainConfig
    from marft_agents.training.trainer import train

    def config(run_dir, updates):
        c = TrainConfig(
            model=str(tiny_model_dir),
            run_dir=str(run_dir),
            algo=algo,
            updates=updates,
            env="marft/MathCORY-v0" if algo == "cory" else "marft/MathChain-v0",
            episodes_per_update=4,
            eval_episodes=2,
            eval_rounds=0,
            max_new_tokens=5,
            checkpoint_every=1,
            seed=2,
        )
        c.algo_args.minibatch_size = 4  # a config holds the chosen algorithm's section only
        if algo == "cory":
            c.algo_args.swap_interval, c.algo_args.reset_on_swap, c.algo_args.kl_target = 2, True, 1.0
        else:
            c.algo_args.sequential.enabled = True  # random order: draws from the run's generator
        return c

    def metrics(run_dir):
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]

    train(config(tmp_path / "straight", 3), progress=False, quiet=True)
    train(config(tmp_path / "resumed", 2), progress=False, quiet=True)
    train(config(tmp_path / "resumed", 3), resume=True, progress=False, quiet=True)
    assert metrics(tmp_path / "straight") == metrics(tmp_path / "resumed")
