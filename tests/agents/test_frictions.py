"""Issue 50, item 7: the frictions of resuming a run, keeping its checkpoints and evaluating a run of an imported task.

Each test fails on the code before the fix: ``--resume run_dir=RUN`` rebuilt the config from the defaults (and
refused it with a long diff, ``null -> null`` among it), a run kept 2 checkpoints whatever it was told, and
``marft eval --run`` on a run of an imported task said "unknown env id" without the ``--import`` to add.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from agent_helpers import one_line

from marft_agents.cli import main as cli
from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs import folder as run_folder
from marft_agents.training.config import ConfigError, TrainConfig, describe, load, load_run, to_dict, validate

OWN_TASK = Path(__file__).parent.parent / "fixtures" / "own_task" / "hiddensum.py"


# -- 1: --resume run_dir=RUN continues from the run's own config -----------------------------------------------


def test_resume_with_run_dir_alone_continues_from_the_runs_config(run_copy, tiny_model_dir):
    # checkpoints.keep may change on resume: 3 keeps updates 1 and 2 of the first run besides the new one
    assert cli(["train", "--resume", "--no-progress", f"run_dir={run_copy}", "updates=3", "checkpoints.keep=3"]) == 0
    saved = json.loads((run_copy / "config.json").read_text())
    assert saved["model"] == str(tiny_model_dir) and saved["episodes_per_update"] == 4 and saved["updates"] == 3
    assert saved["checkpoints"] == {"keep": 3} and saved["run_dir"] == str(run_copy)
    assert json.loads((run_copy / "summary.json").read_text())["resumed_from_update"] == 2
    names = sorted(p.name for p in (run_copy / "checkpoints").glob("update_*.pt"))
    assert names == ["update_000001.pt", "update_000002.pt", "update_000003.pt"]


def test_resume_lists_only_the_overrides_that_differ_from_the_saved_values(run_copy, capsys):
    # seed=0 and marft.lr=3e-4 are the run's own values: no change; lora_r=4 is the one change
    argv = ["train", "--resume", f"run_dir={run_copy}", "seed=0", "marft.lr=3e-4", "lora_r=4"]
    assert cli(argv) == 2
    err = one_line(capsys)
    assert "--resume: the config differs from the run's in lora_r (8 -> 4); only updates," in err, err
    assert not (run_copy / "checkpoints" / "update_000003.pt").exists()


def test_resume_refuses_another_algorithm_in_one_line(run_copy, capsys):
    assert cli(["train", "--resume", "--algo", "grpo", f"run_dir={run_copy}"]) == 2
    err = one_line(capsys)
    assert f"{run_copy / 'config.json'} was trained with algo=marft, not algo=grpo" in err, err


def test_a_changed_algorithm_is_named_alone_and_a_key_on_one_side_is_unset():
    saved = {"algo": "marft", "marft": {"kl_gate": None, "lr": 3e-4}, "seed": 0, "agents": {}}
    current = {"algo": "grpo", "grpo": {"kl_gate": None}, "seed": 0, "agents": {"actor_0": {"temperature": 0.3}}}
    keys = run_folder.changed_keys(saved, current)
    assert keys == ["agents.actor_0.temperature", "algo"]
    assert run_folder.describe_changes(saved, current, keys) == ('agents.actor_0.temperature (unset -> 0.3), algo ("marft" -> "grpo")')


def test_resume_imports_what_a_run_records_only_when_the_command_names_it(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    plugin = tmp_path / "plugins" / "friction_plugin.py"
    plugin.parent.mkdir()
    plugin.write_text(f"from pathlib import Path\nPath({str(marker)!r}).touch()\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({**to_dict(TrainConfig()), "imports": [str(plugin)]}))
    with pytest.raises(ConfigError, match=re.escape(f"add --import {shlex.quote(str(plugin))} if you trust them")):
        load_run(run)
    assert not marker.exists()
    assert load_run(run, imports=[str(plugin)]).imports == [str(plugin)]  # named once, not twice
    assert marker.exists()
    assert load(run / "config.json", imports=[str(plugin)]).imports == [str(plugin)]  # --config RUN/config.json too

    monkeypatch.syspath_prepend(str(plugin.parent))
    (run / "config.json").write_text(json.dumps({**to_dict(TrainConfig()), "env": "friction_env_module:Chain"}))
    with pytest.raises(ConfigError, match="add env=friction_env_module:Chain if you trust it"):
        load_run(run)
    assert load_run(run, ["env=friction_env_module:Chain"]).env == "friction_env_module:Chain"
    assert "friction_env_module" not in sys.modules  # loading the config imports no env module


# -- 2: checkpoints.keep ----------------------------------------------------------------------------------------


def test_checkpoints_keep_is_a_checked_config_key(tmp_path, capsys):
    assert load(overrides=["checkpoints.keep=5"]).checkpoints.keep == 5
    with pytest.raises(ConfigError, match=r"^checkpoints.keep must be >= 0 \(0 keeps every checkpoint\), got -1$"):
        validate(load(overrides=["checkpoints.keep=-1"]))
    assert ("checkpoints.keep", 2) == next((k, d) for k, d, doc in describe() if k == "checkpoints.keep" and doc)
    run = tmp_path / "run"
    assert cli(["train", "model=/nonexistent/model", f"run_dir={run}", "checkpoints.keep=-1"]) == 2
    assert "checkpoints.keep must be >= 0" in one_line(capsys) and not run.exists()


@pytest.mark.parametrize("keep, kept", [(1, [5]), (3, [3, 4, 5]), (0, [1, 2, 3, 4, 5])])
def test_save_checkpoint_keeps_the_newest(keep, kept, tmp_path):
    for update in range(1, 6):
        ckpt.save_checkpoint(tmp_path / "checkpoints", update, {"algo": {}}, keep=keep)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("update_*.pt")) == [f"update_{u:06d}.pt" for u in kept]
    assert ckpt.latest_checkpoint(tmp_path / "checkpoints").name == "update_000005.pt"


# -- 3: marft eval --run of a run of an imported task --------------------------------------------------------------


def test_eval_of_an_imported_tasks_run_names_the_import_to_add_and_imports_nothing(run_copy, tmp_path, monkeypatch, capsys):
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(OWN_TASK, site / "friction_hiddensum.py")  # importable, as an installed task would be
    monkeypatch.syspath_prepend(str(site))
    config = json.loads((run_copy / "config.json").read_text())
    config.update(imports=["friction_hiddensum"], env="newcomer/HiddenSum-v0")
    (run_copy / "config.json").write_text(json.dumps(config))
    assert cli(["eval", "--run", str(run_copy), "--episodes", "1"]) == 2
    err = one_line(capsys)
    assert err.startswith("marft eval: error: unknown env id 'newcomer/HiddenSum-v0'"), err
    assert err.endswith("add --import friction_hiddensum if you trust them"), err
    assert "friction_hiddensum" not in sys.modules  # a run folder is data: the recorded module was not imported
