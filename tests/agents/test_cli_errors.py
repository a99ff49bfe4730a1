"""Bad input to the CLI: one line on stderr, exit status 2, and the run folder exactly as it was.

Each row is a command a user might type, with what the one line must say. Commands that act on an
existing run get a fresh copy of one tiny finished run (2 updates, a checkpoint after each).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from marft_agents import checkpoint as ckpt
from marft_agents.cli import main as cli


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a hash of its content."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def base_args(model_dir, run_dir) -> list[str]:
    return [f"model={model_dir}", f"run_dir={run_dir}", "updates=2", "episodes_per_update=4", "eval_episodes=2",
            "eval_rounds=0", "eval_every=0", "checkpoint_every=1", "max_new_tokens=4", "marft.minibatch_size=4",
            "threads=1"]


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("finished") / "run"
    assert cli(["train", "--no-progress", *base_args(tiny_model_dir, run)]) == 0
    return run


@pytest.fixture
def run_copy(finished_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy


def refused(argv: list[str], message: str, capsys, folder: Path | None = None) -> None:
    """``argv`` exits 2 with one line containing ``message`` and leaves ``folder`` untouched."""
    before = snapshot(folder) if folder else None
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err, err
    assert "\n" not in err and "Traceback" not in err
    if folder is not None:
        assert snapshot(folder) == before, "a refused command changed the run folder"


# -- bad values for a new run: nothing may be created ------------------------------------------------

NEW_RUN_CASES = [
    (["temperature=0"], "temperature must be >= 0.001"),
    (["temperature=-1"], "temperature must be >= 0.001"),
    (["temperature=1e-300"], "temperature must be >= 0.001"),  # was: probability tensor contains inf/nan
    (["updates=0"], "updates must be >= 1"),
    (["episodes_per_update=0"], "episodes_per_update must be >= 1"),
    (["eval_episodes=0"], "eval_episodes must be in [1, 10000]"),
    (["threads=-1"], "threads must be >= 0"),
    (["marft.lr=Infinity"], "marft.lr must be a finite number"),
    (["marft.lr=NaN"], "marft.lr must be a finite number"),
    (["marft.ppo_epochs=-1"], "marft.ppo_epochs must be >= 1"),
    (["marft.clip_eps=-1"], "marft.clip_eps must be > 0"),
    (["marft.gamma=1.5"], "marft.gamma must be in [0, 1]"),
    (["adapter_mode=many"], "adapter_mode must be one of"),
    (["max_new_tokens=100000"], "does not fit the model's context"),
    (["env_kwargs.bogus=1"], "has no option 'bogus'"),
    (["env_kwargs.rouns=3"], "did you mean 'rounds'?"),
    (["env_kwargs.rounds=abc"], "env_kwargs.rounds must be of type int"),
    (["algo=ppo", "env=marft/MathSolo-v0", "marft.lr=1e-9"], "is a key of algo=marft, but this run uses algo=ppo"),
    # bounds on values that used to end in inf/nan, a hang or a traceback (issue 20)
    (["marft.lr=1e308"], "marft.lr must be in (0, 1)"),
    (["marft.lr=1"], "marft.lr must be in (0, 1)"),
    (["marft.critic_lr=5"], "marft.critic_lr must be in (0, 1)"),
    (["eval_episodes=1000000000"], "eval_episodes must be in [1, 10000]"),
    (["lora_r=100000"], "lora_r=100000 is above the model's hidden size 32"),
    (["env_kwargs.n_agents=1000"], "n_agents must be at least 1 and at most 64, got 1000"),  # was 26 s in make()
    (["env_kwargs.n_agents=1000000"], "n_agents must be at least 1 and at most 64"),  # was out of memory
    (['env_kwargs.n_agents="3"'], "env_kwargs.n_agents must be of type int (or null), got '3'"),
    (["seed=-1"], "seed must be an integer in [0, 4294967295], got -1"),
    ([f"seed={2 ** 70}"], f"seed must be an integer in [0, 4294967295], got {2 ** 70}"),
    (["distributed.workers=1000"], ("distributed.workers=1000 x distributed.cpus_per_worker=1 needs 1000 CPUs, "
                                    "but this machine has")),
    (["env_kwargs.x=" + "[" * 1000 + "]" * 1000], "env_kwargs.x: nested more than 32 levels deep"),
]


@pytest.mark.parametrize("extra, message", NEW_RUN_CASES, ids=[c[0][-1] for c in NEW_RUN_CASES])
def test_a_bad_value_is_refused_before_anything_is_written(extra, message, tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    refused(["train", "--no-progress", *base_args(tiny_model_dir, run), *extra], message, capsys)
    assert not run.exists()


def test_a_huge_wrongly_typed_value_is_quoted_in_80_characters(tiny_model_dir, tmp_path, capsys):
    huge = "x" * 50_000_000
    refused(["train", *base_args(tiny_model_dir, tmp_path / "run"), f'temperature="{huge}"'],
            "temperature must be a float, got 'xxx", capsys)
    # the refusal above consumed stderr; once more for its length
    cli(["train", *base_args(tiny_model_dir, tmp_path / "run"), f"env_kwargs.rounds={huge}"])
    err = capsys.readouterr().err.strip()
    assert "env_kwargs.rounds must be of type int" in err and err.endswith("…") and len(err) < 250, err[:300]
    for key in (huge, f"env_kwargs.{huge}"):  # a huge unknown key: named in 80 characters, matched in a moment
        cli(["train", *base_args(tiny_model_dir, tmp_path / "run"), f"{key}=1"])
        err = capsys.readouterr().err.strip()
        assert "no option" in err or "unknown config key" in err, err[:300]
        assert len(err) < 500 and "\n" not in err, err[:600]


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_config_nested_1000_deep_is_one_line(suffix, tmp_path, capsys):
    config = tmp_path / f"deep{suffix}"
    if suffix == ".json":
        config.write_text('{"a": ' * 1000 + "1" + "}" * 1000)
    else:
        config.write_text("a = " + "[" * 1000 + "]" * 1000 + "\n")
    refused(["train", "--config", str(config)], "nested more than 32 levels deep", capsys)
    shallow = tmp_path / f"tables{suffix}"  # nested tables within the recursion limit, past ours
    if suffix == ".json":
        shallow.write_text('{"a": ' * 100 + "1" + "}" * 100)
    else:
        shallow.write_text("[" + ".".join(["a"] * 100) + "]\nb = 1\n")
    refused(["train", "--config", str(shallow)], "nested more than 32 levels deep", capsys)


def test_overrides_may_follow_options(tiny_model_dir, tmp_path, capsys):
    # parsed as an override (and refused for its value), not "unrecognized arguments"
    refused(["train", f"run_dir={tmp_path / 'r'}", "--no-progress", "temperature=0"], "temperature must be >= 0.001",
            capsys)


def test_a_config_file_must_be_a_mapping(tmp_path, capsys):
    bad = tmp_path / "list.json"
    bad.write_text("[1, 2]")
    refused(["train", "--config", str(bad)], "a config must be a mapping", capsys)


def test_a_run_dir_that_is_a_file_is_refused(tiny_model_dir, tmp_path, capsys):
    file = tmp_path / "file"
    file.write_text("not a folder")
    refused(["train", *base_args(tiny_model_dir, file)], "is a file, not a folder", capsys)
    assert file.read_text() == "not a folder"


def test_a_run_dir_that_cannot_be_written_is_one_line(tiny_model_dir, capsys):
    # /proc refuses new folders even for root (chmod does not stop root)
    refused(["train", *base_args(tiny_model_dir, "/proc/marft-run")], "cannot write run_dir /proc/marft-run", capsys)


@pytest.mark.parametrize("episodes", ["0", "1000000000"])
def test_eval_refuses_episodes_out_of_range(episodes, finished_run, capsys):
    # 10**9 hung in the held-out draw
    refused(["eval", "--run", str(finished_run), "--episodes", episodes], "--episodes must be from 1 to 10000",
            capsys, finished_run)


# -- an existing run: refused unless resumed or overwritten, and never changed by a refusal ------------


def test_a_second_run_into_the_same_folder_is_refused(run_copy, tiny_model_dir, capsys):
    refused(["train", *base_args(tiny_model_dir, run_copy)], "already holds a run", capsys, run_copy)


def test_overwrite_replaces_the_old_run_and_latest_points_at_the_new_one(run_copy, tiny_model_dir, capsys):
    # the recipe: a 5-update run, then a 2-update run into the same folder
    args = [a for a in base_args(tiny_model_dir, run_copy) if not a.startswith("updates=")]
    assert cli(["train", "--no-progress", "--overwrite", *args, "updates=1"]) == 0
    latest = ckpt.latest_checkpoint(run_copy / "checkpoints")
    assert latest is not None and latest.name == "update_000001.pt"
    assert sorted(p.name for p in (run_copy / "checkpoints").glob("update_*.pt")) == ["update_000001.pt"]
    assert len((run_copy / "metrics.jsonl").read_text().splitlines()) == 1
    assert cli(["eval", "--run", str(run_copy), "--episodes", "2"]) == 0


@pytest.mark.parametrize("extra, message", [
    (["seed=5"], "differs from the run's in seed (0 -> 5)"),
    (["lora_r=4"], "lora_r (8 -> 4)"),
    (["marft.lr=0.001"], "marft.lr (0.0003 -> 0.001)"),
    (["episodes_per_update=8"], "episodes_per_update (4 -> 8)"),
    (["env=marft/MathSolo-v0"], "env ("),
    (["generation.dtype=bfloat16"], 'generation.dtype ("float32" -> "bfloat16")'),
    (["generation.tis_cap=2"], "generation.tis_cap (null -> 2)"),
])
def test_resume_refuses_a_changed_config(extra, message, run_copy, tiny_model_dir, capsys):
    refused(["train", "--resume", *base_args(tiny_model_dir, run_copy), *extra], message, capsys, run_copy)


def test_resume_accepts_more_updates(run_copy, tiny_model_dir):
    args = [a for a in base_args(tiny_model_dir, run_copy) if not a.startswith("updates=")]
    assert cli(["train", "--resume", "--no-progress", *args, "updates=3"]) == 0
    assert json.loads((run_copy / "config.json").read_text())["updates"] == 3


def test_resume_accepts_other_engine_resources(run_copy, tiny_model_dir):
    extra = ["generation.threads=1", "generation.kv_cache_gb=2", "generation.max_loras=4"]
    assert cli(["train", "--resume", "--no-progress", *base_args(tiny_model_dir, run_copy), *extra]) == 0
    assert json.loads((run_copy / "config.json").read_text())["generation"]["kv_cache_gb"] == 2.0


def test_resume_without_eval_before_names_the_file(run_copy, tiny_model_dir, capsys):
    (run_copy / "eval_before.json").unlink()
    refused(["train", "--resume", *base_args(tiny_model_dir, run_copy)], "eval_before.json is missing", capsys,
            run_copy)


@pytest.mark.parametrize("content", [b"", b"half a checkpoint", b"\x80\x04garbage"], ids=["empty", "text", "garbage"])
def test_a_broken_checkpoint_is_named_with_the_previous_one(content, run_copy, tiny_model_dir, capsys):
    (run_copy / "checkpoints" / "update_000002.pt").write_bytes(content)
    for argv in (["train", "--resume", *base_args(tiny_model_dir, run_copy)], ["eval", "--run", str(run_copy)]):
        refused(argv, "cannot read checkpoint", capsys, run_copy)
    cli(["eval", "--run", str(run_copy)])
    assert "the previous one is" in capsys.readouterr().err


class Payload:
    """Pickles into a call that would create a file when unpickled."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (Path.touch, (Path(self.target),))


def test_a_crafted_checkpoint_cannot_run_code(run_copy, tiny_model_dir, capsys, tmp_path):
    target = tmp_path / "pwned"
    torch.save({"update": 2, "algo": Payload(str(target))}, run_copy / "checkpoints" / "update_000002.pt")
    refused(["eval", "--run", str(run_copy)], "cannot read checkpoint", capsys)
    refused(["train", "--resume", *base_args(tiny_model_dir, run_copy)], "cannot read checkpoint", capsys)
    assert not target.exists()


def test_eval_on_an_env_with_other_agents_says_so(finished_run, capsys):
    refused(["eval", "--run", str(finished_run), "--env", "marft/MathSolo-v0", "--episodes", "2"],
            "needs ['solver_0']", capsys, finished_run)


def test_a_bad_metrics_line_is_named_and_a_blank_line_is_not_an_error(run_copy, tiny_model_dir, capsys):
    metrics = run_copy / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + "\n\n")  # blank trailing lines: resume still works
    args = [a for a in base_args(tiny_model_dir, run_copy) if not a.startswith("updates=")]
    assert cli(["train", "--resume", "--no-progress", *args, "updates=3"]) == 0
    metrics.write_text(metrics.read_text() + "{not json\n")
    (run_copy / "checkpoints" / "latest").write_text("update_000002.pt")  # resume from before the bad line
    cli(["train", "--resume", "--no-progress", *args, "updates=4"])
    err = capsys.readouterr().err
    assert f"{metrics}:4: not a metrics line" in err


def test_partial_files_of_a_killed_save_are_removed_on_resume(run_copy, tiny_model_dir):
    partial = run_copy / "checkpoints" / ".update_000003.pt.abc123.tmp"
    partial.write_bytes(b"x" * 1000)
    args = [a for a in base_args(tiny_model_dir, run_copy) if not a.startswith("updates=")]
    assert cli(["train", "--resume", "--no-progress", *args, "updates=3"]) == 0
    assert not partial.exists()


def test_partial_files_are_removed_on_the_next_save(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / ".update_000001.pt.xyz.tmp").write_bytes(b"partial")
    ckpt.save_checkpoint(folder, 1, {"weights": torch.ones(2)})
    assert sorted(p.name for p in folder.iterdir()) == ["latest", "update_000001.pt"]


@pytest.mark.parametrize("option, value, message", [
    ("--max-steps", "-1", "max_steps must be at least 0"),
    ("--batch-size", "0", "batch_size must be at least 1"),
    ("--lr", "-0.1", "lr and seconds must be positive"),
])
def test_pretrain_refuses_nonsense_before_writing(option, value, message, tmp_path, capsys):
    out = tmp_path / "model"
    refused(["pretrain", option, value, "--out", str(out)], message, capsys)
    assert not out.exists()
