"""Secrets stay out of Ray's logs, a local cluster's folders are private, and what a killed run left is ended.

No Ray here: the variable filter is a pure function, and a killed run's cluster is played by dummy
processes that carry its session folder's marker (as Ray's processes inherit it from the run).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from marft_agents.distributed.environment import worker_env_vars
from marft_agents.distributed.session import MARKER, OWNER, end_leftovers, make_session_folder, marked_pids, owner_alive, start_time

ENVIRON = {
    "HF_TOKEN": "hf_secret",
    "HUGGING_FACE_HUB_TOKEN": "hf_secret2",
    "HF_HUB_OFFLINE": "1",
    "HF_HOME": "/data/hf",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
    "MARFT_RAY_TEST_FAULT": "/tmp/fault",
    "MARFT_CACHE": "/data/marft",
    "MARFT_TEST_SECRET": "s1",
    "MARFT_API_KEY": "s2",
    "marft_db_password": "s3",
    "MARFT_AUTH": "s4",
    "OPENAI_API_KEY": "s5",
    "AWS_SECRET_ACCESS_KEY": "s6",
    "HF_ENDPOINT": "https://user:pass@mirror",
    "PATH": "/usr/bin",
}


def test_the_workers_runtime_env_carries_settings_and_never_a_secret():
    assert worker_env_vars(ENVIRON) == {
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": "/data/hf",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "MARFT_RAY_TEST_FAULT": "/tmp/fault",
        "MARFT_CACHE": "/data/marft",
    }


def test_a_session_folder_is_private_and_names_its_owner(tmp_path):
    folder = Path(make_session_folder(str(tmp_path)))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / OWNER).stat().st_mode) == 0o600
    assert json.loads((folder / OWNER).read_text()) == {"pid": os.getpid(), "start": start_time(os.getpid())}
    assert owner_alive(folder)


def _dead_pid() -> tuple[int, int | None]:
    """The pid of a process that has ended, and the start time it had."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = start_time(child.pid)
    child.kill()
    child.wait()
    return child.pid, started


def _sleeper(marker: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != MARKER}
    if marker is not None:
        env[MARKER] = marker
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds processes through /proc")
def test_what_a_killed_run_left_is_ended_and_nothing_else(tmp_path):
    dead = Path(make_session_folder(str(tmp_path)))
    pid, started = _dead_pid()
    (dead / OWNER).write_text(json.dumps({"pid": pid, "start": started}))  # the run was killed with SIGKILL
    (dead / "ray").mkdir()
    alive = Path(make_session_folder(str(tmp_path)))  # a run still going (this process)
    elsewhere = tmp_path / "marft-ray-link"
    elsewhere.symlink_to(dead)
    left = _sleeper(str(dead))  # what Ray's agents are to a dead run: they carry its folder's marker
    live = _sleeper(str(alive))
    unrelated = _sleeper(None)
    similar = _sleeper(str(dead) + "x")  # another folder's marker that starts with the same text
    try:
        assert marked_pids(str(dead)) == [left.pid]
        assert end_leftovers(str(tmp_path)) == [str(dead)]
        assert left.wait(timeout=30) == -15  # SIGTERM
        assert live.poll() is None and unrelated.poll() is None and similar.poll() is None
        assert not dead.exists() and alive.is_dir() and elsewhere.is_symlink()
        assert end_leftovers(str(tmp_path)) == []  # the live run's folder is left alone
    finally:
        for proc in (left, live, unrelated, similar):
            proc.kill()
            proc.wait()


def test_a_folder_whose_owner_cannot_be_read_is_left_alone(tmp_path):
    folder = Path(make_session_folder(str(tmp_path)))
    (folder / OWNER).write_text("not json")
    assert owner_alive(folder) and end_leftovers(str(tmp_path)) == [] and folder.is_dir()
