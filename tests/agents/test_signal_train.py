"""The signal options in real (tiny) training runs: diagnostics, dynamic sampling, curriculum, format reward, init_from."""

from __future__ import annotations

import json

import pytest
import torch

from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs.report import summary_table
from marft_agents.signal.curriculum import level_weights
from marft_agents.training.config import ConfigError, TrainConfig
from marft_agents.training.init_from import load_init_adapters, save_adapters_run
from marft_agents.training.trainer import build_policy, train

PARITY = "signal_env:ParityTask"  # tests/agents/signal_env.py


def config_for(model_dir, run_dir, **overrides) -> TrainConfig:
    algo = overrides.pop("algo", "marft")
    config = TrainConfig(
        algo=algo,
        model=str(model_dir),
        run_dir=str(run_dir),
        updates=3,
        episodes_per_update=4,
        eval_episodes=2,
        eval_rounds=0,
        max_new_tokens=6,
        checkpoint_every=0,
        seed=1,
        threads=1,
    )
    config.algo_args.minibatch_size = 4
    if algo == "grpo":
        config.algo_args.group_size = 2
    for key, value in overrides.items():
        target = config
        *path, last = key.split(".")
        for part in path:
            target = getattr(target, part)
        setattr(target, last, value)
    return config


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def final_adapters(run_dir):
    return ckpt.load_checkpoint(ckpt.latest_checkpoint(run_dir / "checkpoints"))["algo"]["adapters"]


def test_every_run_logs_the_signal_and_summarises_it(tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    summary = train(config_for(tiny_model_dir, run, env=PARITY), progress=False, quiet=True)
    for row in rows(run):
        assert 0 <= row["signal/rewarded_frac"] <= 1 and row["signal/zero_spread_frac"] in (0.0, 1.0)
        assert "signal/solver_0/reward" in row and row["signal/advantage_std"] >= 0
        assert "signal/draws" not in row  # no sampling metrics without the options
    assert summary["signal"]["updates"] == 3
    assert "training signal:" in summary_table(summary)


def test_a_run_without_signal_warns_once_naming_options_not_in_use(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    config = config_for(tiny_model_dir, run, env="marft/MathSolo-v0", updates=2, algo="grpo")
    summary = train(config, progress=False, quiet=True)
    # the tiny random model never solves MATH: the zero-reward warning, once, with the options to try
    (warning,) = summary["warnings"]
    assert "every reward of the first 2 updates was exactly 0" in warning
    assert "signal.dynamic_sampling=true" in warning and "env_kwargs.format_reward=0.1" in warning
    assert "try a real model" not in warning  # a model given by path is not the embedded one


def test_an_update_without_signal_after_rewards_warns_once(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    summary = train(config_for(tiny_model_dir, run, algo="grpo", env=PARITY, updates=6), progress=False, quiet=True)
    logged = rows(run)
    rewarded = [k for k, row in enumerate(logged) if row["signal/rewarded_frac"] > 0]
    flat = [k for k, row in enumerate(logged) if row["signal/zero_spread_frac"] == 1.0 and k >= rewarded[0]]
    assert flat, "this seed has an update without signal once rewards have come"
    (warning,) = summary["warnings"]  # once, however many such updates there were
    assert warning.startswith(f"warning: update {flat[0]} had no reward signal") and "\n" not in warning
    assert "signal.dynamic_sampling=true" in warning and "signal.curriculum=true" in warning


def test_dynamic_sampling_trains_on_informative_groups(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    config = config_for(
        tiny_model_dir,
        run,
        algo="grpo",
        env=PARITY,
        env_kwargs={"levels": False},
        **{"signal.dynamic_sampling": True, "signal.max_draws": 6},
    )
    train(config, progress=False, quiet=True)
    for row in rows(run):
        assert 1 <= row["signal/draws"] <= 6 and row["signal/groups_drawn"] == 2 * row["signal/draws"]
        # the batch holds the informative groups found, up to the 2 asked for, and the rest is filled
        assert row["signal/zero_spread_frac"] == pytest.approx(1 - row["signal/informative_groups"] / 2)
        assert row["train/response_tokens"] > 0
    assert any(row["signal/draws"] > 1 for row in rows(run))  # some first draw was not informative enough
    assert any(row["signal/informative_groups"] > 0 for row in rows(run))
    # with a signal the adapters moved from their zero-initialised B matrices
    assert all(any(v.abs().sum() > 0 for k, v in state.items() if "lora_B" in k) for state in final_adapters(run).values())


def test_a_signal_during_dynamic_sampling_ends_the_draws_and_the_run_stops_after_that_update(tiny_model_dir, tmp_path, monkeypatch):
    import os
    import signal

    from marft_agents.signal.collection import BatchCollector
    from marft_agents.training.interrupts import RunInterrupted

    played = []
    play = BatchCollector._play

    def play_and_signal(self, indices, update, draw):
        played.append((update, draw))
        if len(played) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # as `kill` would, while the first draw plays
        return play(self, indices, update, draw)

    monkeypatch.setattr(BatchCollector, "_play", play_and_signal)
    run = tmp_path / "run"
    options = {"signal.dynamic_sampling": True, "signal.max_draws": 100}
    config = config_for(tiny_model_dir, run, algo="grpo", env="signal_env:FlatTask", **options)
    with pytest.raises(RunInterrupted, match="stopped by SIGTERM after update 1; resume from the checkpoint") as err:
        train(config, progress=False, quiet=True)
    assert err.value.exit_code == 143 and err.value.checkpoint is not None
    assert played == [(0, 0)]  # uninformative groups would have drawn 100 times
    assert [(row["update"], row["signal/draws"]) for row in rows(run)] == [(0, 1.0)]


def test_dynamic_sampling_needs_groups_and_says_so_before_any_file(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match="use a group-relative algo") as err:
        train(config_for(tiny_model_dir, run, **{"signal.dynamic_sampling": True}), progress=False, quiet=True)
    assert "\n" not in str(err.value) and not run.exists()
    with pytest.raises(ConfigError, match="declares difficulty levels"):
        train(
            config_for(tiny_model_dir, run, env=PARITY, env_kwargs={"levels": False}, **{"signal.curriculum": True}),
            progress=False,
            quiet=True,
        )
    for draws in (0, 101, 10**9, 4.0):  # at most 100: each draw plays a whole update's episodes again
        with pytest.raises(ConfigError, match=r"signal.max_draws must be an integer in \[1, 100\]"):
            train(config_for(tiny_model_dir, run, **{"signal.max_draws": draws}), progress=False, quiet=True)
    with pytest.raises(ConfigError, match="must be below"):
        train(config_for(tiny_model_dir, run, **{"signal.curriculum_low": 0.9, "signal.curriculum_high": 0.5}), progress=False, quiet=True)
    assert not run.exists()


def test_the_curriculum_follows_the_running_success_and_resumes(tiny_model_dir, tmp_path):
    overrides = dict(
        algo="grpo", env=PARITY, updates=4, **{"signal.curriculum": True, "signal.curriculum_floor": 0.0, "signal.curriculum_window": 8}
    )
    straight = tmp_path / "straight"
    train(config_for(tiny_model_dir, straight, **overrides), progress=False, quiet=True)
    logged = rows(straight)
    for row in logged:  # the draw probabilities are the documented rule applied to the logged success rates
        rates = {lvl: row.get(f"signal/level_{lvl}/success") for lvl in (0, 1)}
        expected = level_weights(rates, low=0.0, high=1.0, floor=0.0)
        assert [row[f"signal/level_{lvl}/p"] for lvl in (0, 1)] == pytest.approx([expected[0], expected[1]])
    # level 1 is never solved: once tried, it is never drawn again (floor 0) while level 0 is in the band
    tried = [row for row in logged if "signal/level_1/success" in row]
    assert tried and all(row["signal/level_1/success"] == 0.0 for row in tried)
    assert any(row["signal/level_1/p"] == 0.0 for row in tried)
    assert "signal" in ckpt.load_checkpoint(ckpt.latest_checkpoint(straight / "checkpoints"))
    assert all(
        any(v.abs().sum() > 0 for k, v in state.items() if "lora_B" in k) for state in final_adapters(straight).values()
    )  # level 0's signal trained the adapters

    resumed = tmp_path / "resumed"
    train(config_for(tiny_model_dir, resumed, **{**overrides, "updates": 2, "checkpoint_every": 1}), progress=False, quiet=True)
    train(config_for(tiny_model_dir, resumed, **{**overrides, "checkpoint_every": 1}), resume=True, progress=False, quiet=True)
    drop = lambda rs: [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rs]  # noqa: E731
    assert drop(rows(resumed)) == drop(logged)


def test_format_reward_rewards_boxed_answers_in_training(tmp_path):
    # the embedded model boxes its answers: with the bonus, wrong but boxed answers are rewarded too
    run = tmp_path / "run"
    config = config_for("embedded", run, env="marft/MathSolo-v0", updates=1, max_new_tokens=24, env_kwargs={"format_reward": 0.1})
    config.model = "embedded"
    train(config, progress=False, quiet=True)
    (row,) = rows(run)
    assert row["signal/rewarded_frac"] > 0
    assert row["signal/solver_0/reward"] >= 0.1 * row["signal/rewarded_frac"]


def test_init_from_starts_from_the_earlier_runs_adapters(tiny_model_dir, tmp_path):
    first = tmp_path / "first"
    chain = "signal_env:ParityChain"  # reasoner_0 -> actor_0, paid half the time: every update takes a step
    train(config_for(tiny_model_dir, first, env=chain, updates=2), progress=False, quiet=True)
    trained = final_adapters(first)

    second = config_for(tiny_model_dir, tmp_path / "second", env=chain, init_from=str(first), updates=1)
    policy = build_policy(second, ["reasoner_0", "actor_0"])
    assert load_init_adapters(second, policy) == {"run": str(first), "checkpoint": "update_000002.pt"}
    for adapter, state in trained.items():
        for name, value in policy.adapter_state(adapter).items():
            assert torch.equal(value, state[name])

    summary = train(second, progress=False, quiet=True)
    assert summary["updates"] == 1
    after = final_adapters(tmp_path / "second")
    for adapter, state in trained.items():  # RL went on from there: every trainable tensor moved again
        assert all(not torch.equal(after[adapter][name], value) for name, value in state.items()), adapter


def test_init_from_refuses_what_does_not_fit_in_one_line(tiny_model_dir, tmp_path):
    first = tmp_path / "first"
    train(config_for(tiny_model_dir, first, updates=1), progress=False, quiet=True)
    target = tmp_path / "second"
    cases = [
        (dict(init_from=str(first), lora_r=4), "was trained with lora_r=8, this run has lora_r=4"),
        (dict(init_from=str(first), env="marft/MathSolo-v0"), "this run's env needs ['solver_0']"),
        (dict(init_from=str(tmp_path / "nothing")), "is not a run folder"),
        (dict(init_from=str(first), model="embedded"), "was trained with model="),
    ]
    for overrides, message in cases:
        config = config_for(tiny_model_dir, target, **overrides)
        with pytest.raises(ConfigError) as err:
            train(config, progress=False, quiet=True)
        assert message in str(err.value) and "\n" not in str(err.value), str(err.value)
        assert not target.exists()
    pretrained = tmp_path / "pretrained"
    pretrained.mkdir()
    (pretrained / "pretrain.json").write_text("{}")
    with pytest.raises(ConfigError, match=f"start from it with model={pretrained}"):
        train(config_for(tiny_model_dir, target, init_from=str(pretrained)), progress=False, quiet=True)


def test_adapters_trained_elsewhere_are_saved_as_a_run_init_from_reads(tiny_model_dir, tmp_path):
    config = config_for(tiny_model_dir, tmp_path / "sft")
    policy = build_policy(config, ["reasoner_0", "actor_0"])
    with torch.no_grad():
        for p in policy.parameters("actor_0"):
            p.add_(0.5)  # stand-in for supervised steps
    save_adapters_run(tmp_path / "sft", config, policy)
    later = config_for(tiny_model_dir, tmp_path / "rl", init_from=str(tmp_path / "sft"))
    fresh = build_policy(later, ["reasoner_0", "actor_0"])
    load_init_adapters(later, fresh)
    for name, value in policy.adapter_state("actor_0").items():
        assert torch.equal(fresh.adapter_state("actor_0")[name], value)
