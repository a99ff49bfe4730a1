"""The training loop: summary, resume to identical metrics, atomic checkpoints, CLI errors."""

import json

import pytest
import torch
from agent_helpers import plant_rewards

from marft_agents.cli import main as cli
from marft_agents.cli import policy_from_run
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs import checkpoint as ckpt
from marft_agents.training.config import ConfigError, TrainConfig, load
from marft_agents.training.trainer import train


def tiny_config(model_dir, run_dir, **overrides):
    config = TrainConfig(
        model=str(model_dir),
        run_dir=str(run_dir),
        updates=4,
        episodes_per_update=4,
        eval_episodes=6,
        eval_rounds=2,
        max_new_tokens=6,
        checkpoint_every=2,
        seed=3,
    )
    config.algo_args.minibatch_size = 4
    for k, v in overrides.items():
        setattr(config, k, v)
    return config


def metrics_without_times(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def test_train_writes_summary_metrics_checkpoint_and_plot(tiny_model_dir, tmp_path, monkeypatch):
    collect = RolloutEngine.collect  # a random tiny model earns nothing: pay half the episodes, so the adapters learn
    monkeypatch.setattr(RolloutEngine, "collect", lambda self, *a, **k: plant_rewards(collect(self, *a, **k)))
    summary = train(tiny_config(tiny_model_dir, tmp_path / "run"), progress=False, quiet=True)
    run = tmp_path / "run"
    saved = json.loads((run / "summary.json").read_text())
    assert saved["updates"] == 4 and "wall_time_s" in saved
    for key in ("eval_before", "eval_after"):
        assert 0.0 <= saved[key]["accuracy"] <= 1.0
        assert "solved_within_2_attempts_with_feedback" in saved[key]
        assert set(saved[key]["roles"]) == {"reasoner_0", "actor_0"}
    assert len(metrics_without_times(run)) == 4
    assert ckpt.latest_checkpoint(run / "checkpoints").name == "update_000004.pt"
    assert (run / "curves.png").stat().st_size > 1000
    assert summary["improvement"] == pytest.approx(saved["eval_after"]["accuracy"] - saved["eval_before"]["accuracy"])

    # `marft eval --run` must score the trained adapters, not the untuned base (the reference code's did).
    policy, _ = policy_from_run(str(run))
    trained = ckpt.load_checkpoint(ckpt.latest_checkpoint(run / "checkpoints"))["algo"]["adapters"]
    for adapter in policy.adapters:
        current = policy.adapter_state(adapter)
        assert any(v.abs().sum() > 0 for k, v in current.items() if "lora_B" in k)  # not the zero init
        for name, value in trained[adapter].items():
            assert torch.equal(current[name], value)
    assert cli(["eval", "--run", str(run), "--episodes", "4"]) == 0


def test_interrupted_and_resumed_run_ends_with_the_same_metrics(tiny_model_dir, tmp_path):
    straight = tmp_path / "straight"
    train(tiny_config(tiny_model_dir, straight), progress=False, quiet=True)

    resumed = tmp_path / "resumed"
    train(tiny_config(tiny_model_dir, resumed, updates=2), progress=False, quiet=True)  # "interrupted" after 2
    train(tiny_config(tiny_model_dir, resumed), resume=True, progress=False, quiet=True)

    assert metrics_without_times(straight) == metrics_without_times(resumed)
    a = ckpt.load_checkpoint(ckpt.latest_checkpoint(straight / "checkpoints"))["algo"]["adapters"]
    b = ckpt.load_checkpoint(ckpt.latest_checkpoint(resumed / "checkpoints"))["algo"]["adapters"]
    for adapter in a:
        for name in a[adapter]:
            torch.testing.assert_close(a[adapter][name], b[adapter][name], rtol=0, atol=0)
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (straight, resumed))
    assert s1["eval_after"] == s2["eval_after"]


def test_a_kill_while_saving_leaves_the_previous_checkpoint_loadable(tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    ckpt.save_checkpoint(folder, 1, {"weights": torch.ones(3)})

    def dying_save(obj, f):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(folder, 2, {"weights": torch.zeros(3)})
    monkeypatch.undo()
    latest = ckpt.latest_checkpoint(folder)
    assert latest.name == "update_000001.pt"
    assert torch.equal(ckpt.load_checkpoint(latest)["weights"], torch.ones(3))
    assert sorted(p.name for p in folder.iterdir()) == ["latest", "update_000001.pt"]  # no partial files left


def test_resume_without_a_checkpoint_is_a_clear_error(tiny_model_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train(tiny_config(tiny_model_dir, tmp_path / "empty"), resume=True, progress=False, quiet=True)


def test_config_overrides_and_errors(tmp_path):
    config = load(overrides=["updates=7", "marft.lr=1e-4", "env_kwargs.rounds=3", "env=marft/MathSolo-v0"])
    assert (config.updates, config.algo_args.lr, config.env_kwargs, config.env) == (7, 1e-4, {"rounds": 3}, "marft/MathSolo-v0")
    file = tmp_path / "c.toml"
    file.write_text("updates = 3\n[marft]\ngamma_agent = 1.0\n[env_kwargs]\nn_agents = 3\n")
    config = load(file, ["updates=5"])
    assert (config.updates, config.algo_args.gamma_agent, config.env_kwargs) == (5, 1.0, {"n_agents": 3})
    with pytest.raises(ConfigError, match="did you mean 'marft.lr'"):
        load(overrides=["marft.lrr=1"])
    with pytest.raises(ConfigError, match="updates must be a int"):
        load(overrides=["updates=lots"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "model=/no/such/model", "updates=1"], "no model at /no/such/model"),
        (["train", "env=marft/MathChian-v0"], "did you mean 'marft/MathChain-v0'"),
        (["train", "marft.clip_epss=0.1"], "did you mean 'marft.clip_eps'"),
        (["eval", "--model", "/no/such/model"], "no model at /no/such/model"),
        (["pretrain", "--init", "/no/such/model", "--out", "OUT"], "no model at /no/such/model"),
        (["pretrain", "--unfinished-rate", "2", "--out", "OUT"], "unfinished_rate must be between 0 and 1"),
    ],
)
def test_cli_errors_are_one_line(argv, message, capsys, tmp_path):
    argv = [*argv, f"run_dir={tmp_path}"] if argv[0] == "train" else [str(tmp_path) if a == "OUT" else a for a in argv]
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_cli_pretrain_takes_the_pretrain_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli(["pretrain", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: marft pretrain") and "--unfinished-rate" in out and "--init" in out


def test_cli_refuses_unknown_options_of_other_commands(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli(["envs", "--bogus"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_cli_envs_lists_ids(capsys):
    assert cli(["envs"]) == 0
    assert "marft/MathChain-v0" in capsys.readouterr().out


def test_a_group_split_across_updates_is_refused_before_any_work(tiny_model_dir, tmp_path):
    from marft_agents.training.config import TrainConfig
    from marft_agents.training.trainer import train

    config = TrainConfig(model=str(tiny_model_dir), algo="grpo", episodes_per_update=6, run_dir=str(tmp_path / "run"))
    with pytest.raises(ValueError, match="multiple of grpo's group size 4"):
        train(config, progress=False, quiet=True)
    assert not (tmp_path / "run" / "eval_before.json").exists()
