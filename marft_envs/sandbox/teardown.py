"""Ending a sandbox run: kill and reap every process of it, drain its pipes, remove the files it left.

With a PID namespace, killing the run's init kills the whole namespace. Without one, the run's uid's
processes are killed (or, with no uid of its own, the worker's adopted orphans) and, with no private
``/tmp``, what that uid left in the shared temp directories is deleted.

Standard library only: the sandbox worker loads this file by path.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import time

READ_CHUNK = 1 << 16
SWEEP_S = 2.0  # without a PID namespace, how long to keep killing a run's leftovers (a loaded machine is slow to let them die)


def end_run(cpid: int, init_pid: int | None, plan: dict, swept: bool) -> None:
    """Kill and reap everything the run started; after this, nothing of it is running."""
    if init_pid is not None:
        try:
            os.kill(init_pid, signal.SIGKILL)  # PID 1 of the namespace: the kernel kills all of it
        except ProcessLookupError:
            pass
    if "pid" not in plan["namespaces"]:
        sweep(plan, cpid, remove_files=not swept)
    try:
        os.waitpid(cpid, 0)  # C exits only after reaping I, i.e. once the PID namespace is empty
    except ChildProcessError:
        pass  # already reaped by a sweep
    _reap_adopted()


def sweep(plan: dict, cpid: int, remove_files: bool = True) -> None:
    """Without a PID namespace: kill every process of the run's uid, else the adopted orphans."""
    give_up = time.monotonic() + SWEEP_S
    if plan.get("uid") is not None:
        while time.monotonic() < give_up:
            pid = os.fork()
            if pid == 0:  # kill(-1) as the run's uid reaches exactly that uid's processes
                try:
                    os.setresuid(plan["uid"], plan["uid"], plan["uid"])
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            _reap_adopted()
            if not _processes_of(plan["uid"]):  # (kill(-1) cannot say whether it reached anyone)
                break
            time.sleep(0.001)
        if remove_files:
            _remove_planted_files(plan["uid"])
    else:
        while time.monotonic() < give_up:  # orphans re-parent to us (a subreaper); kill them until none are left
            children = [p for p in _children() if p != cpid]
            if not children:
                break
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.001)
            _reap_adopted()


def _processes_of(uid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                found.append(int(name))
                            break
            except (OSError, ValueError):
                pass
    return found


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _reap_adopted() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _remove_planted_files(uid: int) -> None:
    """No private /tmp: delete what the run's uid left in the shared temp dirs, for no later run to read.

    The uid can only have created entries in world-writable directories (or in directories it
    created, which go as a whole), so only those are searched.
    """
    stack = [d for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(d)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
                if st.st_uid == uid:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
                elif entry.is_dir(follow_symlinks=False) and st.st_mode & 0o002:
                    stack.append(entry.path)
            except OSError:
                pass


def drain(fds: set[int], streams: dict, cap: int) -> None:
    for fd in fds:
        data = drain_one(fd)
        streams[fd] += data[: max(0, cap + 1 - len(streams[fd]))]


def drain_one(fd: int) -> bytes:
    # Everything that could write is dead by now, so this ends; the time limit is a second guard.
    os.set_blocking(fd, False)
    out, end = bytearray(), time.monotonic() + 0.5
    while time.monotonic() < end:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            select.select([fd], [], [], 0.05)
            continue
        if not chunk:
            break
        out += chunk
    return bytes(out)


def decode_status(status) -> tuple[int | None, str | None]:
    """``(returncode, signal name)`` of a wait status: ``(-N, "SIGNAME")`` for a kill, ``(None, None)`` for none."""
    if status is None:
        return None, None
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return -sig, name
    return os.WEXITSTATUS(status), None
