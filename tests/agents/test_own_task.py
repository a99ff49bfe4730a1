"""A user's task from a module outside the repository reaches the trainer: --import, an entry point, module:Class."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OWN_TASK = Path(__file__).parent.parent / "fixtures" / "own_task" / "hiddensum.py"


@pytest.fixture
def outside(tmp_path):
    """A folder outside the checkout holding the user's package (and, for entry points, its metadata)."""
    folder = tmp_path / "site"
    folder.mkdir()
    shutil.copy(OWN_TASK, folder / "hiddensum.py")
    return folder


def marft(args, folder: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "marft_agents.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def short_run(model_dir, run_dir) -> list[str]:
    return [
        "--no-progress",
        f"model={model_dir}",
        f"run_dir={run_dir}",
        "updates=2",
        "episodes_per_update=4",
        "eval_episodes=4",
        "eval_rounds=0",
        "eval_every=0",
        "max_new_tokens=6",
        "marft.minibatch_size=4",
        "threads=1",
    ]


def test_without_import_the_id_is_unknown_and_the_error_says_how(outside, tmp_path, tiny_model_dir):
    out = marft(["train", "env=newcomer/HiddenSum-v0", *short_run(tiny_model_dir, tmp_path / "r")], outside, tmp_path)
    assert out.returncode == 2 and "unknown env id 'newcomer/HiddenSum-v0'" in out.stderr
    assert "--import" in out.stderr and "marft.envs" in out.stderr


def test_import_flag_trains_the_task(outside, tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    out = marft(["train", "--import", "hiddensum", "env=newcomer/HiddenSum-v0", *short_run(tiny_model_dir, run)], outside, tmp_path)
    assert out.returncode == 0, out.stderr
    # the newcomer's env reports no success: mean return is the headline, in the summary and the table
    summary = json.loads((run / "summary.json").read_text())
    assert summary["headline"]["metric"] == "mean_return" and not summary["eval_before"]["success_reported"]
    table = out.stdout.splitlines()
    assert table[1].startswith("mean return (greedy; 4 episodes of the env as configured")
    assert "held-out" not in out.stdout and "attempts" not in out.stdout
    assert "standard error of the mean return on 4 episodes" in table[-1]
    # transcripts of both evaluations, printed by marft show
    for name in ("eval_before", "eval_after"):
        lines = (run / "samples" / f"{name}.jsonl").read_text().splitlines()
        steps = json.loads(lines[0])["steps"]
        assert [s["agent"] for s in steps] == ["scout_0", "scout_1", "summer_0"]
        assert "Your number is" in steps[0]["observation"]["text"]
    shown = marft(["show", str(run)], outside, tmp_path)
    assert shown.returncode == 0 and "=== eval_after, episode" in shown.stdout and "[action]" in shown.stdout
    assert "solved not reported" in shown.stdout
    out = marft(["eval", "--import", "hiddensum", "--run", str(run), "--episodes", "2"], outside, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "mean return (greedy; 2 episodes of the env as configured" in out.stdout
    listed = marft(["envs", "--import", "hiddensum"], outside, tmp_path)
    assert "newcomer/HiddenSum-v0" in listed.stdout


def test_an_entry_point_needs_no_flag(outside, tmp_path, tiny_model_dir):
    meta = outside / "hiddensum-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: hiddensum\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text("[marft.envs]\nhiddensum = hiddensum:register_envs\n")
    run = tmp_path / "run"
    out = marft(["train", "env=newcomer/HiddenSum-v0", *short_run(tiny_model_dir, run)], outside, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "newcomer/HiddenSum-v0" in marft(["envs"], outside, tmp_path).stdout


@pytest.mark.slow  # a third whole CLI training run (~15 s); --import and entry points stay
def test_a_module_class_id_trains(outside, tmp_path, tiny_model_dir):
    out = marft(["train", "env=hiddensum:HiddenSum", *short_run(tiny_model_dir, tmp_path / "run")], outside, tmp_path)
    assert out.returncode == 0, out.stderr


def test_a_run_whose_reward_stays_zero_warns_with_the_likely_causes(outside, tmp_path, tiny_model_dir):
    # the tiny random model never boxes the right sum: every reward is 0
    run = tmp_path / "run"
    out = marft(["train", "--import", "hiddensum", "env=newcomer/HiddenSum-v0", *short_run(tiny_model_dir, run)], outside, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "every reward of the first 2 updates was exactly 0" in out.stderr
    assert "model cannot do the task" in json.loads((run / "summary.json").read_text())["warnings"][0]


def test_a_failing_import_is_one_line(outside, tmp_path, tiny_model_dir):
    (outside / "broken_task.py").write_text("raise RuntimeError('my bug')\n")
    out = marft(["train", "--import", "broken_task", *short_run(tiny_model_dir, tmp_path / "r")], outside, tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().endswith("cannot import 'broken_task' (--import / imports): RuntimeError: my bug")
    assert not (tmp_path / "r").exists()


def marft_script(args, cwd: Path) -> subprocess.CompletedProcess:
    """The installed ``marft`` command (not ``python -m``, which puts the working directory on the path itself)."""
    script = Path(sys.executable).with_name("marft")
    if not script.exists():
        pytest.skip("no installed marft script beside this interpreter")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(script), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_import_finds_a_module_in_the_working_directory_and_takes_a_file_path(outside, tmp_path):
    by_name = marft_script(["envs", "--import", "hiddensum"], cwd=outside)
    assert by_name.returncode == 0 and "newcomer/HiddenSum-v0" in by_name.stdout, by_name.stderr
    by_path = marft_script(["envs", "--import", "./hiddensum.py"], cwd=outside)
    assert by_path.returncode == 0 and "newcomer/HiddenSum-v0" in by_path.stdout, by_path.stderr
    elsewhere = marft_script(["envs", "--import", str(outside / "hiddensum.py")], cwd=tmp_path)
    assert elsewhere.returncode == 0 and "newcomer/HiddenSum-v0" in elsewhere.stdout, elsewhere.stderr
    missing = marft_script(["envs", "--import", "./nothere.py"], cwd=outside)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1 and "nothere.py" in missing.stderr


def test_help_config_for_an_unknown_algorithm_mentions_import(tmp_path):
    out = marft_script(["train", "--help-config", "--algo", "rloo"], cwd=tmp_path)
    assert out.returncode == 2 and "--import MODULE" in out.stderr and len(out.stderr.strip().splitlines()) == 1
