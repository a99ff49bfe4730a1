"""Issue 51: non-finite checkpoints, a missing ``latest``, ``marft eval`` of a GPU run on a CPU, and round-3 leftovers.

Each test fails on the code before the fix: a NaN checkpoint that evaluated as a normal result, advice
to ``--overwrite`` (which deletes the run) where a checkpoint was there to continue from, advice that
the command it names refuses, a check that came only after the work, or a file outside a run followed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch
from agent_helpers import base_args
from test_untrusted_runs import config_for, refused

from marft_agents.cli import main as cli
from marft_agents.runs import checkpoint as ckpt
from marft_agents.training.config import ConfigError
from marft_agents.training.init_from import load_init_adapters
from marft_agents.training.trainer import build_policy


def spoil_latest(run: Path, value: float) -> tuple[Path, str, str]:
    """Set one weight of the latest checkpoint's first adapter to ``value``; returns the file, adapter and tensor."""
    latest = ckpt.latest_checkpoint(run / "checkpoints")
    state = torch.load(latest, weights_only=True)
    adapter = sorted(state["algo"]["adapters"])[0]
    name = sorted(state["algo"]["adapters"][adapter])[0]
    state["algo"]["adapters"][adapter][name].view(-1)[0] = value
    torch.save(state, latest)
    return latest, adapter, name


def eval_argv(run: Path, *extra: str) -> list[str]:
    return ["eval", "--run", str(run), "--episodes", "2", "max_new_tokens=4", "threads=1", *extra]


# -- 1: non-finite adapters, a missing latest ---------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_eval_refuses_non_finite_adapters(run_copy, value, capsys):
    latest, adapter, name = spoil_latest(run_copy, value)
    err = refused(eval_argv(run_copy), str(latest), capsys)
    assert repr(name) in err and repr(adapter) in err and ("NaN" if value != value else "infinite") in err, err
    assert "update_000001.pt" in err, err  # the previous checkpoint, to point latest at


def test_resume_refuses_non_finite_adapters_before_writing(run_copy, tiny_model_dir, capsys):
    latest, _, name = spoil_latest(run_copy, float("nan"))
    err = refused(["train", "--resume", "--no-progress", *base_args(tiny_model_dir, run_copy)], str(latest), capsys, run_copy)
    assert repr(name) in err and "NaN" in err, err


def test_init_from_refuses_non_finite_adapters(run_copy, tiny_model_dir, tmp_path):
    latest, _, name = spoil_latest(run_copy, float("nan"))
    config = config_for(tiny_model_dir, tmp_path / "new", init_from=str(run_copy))
    policy = build_policy(config, ["reasoner_0", "actor_0"])
    with pytest.raises(ConfigError, match="NaN") as info:
        load_init_adapters(config, policy)
    assert str(latest) in str(info.value) and repr(name) in str(info.value)


def test_resume_without_latest_names_the_newest_checkpoint(run_copy, tiny_model_dir, capsys):
    (run_copy / "checkpoints" / ckpt.LATEST).unlink()
    err = refused(["train", "--resume", "--no-progress", *base_args(tiny_model_dir, run_copy)], "update_000002.pt", capsys, run_copy)
    assert "point latest at it" in err, err
    err = refused(eval_argv(run_copy), "update_000002.pt", capsys, run_copy)
    (run_copy / "checkpoints" / ckpt.LATEST).write_text("update_000002.pt\n")  # what the advice says: it resumes
    assert cli(["train", "--resume", "--no-progress", *base_args(tiny_model_dir, run_copy)]) == 0


# -- 2: a GPU run evaluated on a CPU -------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_eval_of_a_gpu_run_on_a_cpu_takes_the_advice(run_copy, capsys):
    config = json.loads((run_copy / "config.json").read_text())
    config["device"] = "cuda"
    (run_copy / "config.json").write_text(json.dumps(config))
    err = refused(eval_argv(run_copy), "device=cpu", capsys, run_copy)
    assert cli(eval_argv(run_copy, "device=cpu")) == 0, capsys.readouterr().err  # the advice works
    assert "accuracy" in capsys.readouterr().out, err


# -- 3: round-3 leftovers --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["/proc/marft_transcripts.jsonl", "a" * 300 + ".jsonl"])
def test_eval_refuses_an_unwritable_transcripts_path_before_playing(name, run_copy, tmp_path, monkeypatch, capsys):
    import marft_agents.rollout.evaluation as evaluation

    def no_play(*args, **kwargs):
        raise AssertionError("the evaluation ran before --transcripts was checked")

    monkeypatch.setattr(evaluation, "evaluate", no_play)
    path = name if name.startswith("/") else str(tmp_path / name)
    refused(eval_argv(run_copy, "--transcripts", path), "--transcripts", capsys)


def test_init_from_refuses_a_latest_outside_the_run(run_copy, tiny_model_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(ckpt.latest_checkpoint(run_copy / "checkpoints"), elsewhere / "update_000009.pt")
    config = config_for(tiny_model_dir, tmp_path / "new", init_from=str(run_copy))
    policy = build_policy(config, ["reasoner_0", "actor_0"])
    latest = run_copy / "checkpoints" / ckpt.LATEST
    latest.write_text("../../elsewhere/update_000009.pt\n")  # a pointer file naming a file outside the folder
    with pytest.raises(ConfigError, match="not a checkpoint file of"):
        load_init_adapters(config, policy)
    latest.unlink()
    latest.symlink_to(tmp_path / "pointer")  # a link to a pointer file outside
    (tmp_path / "pointer").write_text("update_000002.pt\n")
    with pytest.raises(ConfigError, match="is a symbolic link"):
        load_init_adapters(config, policy)
    latest.unlink()
    (run_copy / "checkpoints" / "update_000002.pt").unlink()
    (run_copy / "checkpoints" / "update_000002.pt").symlink_to(elsewhere / "update_000009.pt")
    latest.write_text("update_000002.pt\n")  # the checkpoint itself a link to a file outside
    with pytest.raises(ConfigError, match="not a checkpoint file of"):
        load_init_adapters(config, policy)


def test_eval_refuses_a_latest_outside_the_run(run_copy, tmp_path, capsys):
    shutil.copy(ckpt.latest_checkpoint(run_copy / "checkpoints"), tmp_path / "outside.pt")
    (run_copy / "checkpoints" / ckpt.LATEST).write_text(f"{tmp_path / 'outside.pt'}\n")  # an absolute path
    refused(eval_argv(run_copy), "not a checkpoint file of", capsys)


def test_show_skips_blank_lines(finished_run, tmp_path, capsys):
    lines = (finished_run / "samples" / "eval_after.jsonl").read_text().splitlines()
    out = tmp_path / "t.jsonl"
    out.write_text("\n" + lines[0] + "\n\n   \n\t\n" + "\n".join(lines[1:]) + "\n\n")
    assert cli(["show", str(out)]) == 0
    assert capsys.readouterr().out.count("=== ") == len(lines)
    out.write_text(lines[0] + "\n\nnot json\n")
    err = refused(["show", str(out)], f"{out}:3", capsys)  # a bad line is named by its own number
    assert "not a JSON transcript" in err


KILLED_RUN = r"""
import os, signal, ray
from marft_agents.distributed.cluster import connect
from marft_agents.distributed.config import DistributedConfig
from marft_agents.distributed.session import marked_pids

connect(DistributedConfig(workers=1), cpus=1)

@ray.remote
def pid():
    return os.getpid()

ray.get(pid.remote())
folder = os.path.dirname(os.environ["RAY_AUTH_TOKEN_PATH"])
print("FOLDER", folder, len(marked_pids(folder)), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # kill -9 of the trainer: no shutdown runs
"""


def test_a_killed_runs_local_cluster_ends_without_waiting_for_the_next_run(tmp_path):
    pytest.importorskip("ray")
    import subprocess
    import sys
    import tempfile
    import time

    from marft_agents.distributed.session import marked_pids

    tmp = tempfile.mkdtemp(prefix="mt-", dir="/tmp")  # short: Ray's sockets go under it
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}
    env.update(HOME=str(tmp_path), TMPDIR=tmp, HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    folder = None
    try:
        done = subprocess.run([sys.executable, "-c", KILLED_RUN], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == -9, done.stderr[-3000:]
        _, folder, count = next(x for x in done.stdout.splitlines() if x.startswith("FOLDER ")).split()
        assert int(count) >= 3  # GCS, the raylet, Ray's agents, the worker
        deadline = time.monotonic() + 30
        while (marked_pids(folder) or os.path.exists(folder)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert marked_pids(folder) == [] and not os.path.exists(folder)
    finally:
        for pid in marked_pids(folder) if folder else []:  # what the fix did not end
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
