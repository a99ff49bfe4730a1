"""One run at a time in a run folder: an exclusive lock held for the run's life.

``marft train`` (a new run, ``--overwrite`` or ``--resume``) takes ``fcntl.flock`` on ``run.lock`` in
the run folder once every check has passed, before it writes anything, and holds it until it ends;
a second run into the same folder is refused in one line naming the holder's PID, instead of both
interleaving their metrics. The lock belongs to the open file, not to the file's existence: the
system drops it when the process ends, however it ends (a kill -9 included), so a stale
``run.lock`` never blocks the next run and is never deleted (deleting it would let two runs lock two
different files). The file holds the holder's PID for the message; it is opened ``O_NOFOLLOW``.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from marft_agents.runs import files as run_files

LOCK = "run.lock"
"""The lock file's name in the run folder."""


class RunLockedError(ValueError):
    """Another process holds the run folder's lock."""


class RunLock:
    """The exclusive lock on a run folder; ``release()`` (or leaving the ``with`` block) lets go."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        with run_files.folder(self.run_dir) as dir_fd:
            try:
                fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
            except OSError:
                run_files.refuse_link(self.run_dir / LOCK)
                raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunLockedError(
                f"run_dir {self.run_dir} is in use by another marft run (PID {holder}): wait for "
                f"it to end or stop it, or pick another run_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd: int | None = fd

    def release(self) -> None:
        """Let go of the lock (closing the file drops it); a second call does nothing."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
