"""Training with generation.engine=vllm on the embedded model: the CLI run of the docs, resume, GRPO.

Run with ``make test-vllm``; skipped where vLLM is not installed. Each run starts and shuts down its
own engine.
"""

import importlib.util
import json

import pytest

from marft_agents.cli import main as cli
from marft_agents.training.config import TrainConfig
from marft_agents.training.trainer import train

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vLLM is not installed in this Python: `make test-vllm` builds .venv-vllm and runs these tests",
    ),
]


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def without_times(rows):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


@pytest.mark.timeout(600)  # an engine start (~25 s) plus two updates on 2 shared cores
def test_the_documented_vllm_command_trains(tmp_path, capfd):
    run = tmp_path / "run"
    assert (
        cli(["train", "generation.engine=vllm", "updates=2", "episodes_per_update=4", "eval_episodes=4", f"run_dir={run}", "--no-progress"])
        == 0
    )
    out = capfd.readouterr().out
    assert "WARNING" not in out and " INFO " not in out, out  # vLLM's records go to its log file, not stdout
    assert (run / "engine" / "vllm.log").exists()
    rows = metrics(run)
    assert [r["update"] for r in rows] == [0, 1] and all(r["time/sync_s"] > 0 for r in rows)
    assert json.loads((run / "config.json").read_text())["generation"]["engine"] == "vllm"
    assert not (run / "engine" / "adapters").exists()  # the engine was shut down and its adapters removed


def report_lines(out):
    """``marft eval``'s report, without the lines vLLM's logger prints to stdout."""
    lines = [line for line in out.splitlines() if not line.startswith("(")]
    assert lines and lines[0].startswith("marft/MathChain-v0: ")
    return lines


def small_config(run_dir, updates, **overrides):
    config = TrainConfig(
        run_dir=str(run_dir),
        updates=updates,
        episodes_per_update=4,
        eval_episodes=2,
        eval_rounds=0,
        max_new_tokens=16,
        checkpoint_every=1,
        seed=5,
        **overrides,
    )
    config.generation.engine = "vllm"
    return config


@pytest.mark.timeout(900)  # three engine starts
def test_a_resumed_vllm_run_ends_with_the_metrics_of_a_straight_one(tmp_path):
    # sampling seeds come from torch's generator, which checkpoints keep: resuming changes nothing
    train(small_config(tmp_path / "straight", 2), progress=False, quiet=True)
    train(small_config(tmp_path / "resumed", 1), progress=False, quiet=True)
    summary = train(small_config(tmp_path / "resumed", 2), resume=True, progress=False, quiet=True)
    assert summary["resumed_from_update"] == 1
    assert without_times(metrics(tmp_path / "resumed")) == without_times(metrics(tmp_path / "straight"))
    assert len(metrics(tmp_path / "straight")) == 2


@pytest.mark.timeout(600)
def test_grpo_trains_two_updates_with_vllm(tmp_path):
    config = small_config(tmp_path / "grpo", 2, algo="grpo")
    summary = train(config, progress=False, quiet=True)
    rows = metrics(tmp_path / "grpo")
    assert len(rows) == 2 and summary["updates"] == 2
    assert all(r["time/sync_s"] > 0 and 0 <= r["train/solved"] <= 1 for r in rows)


@pytest.mark.timeout(600)
def test_the_tis_correction_trains_with_a_bfloat16_engine(tmp_path):
    # bf16 sampling is off the fp32 trainer by up to ~0.2 per token: the correction has something to correct
    # tests/agents/signal_env.py: the team is paid half the time, so no update has equal returns (which take no step)
    config = small_config(tmp_path / "tis", 2, env="signal_env:ParityChain")
    config.episodes_per_update = 8
    config.generation.dtype, config.generation.tis_cap = "bfloat16", 2.0
    summary = train(config, progress=False, quiet=True)
    rows = metrics(tmp_path / "tis")
    assert len(rows) == 2 and summary["updates"] == 2
    for r in rows:
        assert r["tis/abs_logp_diff_max"] > 1e-3  # the engine really is another model, numerically
        weights = {k: v for k, v in r.items() if "tis_weight" in k}
        assert set(weights) == {f"{a}/tis_weight_{s}" for a in ("reasoner_0", "actor_0") for s in ("mean", "max")}
        assert all(0 < v <= 2.0 for v in weights.values())  # capped at tis_cap
        assert any(v != 1.0 for v in weights.values())


@pytest.mark.timeout(600)
def test_eval_of_a_vllm_run_uses_vllm_and_greedy_answers_equal_hfs(tmp_path, monkeypatch, capsys):
    from marft_agents.engines.vllm import VLLMEngine

    run = tmp_path / "run"
    train(small_config(run, 1), progress=False, quiet=True)
    calls = []
    original = VLLMEngine.generate
    monkeypatch.setattr(VLLMEngine, "generate", lambda self, *a: calls.append(1) or original(self, *a))
    capsys.readouterr()
    assert cli(["eval", "--run", str(run), "--episodes", "4"]) == 0  # the run's engine: vllm
    with_vllm = report_lines(capsys.readouterr().out)
    assert calls
    n = len(calls)
    assert cli(["eval", "--run", str(run), "--episodes", "4", "generation.engine=hf"]) == 0
    assert len(calls) == n  # hf asked for: vllm not used
    assert report_lines(capsys.readouterr().out) == with_vllm  # fp32 greedy: the same tokens, the same report
