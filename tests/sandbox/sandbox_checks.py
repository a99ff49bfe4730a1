"""Host-side views of what a sandbox left running."""

import os

from marft_envs.sandbox.isolation import run_uid


def sandbox_processes(uid_floor: int | None = None) -> list[tuple[int, int]]:
    """``(pid, uid)`` of every process whose uid is one of this process's sandbox uids (>= ``uid_floor``).

    Only this process's: other test runs on a shared machine have sandboxes of their own.
    """
    own = run_uid(0)  # the uids of this process's workers: run_uid(slot) for slot < 64
    uid_floor = own if uid_floor is None else max(uid_floor, own)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if uid_floor <= uid < own + 64:
            found.append((int(name), uid))
    return found


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (a sandbox worker has none once its runs are over)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, parent in parents.items() if parent in frontier]
        found += kids
        frontier = kids
    return found
