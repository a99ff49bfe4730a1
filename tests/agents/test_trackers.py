"""Experiment trackers (``log.*``): a W&B run written offline and read back, the config checks, and the lazy import.

The W&B tests run with ``WANDB_MODE=offline`` and every wandb folder (its run, config, cache, data)
inside ``tmp_path``: no network, nothing outside the test's folder. They read the offline run back
with wandb's own reader of its ``.wandb`` files (``wandb.sdk.internal.datastore``, what ``wandb sync``
uses), and skip where wandb is not installed (``pip install 'marft[trackers]'``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from agent_helpers import plant_rewards

from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs.trackers import LogConfig, evaluation_numbers, transcript_rows
from marft_agents.training.config import ConfigError, TrainConfig, load, validate
from marft_agents.training.trainer import train


def tiny_config(model_dir, run_dir, **overrides) -> TrainConfig:
    config = TrainConfig(
        model=str(model_dir),
        run_dir=str(run_dir),
        updates=2,
        episodes_per_update=4,
        eval_episodes=4,
        eval_rounds=0,
        eval_transcripts=2,
        max_new_tokens=6,
        checkpoint_every=1,
        seed=3,
        log=LogConfig(wandb=True, project="marft-tests", run_name="tiny"),
    )
    config.algo_args.minibatch_size = 4
    for k, v in overrides.items():
        setattr(config, k, v)
    return config


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """wandb importable, offline, and every folder it writes inside ``tmp_path``."""
    pytest.importorskip("wandb")
    home = tmp_path / "home"
    for var, where in {
        "HOME": home,
        "WANDB_CONFIG_DIR": home / "config",
        "WANDB_CACHE_DIR": home / "cache",
        "WANDB_DATA_DIR": home / "data",
    }.items():
        where.mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(where))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_DIR", raising=False)


def read_offline_run(run_dir) -> dict:
    """The records of the run's offline W&B run(s): ``history`` rows, ``summary`` and ``config`` (last values win), and ``run_ids``."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.internal import datastore

    files = sorted((run_dir / "trackers" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert files, f"no offline W&B run under {run_dir / 'trackers'}"
    out = {"history": [], "summary": {}, "config": {}, "run_ids": set(), "files": files}
    for path in files:
        store = datastore.DataStore()
        store.open_for_scan(str(path))
        while (data := store.scan_data()) is not None:
            record = pb.Record()
            record.ParseFromString(data)
            kind = record.WhichOneof("record_type")
            if kind == "history":
                out["history"].append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item})
            elif kind == "summary":
                out["summary"].update({i.key: json.loads(i.value_json) for i in record.summary.update if i.key})
            elif kind == "run":
                out["run_ids"].add(record.run.run_id)
                out["config"].update({i.key: json.loads(i.value_json) for i in record.run.config.update})
    return out


@pytest.mark.trackers
def test_an_offline_wandb_run_holds_the_metrics_per_agent_the_config_evaluations_and_transcripts(
    tiny_model_dir, tmp_path, monkeypatch, offline_wandb
):
    collect = RolloutEngine.collect  # a random tiny model earns nothing: pay half the episodes, so the update has a loss
    monkeypatch.setattr(RolloutEngine, "collect", lambda self, *a, **k: plant_rewards(collect(self, *a, **k)))
    run = tmp_path / "run"
    summary = train(tiny_config(tiny_model_dir, run), progress=False, quiet=True)

    logged = read_offline_run(run)
    assert logged["config"]["log"]["project"] == "marft-tests" and logged["config"]["updates"] == 2
    rows = {r["_step"]: r for r in logged["history"]}
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for line in metrics:  # every number TensorBoard gets, at the update's step
        numbers = {k: v for k, v in line.items() if k != "update" and isinstance(v, (int, float))}
        assert {k: rows[line["update"]][k] for k in numbers} == pytest.approx(numbers)
    for agent in ("reasoner_0", "actor_0"):  # the learner's per-agent numbers keep their agent's prefix
        assert f"{agent}/loss" in rows[0] and f"{agent}/advantage_mean" in rows[0]
        assert (
            logged["summary"][f"eval_after/{agent}/mean_response_tokens"] == summary["eval_after"]["roles"][agent]["mean_response_tokens"]
        )
    # eval_before comes before update 0 (same row), eval_after after the last update
    assert rows[0]["eval_before/accuracy"] == summary["eval_before"]["accuracy"]
    assert rows[2]["eval_after/accuracy"] == summary["eval_after"]["accuracy"]
    assert logged["summary"]["improvement"] == pytest.approx(summary["improvement"])
    for name, step in (("eval_before", 0), ("eval_after", 2)):
        assert rows[step][f"{name}/results/_type"] == rows[step][f"{name}/transcripts/_type"] == "table-file"
        table = json.loads((logged["files"][0].parent / "files" / rows[step][f"{name}/transcripts/path"]).read_text())
        written = [json.loads(line) for line in (run / "samples" / f"{name}.jsonl").read_text().splitlines()]
        assert table["columns"][:5] == ["episode", "solved", "return", "round", "agent"]
        assert [row[4] for row in table["data"]] == [s["agent"] for t in written for s in t["steps"]]  # every agent-step of samples/
        assert [row[6] for row in table["data"]] == [s["action"] for t in written for s in t["steps"]]


@pytest.mark.trackers
def test_a_resumed_run_continues_its_wandb_run(tiny_model_dir, tmp_path, offline_wandb):
    run = tmp_path / "run"
    train(tiny_config(tiny_model_dir, run, updates=1), progress=False, quiet=True)
    train(tiny_config(tiny_model_dir, run), resume=True, progress=False, quiet=True)
    logged = read_offline_run(run)
    assert len(logged["files"]) == 2 and len(logged["run_ids"]) == 1  # one W&B run, in two offline parts
    assert sorted({r["_step"] for r in logged["history"]}) == [0, 1, 2]
    assert json.loads((run / "trackers" / "wandb.json").read_text())["id"] in logged["run_ids"]


def test_evaluation_numbers_and_transcript_rows_are_flat():
    result = {"accuracy": 0.5, "episodes": 4, "heldout": True, "roles": {"actor_0": {"own_accuracy": 0.25, "note": "x"}}}
    assert evaluation_numbers("eval_after", result) == {
        "eval_after/accuracy": 0.5,
        "eval_after/episodes": 4,
        "eval_after/actor_0/own_accuracy": 0.25,
    }
    t = {
        "episode": 7,
        "solved": None,
        "return": 1.0,
        "steps": [{"round": 0, "agent": "a", "observation": {"text": "2+2?", "x": ""}, "action": "4", "reward": 1.0}],
    }
    assert transcript_rows([t]) == [[7, "not reported", 1.0, 0, "a", "[text]\n2+2?", "4", 1.0]]


@pytest.mark.parametrize(
    "override, needle",
    [
        ("log.project=", "log.project must be"),
        ("log.project=a/b", "character W&B refuses"),
        ("log.wandb=1", "log.wandb must be true or false"),
    ],
)
def test_bad_log_settings_are_one_line(override, needle):
    with pytest.raises(ConfigError, match=needle):
        validate(load(overrides=[override]))


def test_log_wandb_without_wandb_is_refused_before_any_file(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"pip install 'marft\[trackers\]'"):
        train(TrainConfig(run_dir=str(run), updates=0, log=LogConfig(wandb=True)), progress=False, quiet=True)
    assert not run.exists()


def test_importing_marft_agents_and_its_trainer_does_not_import_wandb():
    code = (
        "import sys, marft_agents, marft_agents.cli, marft_agents.training.trainer, marft_agents.runs.trackers\n"
        "from marft_agents import *\n"
        "print('wandb' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
