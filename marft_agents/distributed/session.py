"""The private folder of a local Ray cluster that marft starts, and ending what a killed run left.

Each local cluster gets a fresh folder ``<tmp>/marft-ray-XXXXXXXX`` (:func:`make_session_folder`),
made 0700 so that only its owner can enter it. It holds:

- ``owner.json``: the process id and start time of the run that started the cluster;
- ``auth_token``: the cluster's token (0600);
- ``ray/``: Ray's temp folder (unless ``distributed.temp_dir`` names another), where Ray puts its
  sockets and logs. Ray makes that folder and its own sub-folders 0777 (``try_make_directory_shared``
  in ``ray/_common/utils.py``); inside a 0700 folder nobody else can reach them.

Every process of the cluster (GCS, raylet, Ray's agents, the workers, what they start) inherits
``MARFT_RAY_SESSION=<that folder>`` (:data:`MARKER`) from the run. A run killed with SIGKILL cannot
shut its cluster down, and Ray's agents outlive it; the next local cluster marft starts, as the same
user and under the same temp folder, calls :func:`end_leftovers` first: for each session folder whose
owner is no longer running, it ends every process of that user whose environment carries that folder's
marker (SIGTERM, then SIGKILL), and removes the folder. Nothing else is touched: a process that does not
carry the marker of a dead run's folder is never signalled, and a folder whose owner still runs is left.
Besides, each local cluster has a watcher process (:func:`start_watcher`) that does the same for its own
folder within seconds of its run's death, so a killed run's agents do not wait for the next run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

PREFIX = "marft-ray-"
"""The name of each session folder starts with it (``tempfile.mkdtemp``'s random part follows)."""
OWNER = "owner.json"
"""The file naming the run that owns a session folder."""
MARKER = "MARFT_RAY_SESSION"
"""The environment variable every process of a local cluster carries: its session folder."""
STOP_WAIT_S = 5.0
"""Seconds the processes of a dead run's cluster get to end on SIGTERM before SIGKILL."""


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/PID/stat``), or None if there is no such
    process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]) if len(fields) > 19 and fields[0] != "Z" else None  # field 22; a zombie has ended


def make_session_folder(base: str) -> str:
    """A fresh 0700 folder under ``base`` for one local cluster, with ``owner.json`` naming this process."""
    folder = tempfile.mkdtemp(prefix=PREFIX, dir=base)  # 0700
    record = {"pid": os.getpid(), "start": start_time(os.getpid())}
    fd = os.open(os.path.join(folder, OWNER), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(record, f)
    return folder


def owner_alive(folder: Path) -> bool:
    """Whether the run named in ``folder/owner.json`` still runs (the same pid, started at the same time).

    A folder without a readable record counts as alive: it may be one being made right now.
    """
    try:
        record = json.loads((folder / OWNER).read_text())
        pid, started = int(record["pid"]), record["start"]
    except (OSError, ValueError, KeyError, TypeError):
        return True
    return start_time(pid) == started if started is not None else os.path.exists(f"/proc/{pid}")


def marked_pids(folder: str) -> list[int]:
    """This user's running processes whose environment carries ``MARFT_RAY_SESSION=<folder>``."""
    marker = f"{MARKER}={folder}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if proc.stat().st_uid != os.getuid():
                continue
            if marker in (proc / "environ").read_bytes().split(b"\0") and start_time(int(proc.name)) is not None:
                found.append(int(proc.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def _own_session_folders(base: str) -> list[Path]:
    """The session folders under ``base`` that are this user's real folders (no links, nobody else's)."""
    folders = []
    for path in Path(base).glob(PREFIX + "*"):
        try:
            info = path.lstat()
        except OSError:
            continue
        if path.is_symlink() or not path.is_dir() or info.st_uid != os.getuid():
            continue
        folders.append(path)
    return folders


def end_leftovers(base: str | None = None) -> list[str]:
    """End the processes and remove the session folders of local clusters whose run is gone; returns those folders.

    ``base``: where the session folders are (default: where :func:`marft_agents.distributed.cluster.connect` makes
    them).
    """
    if not os.path.isdir("/proc"):  # not Linux: nothing to find them by
        return []
    base = base or session_base()
    ended = []
    for folder in _own_session_folders(base):
        if owner_alive(folder):
            continue
        end_session(folder)
        ended.append(str(folder))
    return ended


def end_session(folder: str | Path) -> None:
    """End every process of this user that carries ``folder``'s marker (SIGTERM, then SIGKILL), and remove it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in marked_pids(str(folder)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_WAIT_S
        while marked_pids(str(folder)) and time.monotonic() < deadline:
            time.sleep(0.1)
    shutil.rmtree(folder, ignore_errors=True)


WATCH_EVERY_S = 1.0
"""How often the watcher of a local cluster (:func:`watch`) looks whether its run still runs."""


def watch(folder: str, every: float = WATCH_EVERY_S) -> bool:
    """Wait while the run that owns ``folder`` runs; when it is gone with the folder still there (killed with
    SIGKILL), end its cluster (:func:`end_session`). Returns whether it did.

    :func:`start_watcher` runs it in a process of its own beside each local cluster, so that a killed run's
    Ray processes (GCS, the raylet, ``DashboardAgent``, ``RuntimeEnvAgent``, workers) end within seconds,
    not only when the next local cluster starts. A run that ends normally removes the folder: the watcher
    then ends without touching anything.
    """
    path = Path(folder)
    while path.is_dir():
        if not owner_alive(path):
            end_session(path)
            return True
        time.sleep(every)
    return False


def start_watcher(folder: str) -> None:
    """Start :func:`watch` for ``folder`` in a process of its own session (a signal to the run's process group
    does not reach it), without the folder's marker (it is not one of the cluster's processes); it imports
    neither torch nor Ray."""
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k != MARKER}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    subprocess.Popen(  # noqa: S603 (this interpreter, this module)
        [sys.executable, "-m", "marft_agents.distributed.session", "--watch", folder],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def session_base() -> str:
    """Where session folders go: the temp folder, or /tmp when that path is long (Ray's socket paths must be short)."""
    base = tempfile.gettempdir()
    return base if len(base) <= 20 or not os.path.isdir("/tmp") else "/tmp"


if __name__ == "__main__":  # python -m marft_agents.distributed.session: end what killed runs left, by hand
    import sys

    if sys.argv[1:2] == ["--watch"] and len(sys.argv) == 3:  # start_watcher's
        watch(sys.argv[2])
        sys.exit(0)
    for left in end_leftovers():
        print(f"ended the Ray processes of a dead run and removed {left}")
