"""Run files: written inside the folder, never through a link, never half; the run lock; signal handling."""

from __future__ import annotations

import errno
import os
import signal

import pytest
import torch

from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs import files as run_files
from marft_agents.runs.lock import LOCK, RunLock, RunLockedError
from marft_agents.training.interrupts import RunInterrupted, StopOnSignal


@pytest.fixture
def outside(tmp_path):
    """A folder outside the run folder, with one file a link might point at."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    return folder


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    return folder


def test_whole_files_are_replaced_by_rename_and_leave_no_temporary_file(run):
    run_files.write_text(run, "summary.json", "one")
    inode = (run / "summary.json").stat().st_ino
    run_files.write_text(run, "summary.json", "two")
    assert (run / "summary.json").read_text() == "two"
    assert (run / "summary.json").stat().st_ino != inode  # a new file renamed over the old, not rewritten in place
    run_files.write_text(run, "samples/eval_after.jsonl", "{}\n")  # missing folders are made
    assert sorted(p.name for p in run.rglob("*")) == ["eval_after.jsonl", "samples", "summary.json"]


def test_a_failing_writer_leaves_the_old_file_and_no_partial_one(run):
    run_files.write_text(run, "summary.json", "old")

    def dies(f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_files.write_file(run, "summary.json", dies)
    assert (run / "summary.json").read_text() == "old"
    assert [p.name for p in run.iterdir()] == ["summary.json"]


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_a_link_at_a_file_name_is_refused_and_its_target_untouched(run, outside, dangling):
    target = outside / ("new.txt" if dangling else "precious.txt")
    (run / "summary.json").symlink_to(target)
    for write in (lambda: run_files.write_text(run, "summary.json", "x"), lambda: run_files.append_text(run, "summary.json", "x")):
        with pytest.raises(run_files.LinkError, match="summary.json is a symbolic link"):
            write()
    assert (not target.exists()) if dangling else target.read_text() == "keep me"
    assert (run / "summary.json").is_symlink()  # refused, not silently replaced


@pytest.mark.parametrize("rel", ["samples/eval_after.jsonl", "checkpoints/latest"])
def test_a_link_at_a_folder_on_the_way_is_refused(run, outside, rel):
    (run / rel.split("/")[0]).symlink_to(outside, target_is_directory=True)
    with pytest.raises(run_files.LinkError, match=f"{rel.split('/')[0]} is a symbolic link"):
        run_files.write_text(run, rel, "x")
    with pytest.raises(run_files.LinkError):
        run_files.append_text(run, rel, "x")
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]


def test_the_run_folder_itself_may_be_a_link(tmp_path, outside):
    (tmp_path / "runs").symlink_to(outside, target_is_directory=True)
    run_files.write_text(tmp_path / "runs", "config.json", "{}")
    run_files.append_text(tmp_path / "runs", "metrics.jsonl", "a\n")
    run_files.append_text(tmp_path / "runs", "metrics.jsonl", "b\n")
    assert (outside / "config.json").read_text() == "{}" and (outside / "metrics.jsonl").read_text() == "a\nb\n"


def test_a_checkpoint_folder_that_is_a_link_is_refused(tmp_path, outside):
    (tmp_path / "checkpoints").symlink_to(outside, target_is_directory=True)
    (outside / ".stale.tmp").write_text("not the run's")
    with pytest.raises(run_files.LinkError, match="checkpoints is a symbolic link"):
        ckpt.save_checkpoint(tmp_path / "checkpoints", 1, {"weights": torch.ones(2)})
    assert sorted(p.name for p in outside.iterdir()) == [".stale.tmp", "precious.txt"]  # nothing removed outside


def enospc_oserror(obj, f):
    raise OSError(errno.ENOSPC, "No space left on device")


def enospc_as_torch_says_it(obj, f):
    # what torch.save raises on a full disk: its zip writer's RuntimeError, the OSError as its context
    try:
        raise OSError(errno.ENOSPC, "No space left on device")
    except OSError:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")  # noqa: B904 (torch keeps the OSError as __context__, as this does)


@pytest.mark.parametrize("failing_save", [enospc_oserror, enospc_as_torch_says_it], ids=["oserror", "torch"])
def test_a_full_disk_names_the_disk_and_the_checkpoint_kept(tmp_path, monkeypatch, failing_save):
    folder = tmp_path / "checkpoints"
    ckpt.save_checkpoint(folder, 1, {"weights": torch.ones(3)})
    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(ckpt.CheckpointWriteError) as err:
        ckpt.save_checkpoint(folder, 2, {"weights": torch.zeros(3)})
    monkeypatch.undo()
    message = str(err.value)
    assert message.startswith(f"cannot write checkpoint {folder / 'update_000002.pt'}: the disk holding {folder} is full")
    assert message.endswith(f"the previous checkpoint {folder / 'update_000001.pt'} is intact")
    assert err.value.errno == errno.ENOSPC and "\n" not in message
    assert sorted(p.name for p in folder.iterdir()) == ["latest", "update_000001.pt"]
    assert torch.equal(ckpt.load_checkpoint(ckpt.latest_checkpoint(folder))["weights"], torch.ones(3))


def test_a_runtime_error_that_is_no_write_failure_is_not_renamed(tmp_path, monkeypatch):
    def bug(obj, f):
        raise RuntimeError("a bug in the state dict")

    monkeypatch.setattr(torch, "save", bug)
    with pytest.raises(RuntimeError, match="a bug in the state dict"):
        ckpt.save_checkpoint(tmp_path / "checkpoints", 1, {})


# -- the run lock -------------------------------------------------------------------------------------


def test_a_second_lock_is_refused_naming_the_holder_and_released_on_close(run):
    with RunLock(run):
        assert (run / LOCK).read_text() == f"{os.getpid()}\n"
        with pytest.raises(RunLockedError, match=f"in use by another marft run \\(PID {os.getpid()}\\)"):
            RunLock(run)
    RunLock(run).release()  # free again; the file stays (deleting it would let two runs lock two files)
    assert (run / LOCK).exists()


def test_a_lock_file_that_is_a_link_is_refused(run, outside):
    (run / LOCK).symlink_to(outside / "precious.txt")
    with pytest.raises(run_files.LinkError, match="run.lock is a symbolic link"):
        RunLock(run)
    assert (outside / "precious.txt").read_text() == "keep me"


# -- signals --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_an_update_waits_for_its_end_and_a_second_stops_at_once(signum, capsys):
    with StopOnSignal() as stop:
        stop.deferring = True
        os.kill(os.getpid(), signum)
        assert stop.requested == signum  # noted, the update goes on
        assert "finishing this update" in capsys.readouterr().err
        with pytest.raises(RunInterrupted) as err:
            os.kill(os.getpid(), signum)
    assert err.value.exit_code == 128 + signum
    assert signal.getsignal(signum) is not stop._handle  # the previous handler is back


def test_a_signal_outside_an_update_stops_at_once():
    with StopOnSignal(), pytest.raises(RunInterrupted, match="stopped by SIGTERM") as err:
        os.kill(os.getpid(), signal.SIGTERM)
    assert err.value.exit_code == 143


def test_take_back_restores_the_handlers_a_library_replaced():
    with StopOnSignal() as stop:
        signal.signal(signal.SIGTERM, lambda *a: None)  # what ray.init does in the driver
        stop.take_back()
        with pytest.raises(RunInterrupted):
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_dangling_link_counts_as_a_run_file(run, outside):
    from marft_agents.runs import folder as run_folder

    assert not run_folder.holds_run(run)
    (run / "metrics.jsonl").symlink_to(outside / "nothing-here")
    assert run_folder.holds_run(run)  # exists() is False for it; lexists() is not


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_a_write_the_disk_refuses_names_the_disk():
    # /dev/full answers every write with ENOSPC, as a full disk does
    with pytest.raises(run_files.RunWriteError, match="cannot write /dev/full: the disk holding /dev is full") as err:
        run_files.append_text("/dev", "full", "a metrics line\n")
    assert err.value.errno == errno.ENOSPC
