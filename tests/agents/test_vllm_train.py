"""Training with generation.engine=vllm on the embedded model: the CLI run of the docs, resume, GRPO.

Run with ``make test-vllm``; skipped where vLLM is not installed. Each run starts and shuts down its
own engine.
"""

import importlib.util
import json

import pytest

from marft_agents.cli import main as cli
from marft_agents.config import TrainConfig
from marft_agents.trainer import train

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed in this Python: `make test-vllm` builds .venv-vllm and runs these tests")]


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_marft_train_with_vllm_runs_and_resumes(tmp_path):
    run = tmp_path / "run"
    argv = ["train", "generation.engine=vllm", "episodes_per_update=4", "eval_episodes=4", f"run_dir={run}",
            "--no-progress"]
    assert cli([*argv, "updates=2"]) == 0
    rows = metrics(run)
    assert [r["update"] for r in rows] == [0, 1] and all(r["time/sync_s"] > 0 for r in rows)
    assert json.loads((run / "config.json").read_text())["generation"]["engine"] == "vllm"
    assert not (run / "engine" / "adapters").exists()  # the engine was shut down and its adapters removed
    assert cli([*argv, "updates=3", "--resume"]) == 0
    assert [r["update"] for r in metrics(run)] == [0, 1, 2]
    assert json.loads((run / "summary.json").read_text())["resumed_from_update"] == 2


def test_grpo_trains_two_updates_with_vllm(tmp_path):
    config = TrainConfig(algo="grpo", run_dir=str(tmp_path / "grpo"), updates=2, episodes_per_update=4,
                         eval_episodes=2, eval_rounds=0, max_new_tokens=16, checkpoint_every=0)
    config.generation.engine = "vllm"
    summary = train(config, progress=False, quiet=True)
    rows = metrics(tmp_path / "grpo")
    assert len(rows) == 2 and summary["updates"] == 2
    assert all(r["time/sync_s"] > 0 and 0 <= r["train/solved"] <= 1 for r in rows)
