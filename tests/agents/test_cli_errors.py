"""Bad input to the CLI: one line on stderr, exit status 2, and the run folder exactly as it was.

Each row is a command a user might type, with what the one line must say. Commands that act on an
existing run get a fresh copy of one tiny finished run (2 updates, a checkpoint after each). The
last sections are runs that stop midway: a full disk (exit 1) and SIGINT/SIGTERM (130/143), each
with one line naming the checkpoint to continue from and the command that does.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from agent_helpers import base_args

from marft_agents.cli import main as cli
from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs.lock import RunLock


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a hash of its content."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


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
    (["updates=-1"], "updates must be >= 0"),
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
    # bounds on values that used to end in inf/nan, a hang or a traceback
    (["marft.lr=1e308"], "marft.lr must be in (0, 1)"),
    (["marft.lr=1"], "marft.lr must be in (0, 1)"),
    (["marft.critic_lr=5"], "marft.critic_lr must be in (0, 1)"),
    (["eval_episodes=1000000000"], "eval_episodes must be in [1, 10000]"),
    (["lora_r=100000"], "lora_r=100000 is above the model's hidden size 32"),
    (["env_kwargs.n_agents=1000"], "n_agents must be at least 1 and at most 64, got 1000"),  # was 26 s in make()
    (["env_kwargs.n_agents=1000000"], "n_agents must be at least 1 and at most 64"),  # was out of memory
    (['env_kwargs.n_agents="3"'], "env_kwargs.n_agents must be of type int (or null), got '3'"),
    (["seed=-1"], "seed must be an integer in [0, 4294967295], got -1"),
    ([f"seed={2**70}"], f"seed must be an integer in [0, 4294967295], got {2**70}"),
    (["distributed.workers=1000"], ("distributed.workers=1000 x distributed.cpus_per_worker=1 needs 1000 CPUs, but this machine has")),
    (["env_kwargs.x=" + "[" * 1000 + "]" * 1000], "env_kwargs.x: nested more than 32 levels deep"),
]


@pytest.mark.parametrize("extra, message", NEW_RUN_CASES, ids=[c[0][-1] for c in NEW_RUN_CASES])
def test_a_bad_value_is_refused_before_anything_is_written(extra, message, tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    refused(["train", "--no-progress", *base_args(tiny_model_dir, run), *extra], message, capsys)
    assert not run.exists()


CHOICE_CASES = [
    (["marft.sequential.order=bogus"], "marft.sequential.order must be one of ['random', 'fixed'], got 'bogus'"),
    (["marft.logp_reduction=bogus"], "marft.logp_reduction must be one of ['sum', 'mean'], got 'bogus'"),
    (["algo=grpo", "grpo.grouping=bogus"], "grpo.grouping must be one of ['problem', 'agent_round', 'tree'], got 'bogus'"),
    (["algo=grpo", "grpo.tree_pick=worst"], "grpo.tree_pick must be one of ['best', 'random_upstream', 'sample'], got 'worst'"),
    (["generation.engine=sglang"], "generation.engine must be one of ['hf', 'vllm'], got 'sglang'"),
]


@pytest.mark.parametrize("extra, message", CHOICE_CASES, ids=[c[0][-1] for c in CHOICE_CASES])
def test_a_bogus_choice_is_one_line_before_a_model_loads(extra, message, tmp_path, capsys, monkeypatch):
    import transformers

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the bogus choice was refused")

    for cls in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        monkeypatch.setattr(cls, "from_pretrained", no_loading)
    run = tmp_path / "run"
    assert cli(["train", "--no-progress", f"run_dir={run}", *extra]) == 2
    assert capsys.readouterr().err == f"marft train: error: {message}\n"
    assert not run.exists()


def test_a_bogus_choice_exits_2_from_the_command_line(tmp_path):
    run = tmp_path / "run"
    out = subprocess.run(
        [sys.executable, "-m", "marft_agents.cli", "train", "marft.sequential.order=bogus", f"run_dir={run}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert (out.returncode, out.stderr) == (
        2,
        "marft train: error: marft.sequential.order must be one of ['random', 'fixed'], got 'bogus'\n",
    )
    assert not run.exists()


def test_a_huge_wrongly_typed_value_is_quoted_in_80_characters(tiny_model_dir, tmp_path, capsys):
    huge = "x" * 50_000_000
    refused(
        ["train", *base_args(tiny_model_dir, tmp_path / "run"), f'temperature="{huge}"'], "temperature must be a float, got 'xxx", capsys
    )
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
    refused(["train", f"run_dir={tmp_path / 'r'}", "--no-progress", "temperature=0"], "temperature must be >= 0.001", capsys)


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
    refused(["eval", "--run", str(finished_run), "--episodes", episodes], "--episodes must be from 1 to 10000", capsys, finished_run)


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


@pytest.mark.parametrize(
    "extra, message",
    [
        (["seed=5"], "differs from the run's in seed (0 -> 5)"),
        (["lora_r=4"], "lora_r (8 -> 4)"),
        (["marft.lr=0.001"], "marft.lr (0.0003 -> 0.001)"),
        (["episodes_per_update=8"], "episodes_per_update (4 -> 8)"),
        (["env=marft/MathSolo-v0"], "env ("),
        (["generation.dtype=bfloat16"], 'generation.dtype ("float32" -> "bfloat16")'),
        (["generation.tis_cap=2"], "generation.tis_cap (null -> 2)"),
    ],
)
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
    refused(["train", "--resume", *base_args(tiny_model_dir, run_copy)], "eval_before.json is missing", capsys, run_copy)


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
    refused(
        ["eval", "--run", str(finished_run), "--env", "marft/MathSolo-v0", "--episodes", "2"], "needs ['solver_0']", capsys, finished_run
    )


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


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--max-steps", "-1", "max_steps must be at least 0"),
        ("--batch-size", "0", "batch_size must be at least 1"),
        ("--lr", "-0.1", "lr and seconds must be positive"),
    ],
)
def test_pretrain_refuses_nonsense_before_writing(option, value, message, tmp_path, capsys):
    out = tmp_path / "model"
    refused(["pretrain", option, value, "--out", str(out)], message, capsys)
    assert not out.exists()


# -- symbolic links where a run writes: refused in one line, whatever the mode; the target untouched ------

LINK_CASES = [  # (mode, the name that is a link, what it points at); the first six: links a hostile tester planted
    ("new", "metrics.jsonl", "nothing"),
    ("new", "config.json", "nothing"),
    ("new", "eval_before.json", "nothing"),
    ("resume", "summary.json", "a file"),
    ("resume", "curves.png", "a file"),
    ("resume", "samples", "a folder"),
    ("resume", "checkpoints", "a folder"),
    ("resume", "checkpoints/latest", "a file"),
    ("resume", "run.lock", "a file"),
    ("overwrite", "tb", "a folder"),
    ("overwrite", "metrics.jsonl", "a file"),
    ("new", "samples/eval_before.jsonl", "nothing"),
]
MODE_FLAGS = {"new": [], "resume": ["--resume"], "overwrite": ["--overwrite"]}


@pytest.mark.parametrize("mode, name, target", LINK_CASES, ids=[f"{m}-{n}-{t.split()[-1]}" for m, n, t in LINK_CASES])
def test_a_link_where_a_run_writes_is_refused_and_its_target_untouched(mode, name, target, finished_run, tmp_path, tiny_model_dir, capsys):
    run = tmp_path / "run"
    if mode == "new":
        run.mkdir()
    else:
        shutil.copytree(finished_run, run)
    outside = tmp_path / "outside"
    outside.mkdir()
    link, there = run / name, outside / Path(name).name
    link.parent.mkdir(parents=True, exist_ok=True)
    if target == "a folder":  # a copy of what was there, so following the link would look like the run's
        shutil.copytree(link, there) if link.is_dir() else there.mkdir()
        shutil.rmtree(link, ignore_errors=True)
    elif target == "a file":
        there.write_text("someone's notes")
        link.unlink(missing_ok=True)
    link.symlink_to(there, target_is_directory=target == "a folder")
    before = snapshot(outside)
    refused(["train", "--no-progress", *MODE_FLAGS[mode], *base_args(tiny_model_dir, run)], f"{link} is a symbolic link", capsys, run)
    assert snapshot(outside) == before and link.is_symlink()
    if target == "nothing":
        assert not there.exists(), "the run created the dangling link's target"


def test_plot_refuses_a_link_at_curves_png(run_copy, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    (run_copy / "curves.png").unlink()
    (run_copy / "curves.png").symlink_to(notes)
    refused(["plot", str(run_copy)], f"{run_copy / 'curves.png'} is a symbolic link", capsys, run_copy)
    assert notes.read_text() == "mine"


# -- one run at a time in a folder ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["new", "resume", "overwrite"])
def test_a_folder_in_use_by_another_run_is_refused_naming_its_pid(mode, run_copy, tmp_path, tiny_model_dir, capsys):
    run = tmp_path / "empty" if mode == "new" else run_copy
    run.mkdir(exist_ok=True)
    with RunLock(run):  # this process plays the other run
        refused(
            ["train", "--no-progress", *MODE_FLAGS[mode], *base_args(tiny_model_dir, run)],
            f"run_dir {run} is in use by another marft run (PID {os.getpid()})",
            capsys,
            run,
        )


# -- a full disk during a checkpoint: named, the previous checkpoint intact, and --resume continues ----------


def _enospc(obj, f):
    raise OSError(errno.ENOSPC, "No space left on device")


def _enospc_as_torch_says_it(obj, f):  # torch.save's own error on a full disk: the OSError is its context
    try:
        raise OSError(errno.ENOSPC, "No space left on device")
    except OSError:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")  # noqa: B904 (torch keeps the OSError as __context__, as this does)


@pytest.mark.parametrize("failing_save", [_enospc, _enospc_as_torch_says_it], ids=["oserror", "torch-runtimeerror"])
def test_a_full_disk_during_a_checkpoint_names_the_disk_and_the_checkpoint_kept(
    failing_save, tmp_path, monkeypatch, tiny_model_dir, capsys
):
    run, real_save, calls = tmp_path / "run", torch.save, []

    def second_save_fails(obj, f):
        calls.append(1)
        return (failing_save if len(calls) == 2 else real_save)(obj, f)

    monkeypatch.setattr(torch, "save", second_save_fails)
    assert cli(["train", "--no-progress", *base_args(tiny_model_dir, run)]) == 1
    monkeypatch.undo()
    full = capsys.readouterr().err
    err = full.strip().splitlines()[-1]  # after the tiny model's zero-reward warning
    folder = run / "checkpoints"
    assert err.startswith(
        f"marft train: error: cannot write checkpoint {folder / 'update_000002.pt'}: the disk holding {folder} is full"
    ), err
    assert f"the previous checkpoint {folder / 'update_000001.pt'} is intact; free some space" in err
    assert "Traceback" not in full and "inline_container" not in err
    assert sorted(p.name for p in folder.iterdir()) == ["latest", "update_000001.pt"]
    assert ckpt.load_checkpoint(ckpt.latest_checkpoint(folder))["update"] == 1
    command = shlex.split(err.split("continue with: ", 1)[1])
    assert command[:3] == ["marft", "train", "--resume"]
    assert cli(command[1:]) == 0
    assert [json.loads(line)["update"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [0, 1]


# -- SIGINT and SIGTERM: the update finishes, its checkpoint is written, one line says how to continue ------

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_after_the_update_with_a_checkpoint_and_resume_continues(signum, code, tmp_path, tiny_model_dir, capsys):
    run = tmp_path / "run"
    args = [a for a in base_args(tiny_model_dir, run) if not a.startswith(("updates=", "checkpoint_every="))]
    # far more updates than it will run, and no periodic checkpoint: the one it leaves is the signal's
    argv = ["train", "--no-progress", *args, "updates=100000", "checkpoint_every=0"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "marft_agents.cli", *argv], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        metrics, deadline = run / "metrics.jsonl", time.monotonic() + 240
        while not (metrics.is_file() and metrics.read_text().strip()):  # after its first update
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no update within 240 s"
            time.sleep(0.2)
        # a second run into the folder (here --overwrite, from this process) is refused with the PID
        assert cli(["train", "--overwrite", *argv[1:]]) == 2
        assert f"is in use by another marft run (PID {proc.pid})" in capsys.readouterr().err
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("marft train:")]
    name = signal.Signals(signum).name
    assert lines[0] == (f"marft train: {name}: finishing this update and writing its checkpoint (send it again to stop at once)")
    done = len(metrics.read_text().splitlines())
    latest = run / "checkpoints" / f"update_{done:06d}.pt"
    assert lines[1:] == [
        f"marft train: stopped by {name} after update {done}; resume from the checkpoint {latest}; "
        f"continue with: {shlex.join(['marft', 'train', '--resume', *argv[1:]])}"
    ]
    assert ckpt.latest_checkpoint(run / "checkpoints") == latest
    # the printed command continues the run; here with one more update than it did, to end soon
    assert cli(["train", "--resume", *[a if a != "updates=100000" else f"updates={done + 1}" for a in argv[1:]]]) == 0
    assert [json.loads(line)["update"] for line in metrics.read_text().splitlines()] == list(range(done + 1))
    assert json.loads((run / "summary.json").read_text())["resumed_from_update"] == done
