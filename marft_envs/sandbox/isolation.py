"""What isolation this machine allows, found by running a harmless probe, and how a run uses it.

Tiers, strongest first (the sandbox uses the strongest one that works here):

======== ========================================================================================
tier     what a run gets
======== ========================================================================================
root     (started as root) PID, mount, network, IPC and UTS namespaces; an unprivileged uid of its
         own, so ``RLIMIT_NPROC`` holds; everything read-only except a private tmpfs ``/tmp`` (the
         working directory) and ``/dev/shm``; ``/root``, ``/home``, ``/run``, ``/var/tmp`` hidden
userns   (unprivileged, user namespaces allowed) the same namespaces inside a user namespace; the
         program keeps the user's uid outside, with every capability dropped
uid      (root without namespaces, e.g. a default Docker container) an unprivileged uid and rlimits;
         leftovers killed by uid, files it leaves in the shared temp dirs deleted; **network open**,
         host files readable
none     rlimits and the run's process group only
======== ========================================================================================

``root`` and ``userns`` are *contained*; the sandbox refuses untrusted code on the weaker tiers
unless the user opts in (``allow_weak_isolation=True`` or ``MARFT_SANDBOX_ALLOW_WEAK=1``).
``MARFT_SANDBOX_TIER=<tier>`` forces a tier (it is still probed).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import sysconfig
import threading
from dataclasses import dataclass, field

from marft_envs.sandbox.limits import Limits

TIERS = ("root", "userns", "uid", "none")
CONTAINED_TIERS = ("root", "userns")
NAMESPACES = ("pid", "mount", "net", "ipc", "uts")
HIDDEN_PATHS = ("/root", "/home", "/run", "/var/tmp")
"""Covered by an empty read-only tmpfs in the mount namespace: homes, runtime sockets, host temp files."""
UID_BASE = 1_900_000_000
"""Runs use uids from here on (no user account has them): ``UID_BASE + 64 * (pid % 16384) + slot``."""
INNER_UID = 1000
"""The program's uid inside a user namespace (``userns`` tier)."""

_FEATURES = {
    "root": ("PID namespace: the whole process tree is killed at the deadline",
             "network namespace: no network",
             "mount namespace: read-only filesystem, private /tmp and /dev/shm, hidden " + ", ".join(HIDDEN_PATHS),
             "IPC and UTS namespaces",
             "an unprivileged uid of its own per worker (RLIMIT_NPROC enforced)",
             "rlimits: CPU time, address space, file size, open files, processes"),
    "userns": ("user namespace: every capability dropped, the user's own uid outside",
               "PID namespace: the whole process tree is killed at the deadline",
               "network namespace: no network",
               "mount namespace: read-only filesystem, private /tmp and /dev/shm, hidden " + ", ".join(HIDDEN_PATHS),
               "IPC and UTS namespaces",
               "rlimits: CPU time, address space, file size, open files, processes"),
    "uid": ("an unprivileged uid of its own per worker (RLIMIT_NPROC enforced)",
            "leftover processes killed by uid; files it leaves in /tmp, /var/tmp, /dev/shm deleted",
            "rlimits: CPU time, address space, file size, open files, processes"),
    "none": ("rlimits: CPU time, address space, file size, open files",
             "the run's process group and orphans killed at the deadline"),
}
_MISSING = {
    "root": (),
    "userns": ("the program keeps the user's uid outside the namespace: files readable by the user's groups stay readable",),
    "uid": ("no network isolation", "no private /tmp: world-writable directories are writable during the run",
            "host files readable by any user are readable"),
    "none": ("no network isolation", "runs as the calling user: it can read and change that user's files",
             "no process limit", "double-forked daemons that keep forking may escape the sweep"),
}


class SandboxUnavailable(RuntimeError):
    """No contained isolation on this machine and the user did not opt in to weaker isolation."""


@dataclass(frozen=True)
class Isolation:
    """The isolation tier runs get on this machine, what it guarantees and why stronger ones failed."""

    tier: str
    """One of ``TIERS``."""
    notes: tuple[str, ...] = ()
    """Why each stronger tier was not used (the probe's error)."""
    hide: tuple[str, ...] = field(default=(), repr=False)
    """Paths covered by an empty tmpfs inside the mount namespace."""
    expose: tuple[str, ...] = field(default=(), repr=False)
    """Interpreter directories bound read-only into hidden paths, so the program can import."""

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
        return _FEATURES[self.tier]

    @property
    def missing(self) -> tuple[str, ...]:
        return _MISSING[self.tier]

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
            "hide": list(self.hide),
            "expose": list(self.expose),
            "sys_path": site_dirs(),
        }


def run_uid(slot: int) -> int:
    """The uid of a worker's runs: unused by any account, distinct per worker and (mostly) per process."""
    return UID_BASE + 64 * (os.getpid() % 16384) + slot


def site_dirs() -> list[str]:
    """The host interpreter's site-packages, so sandboxed programs can import what is installed."""
    paths = sysconfig.get_paths()
    out = []
    for key in ("purelib", "platlib"):
        p = paths.get(key)
        if p and os.path.isdir(p) and p not in out:
            out.append(p)
    return out


def filesystem_view(tier: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(hide, expose)``: what to cover with an empty tmpfs, and the interpreter's directories to keep.

    The interpreter may live under a hidden path (a venv in a home directory) or under a directory
    the run's uid cannot enter (``/root/.pyenv``): those directories are hidden too and the
    interpreter's own directories are bound back in, read-only, at the same paths.
    """
    candidates = [sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                  *site_dirs()]
    expose: list[str] = []
    for p in sorted({os.path.realpath(c) for c in candidates if os.path.isdir(c)}):
        if not any(p == e or p.startswith(e + "/") for e in expose):
            expose.append(p)
    hide = []
    for h in HIDDEN_PATHS:  # a symlinked home (/home -> /var/home) is hidden where it really is
        real = os.path.realpath(h)
        if os.path.isdir(real) and real != "/" and real not in hide:
            hide.append(real)
    if tier == "root":  # the run's uid is not the owner: directories others cannot enter must be hidden
        for p in expose:
            blocked = _first_closed_ancestor(p)
            if blocked and not any(blocked == h or blocked.startswith(h + "/") for h in hide):
                hide.append(blocked)
    return tuple(hide), tuple(expose)


def _first_closed_ancestor(path: str) -> str | None:
    parts = path.strip("/").split("/")
    for k in range(1, len(parts) + 1):
        prefix = "/" + "/".join(parts[:k])
        try:
            mode = os.stat(prefix).st_mode
        except OSError:
            return None
        if not mode & stat.S_IXOTH:
            return prefix
    return None


# -- detection ------------------------------------------------------------------------------------

PROBE_SOURCE = r'''
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
print(json.dumps(facts))
'''
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
    for tier in (forced,) if forced else candidate_tiers():
        hide, expose = filesystem_view(tier)
        isolation = Isolation(tier=tier, notes=tuple(notes), hide=hide, expose=expose)
        problem = probe(isolation)
        if problem is None:
            return isolation
        notes.append(f"{tier} tier unavailable: {problem}")
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
        request = {"source": PROBE_SOURCE, "files": {}, "env": dict(PROBE_ENV),
                   "limits": limits.to_wire(), "plan": isolation.plan(worker.slot, limits)}
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
