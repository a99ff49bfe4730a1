"""What isolation this machine allows, found by running a harmless probe, and how a run uses it.

Tiers, strongest first (the sandbox uses the strongest one that works here):

======== ========================================================================================
tier     what a run gets
======== ========================================================================================
root     (started as root) PID, mount, network, IPC and UTS namespaces; an unprivileged uid of its
         own, so ``RLIMIT_NPROC`` holds; a root of its own (:mod:`~marft_envs.sandbox.rootfs`): the
         standard library read-only, a private tmpfs ``/tmp`` (the working directory) and
         ``/dev/shm``, and nothing else of the host's files
userns   (unprivileged, user namespaces allowed) the same namespaces and root inside a user
         namespace; the program keeps the user's uid outside, with every capability dropped
uid      (root without namespaces, e.g. a default Docker container) an unprivileged uid and rlimits;
         leftovers killed by uid, files it leaves in the shared temp dirs deleted; **network open**,
         host files readable (task data and installed packages included)
none     rlimits and the run's process group only
======== ========================================================================================

On every tier where libseccomp is found, a syscall filter (:mod:`~marft_envs.sandbox.seccomp`)
blocks new namespaces, kernel keyrings and mounts inside the run. ``root`` and ``userns`` are
*contained*; the sandbox refuses untrusted code on the weaker tiers unless the user opts in
(``allow_weak_isolation=True`` or ``MARFT_SANDBOX_ALLOW_WEAK=1``). ``MARFT_SANDBOX_TIER=<tier>``
forces a tier (it is still probed).
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import threading
from dataclasses import dataclass

from marft_envs.sandbox import seccomp
from marft_envs.sandbox.limits import Limits

TIERS = ("root", "userns", "uid", "none")
CONTAINED_TIERS = ("root", "userns")
NAMESPACES = ("pid", "mount", "net", "ipc", "uts")
ROOT_ENTRIES = ("dev", "proc", "tmp")
"""What a contained run's ``/`` holds besides the first component of the standard library's path."""
UID_BASE = 1_900_000_000
"""Runs use uids from here on (no user account has them): ``UID_BASE + 64 * (pid % 16384) + slot``."""
INNER_UID = 1000
"""The program's uid inside a user namespace (``userns`` tier)."""

_VIEW = (
    "a root of its own: the standard library (read-only), a private /tmp (the working directory) and "
    "/dev/shm, /dev/null and the like, its own /proc; no site-packages, project checkout, task data, "
    "home directory, /etc or other programs of the host"
)
_FEATURES = {
    "root": (
        "PID namespace: the whole process tree is killed at the deadline",
        "network namespace: no network",
        "mount namespace: " + _VIEW,
        "IPC and UTS namespaces: SysV IPC and POSIX message queues die with the run",
        "an unprivileged uid of its own per worker (RLIMIT_NPROC enforced)",
        "rlimits: CPU time, address space, file size, open files, processes",
    ),
    "userns": (
        "user namespace: every capability dropped, the user's own uid outside",
        "PID namespace: the whole process tree is killed at the deadline",
        "network namespace: no network",
        "mount namespace: " + _VIEW,
        "IPC and UTS namespaces: SysV IPC and POSIX message queues die with the run",
        "rlimits: CPU time, address space, file size, open files, processes",
    ),
    "uid": (
        "an unprivileged uid of its own per worker (RLIMIT_NPROC enforced)",
        "leftover processes killed by uid; files it leaves in /tmp, /var/tmp, /dev/shm deleted",
        "rlimits: CPU time, address space, file size, open files, processes",
    ),
    "none": ("rlimits: CPU time, address space, file size, open files", "the run's process group and orphans killed at the deadline"),
}
_MISSING = {
    "root": (),
    "userns": (),
    "uid": (
        "no network isolation",
        "no private /tmp: world-writable directories are writable during the run",
        "SysV IPC and POSIX message queues outlive the run",
        "host files readable by any user are readable: installed packages, project checkouts and task data (a shipped solution) included",
    ),
    "none": (
        "no network isolation",
        "runs as the calling user: it can read and change that user's files",
        "no process limit",
        "double-forked daemons that keep forking may escape the sweep",
    ),
}
_FILTER = "syscall filter (libseccomp): no new namespaces, kernel keyrings, mounts, bpf, io_uring, userfaultfd"
_NO_FILTER = "no syscall filter: kernel keyrings are shared by every run of a worker (one uid) and a run may create new namespaces"


class SandboxUnavailable(RuntimeError):
    """No contained isolation on this machine and the user did not opt in to weaker isolation."""


@dataclass(frozen=True)
class Isolation:
    """The isolation tier runs get on this machine, what it guarantees and why stronger ones failed."""

    tier: str
    """One of ``TIERS``."""
    notes: tuple[str, ...] = ()
    """Why each stronger tier (or the syscall filter) was not used (the probe's error)."""
    syscall_filter: bool = False
    """Whether runs get the seccomp filter of :mod:`~marft_envs.sandbox.seccomp`."""

    @property
    def contained(self) -> bool:
        """True for the tiers that contain hostile code (``root``, ``userns``)."""
        return self.tier in CONTAINED_TIERS

    @property
    def namespaces(self) -> tuple[str, ...]:
        if self.tier == "root":
            return NAMESPACES
        if self.tier == "userns":
            return ("user", *NAMESPACES)
        return ()

    @property
    def features(self) -> tuple[str, ...]:
        return _FEATURES[self.tier] + ((_FILTER,) if self.syscall_filter else ())

    @property
    def missing(self) -> tuple[str, ...]:
        return _MISSING[self.tier] + (() if self.syscall_filter else (_NO_FILTER,))

    def describe(self) -> str:
        """A few lines: the tier, what it enforces, what it does not, and why stronger tiers failed."""
        lines = [f"sandbox isolation: {self.tier} ({'contained' if self.contained else 'NOT contained'})"]
        lines += [f"  + {f}" for f in self.features]
        lines += [f"  - {m}" for m in self.missing]
        lines += [f"  ({n})" for n in self.notes]
        return "\n".join(lines)

    def plan(self, slot: int, limits: Limits) -> dict:
        """How the worker sets up one run on this tier (the ``plan`` of a run request)."""
        uid = run_uid(slot) if self.tier in ("root", "uid") else None
        nproc = None
        if self.tier in ("root", "uid"):
            nproc = limits.max_processes
        elif self.tier == "userns":
            nproc = limits.max_processes + 2  # the namespace's creator and init count in it too
        return {
            "tier": self.tier,
            "namespaces": list(self.namespaces),
            "uid": uid,
            "gid": uid,
            "inner_uid": INNER_UID,
            "nproc": nproc,
            "syscall_filter": self.syscall_filter,
        }


def run_uid(slot: int) -> int:
    """The uid of a worker's runs: unused by any account, distinct per worker and (mostly) per process."""
    return UID_BASE + 64 * (os.getpid() % 16384) + slot


def visible_paths() -> tuple[str, ...]:
    """The host directories a contained run sees (read-only): the interpreter's standard library."""
    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
    paths = sysconfig.get_paths(vars=base)
    return tuple(dict.fromkeys(os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if k in paths))


# -- detection ------------------------------------------------------------------------------------

PROBE_SOURCE = r"""
import errno, json, os, resource
facts = {"uid": os.getuid(), "pid": os.getpid(), "tmp": sorted(os.listdir("/tmp")), "env": sorted(os.environ)}
try:
    import socket
    socket.create_connection(("127.0.0.1", 9), timeout=0.5).close()
    facts["net"] = "connected"
except ImportError:
    facts["net"] = "no socket module"  # on the weak tiers the interpreter's files may be unreadable
except OSError as e:
    facts["net"] = errno.errorcode.get(e.errno, str(e))
facts["nproc"] = resource.getrlimit(resource.RLIMIT_NPROC)[0]
import sys
facts["root"], facts["sys_path"] = sorted(os.listdir("/")), sys.path
with open("/proc/self/status") as f:
    facts["seccomp"] = next((int(line.split()[1]) for line in f if line.startswith("Seccomp:")), 0)
print(json.dumps(facts))
"""
"""The harmless program every candidate tier must run correctly before it is used."""
PROBE_ENV = {"PATH": "/usr/bin:/bin"}

_lock = threading.Lock()
_detected: dict[tuple[int, str | None], Isolation] = {}


def candidate_tiers() -> tuple[str, ...]:
    """Tiers worth trying for this process, strongest first."""
    return ("root", "uid", "none") if os.geteuid() == 0 else ("userns", "none")


def detect_isolation(refresh: bool = False) -> Isolation:
    """The strongest tier that works here (cached per process; ``MARFT_SANDBOX_TIER`` forces one)."""
    forced = os.environ.get("MARFT_SANDBOX_TIER") or None
    if forced is not None and forced not in TIERS:
        raise ValueError(f"MARFT_SANDBOX_TIER={forced!r} is not a tier; use one of {list(TIERS)}")
    key = (os.getpid(), forced)
    with _lock:
        if refresh or key not in _detected:
            _detected[key] = _detect(forced)
        return _detected[key]


def _detect(forced: str | None) -> Isolation:
    notes = []
    no_filter = seccomp.available()
    if no_filter:
        notes.append(no_filter)
    for tier in (forced,) if forced else candidate_tiers():
        for syscall_filter in (True, False) if no_filter is None else (False,):
            isolation = Isolation(tier=tier, notes=tuple(notes), syscall_filter=syscall_filter)
            problem = probe(isolation)
            if problem is None:
                return isolation
            notes.append(f"{tier} tier {'with the syscall filter ' if syscall_filter else ''}unavailable: {problem}")
    if forced:
        raise SandboxUnavailable(f"MARFT_SANDBOX_TIER={forced} does not work here: {notes[-1]}")
    return Isolation(tier="none", notes=tuple(notes))  # unreachable in practice: 'none' needs nothing


def probe(isolation: Isolation, limits: Limits | None = None) -> str | None:
    """Run the harmless probe on ``isolation``; ``None`` if the tier does what it promises, else why not."""
    from marft_envs.sandbox.process import SandboxError, WorkerProcess

    limits = limits or Limits(timeout_s=10.0, max_processes=8)
    try:
        worker = WorkerProcess()
    except (OSError, SandboxError) as err:
        return f"cannot start a worker: {err}"
    try:
        request = {
            "source": PROBE_SOURCE,
            "files": {},
            "env": dict(PROBE_ENV),
            "limits": limits.to_wire(),
            "plan": isolation.plan(worker.slot, limits),
        }
        answer = worker.run(request, limits.timeout_s)
    except SandboxError as err:
        return str(err)
    finally:
        worker.close()
    if answer.get("setup_error"):
        return answer["setup_error"]
    import base64

    out = base64.b64decode(answer["stdout_b64"]).decode(errors="replace")
    if answer.get("returncode") != 0:
        err = base64.b64decode(answer["stderr_b64"]).decode(errors="replace").strip().splitlines()
        return f"the probe failed: {err[-1] if err else answer}"
    try:
        facts = json.loads(out)
    except ValueError:
        return f"the probe printed {out[:200]!r}"
    return _check_facts(isolation, facts, limits)


def _check_facts(isolation: Isolation, facts: dict, limits: Limits) -> str | None:
    tier = isolation.tier
    if tier in ("root", "uid") and facts["uid"] == 0:
        return "the program still ran as root"
    if tier in CONTAINED_TIERS:
        if facts["pid"] != 2:
            return f"the program is not in its own PID namespace (pid {facts['pid']})"
        if facts["net"] == "connected":
            return "the program reached the host's loopback network"
        if facts["tmp"] != ["work"]:
            return f"/tmp is not private (it holds {facts['tmp'][:5]})"
        allowed = set(ROOT_ENTRIES) | {p.strip("/").split("/")[0] for p in facts["sys_path"] if p.startswith("/")}
        if not set(facts["root"]) <= allowed:
            return f"the program sees the host's files (/ holds {sorted(set(facts['root']) - allowed)[:5]})"
    if any(p.rstrip("/").endswith(("site-packages", "dist-packages")) for p in facts["sys_path"]):
        return "site-packages is on the program's sys.path"
    if isolation.syscall_filter and facts["seccomp"] != 2:
        return f"the syscall filter is not installed (Seccomp: {facts['seccomp']})"
    if tier == "root" and facts["nproc"] != limits.max_processes:
        return f"RLIMIT_NPROC is {facts['nproc']}, expected {limits.max_processes}"
    leaked = sorted(set(facts["env"]) - set(PROBE_ENV) - {"HOME", "TMPDIR"})
    if leaked:
        return f"the program saw environment variables it was not given: {leaked[:5]}"
    return None


def require(isolation: Isolation, allow_weak: bool | None) -> None:
    """Refuse untrusted code on a weak tier unless the caller (or ``MARFT_SANDBOX_ALLOW_WEAK=1``) opted in."""
    if isolation.contained:
        return
    if allow_weak is None:
        allow_weak = os.environ.get("MARFT_SANDBOX_ALLOW_WEAK", "") in ("1", "true", "yes")
    if not allow_weak:
        raise SandboxUnavailable(
            f"this machine only allows the '{isolation.tier}' sandbox tier, which does not contain hostile code; "
            "run as root or enable unprivileged user namespaces, or opt in with allow_weak_isolation=True "
            "(MARFT_SANDBOX_ALLOW_WEAK=1) for code you trust"
        )
