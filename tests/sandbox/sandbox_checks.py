"""Host-side views of what a sandbox left running."""

import os


def sandbox_processes(uid_floor: int) -> list[tuple[int, int]]:
    """``(pid, uid)`` of every process whose uid is a sandbox uid (>= ``uid_floor``)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if uid >= uid_floor:
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
