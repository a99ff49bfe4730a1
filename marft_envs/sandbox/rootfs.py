"""The filesystem a contained run sees: the standard library, its working directory, nothing else.

Built by the run's init inside its own mount namespace, then made the root with ``pivot_root``
(the host's tree is detached, not merely hidden)::

    /                    an empty tmpfs, read-only
    <stdlib dirs>        the interpreter's standard library at its usual paths, read-only;
                         ``site-packages`` / ``dist-packages`` inside them covered by an empty tmpfs
    /tmp                 a private tmpfs (``tmpfs_mb``); the working directory is /tmp/work
    /dev                 null, zero, full, random, urandom, a private /dev/shm (``shm_mb``)
    /proc                the run's own PID namespace

No site-packages, no checkout of any project, no home directory, no /etc, no other programs: a run
is a fork of the worker (no exec), so the interpreter and the shared libraries it has loaded are
already in memory. Standard library only: the sandbox worker loads this file by path.
"""

from __future__ import annotations

import ctypes
import os

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 16384, 1 << 18, 1 << 21, 1 << 24
MNT_DETACH = 2
# statvfs flag -> mount flag: a read-only remount inside a user namespace must keep these as they are
_KEPT = (
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "ppc64": 203, "s390x": 217}
"""``pivot_root``'s syscall number (the C library has no wrapper for it)."""
STAGING = "/tmp"
"""Where the new root is assembled (in the run's private mount namespace: the host's /tmp is untouched)."""
WORKDIR = "/tmp/work"
DEVICES = ("null", "zero", "full", "random", "urandom")
PACKAGE_DIRS = ("site-packages", "dist-packages")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.syscall.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def build_root(view: list[str], uid: int | None, limits: dict) -> str:
    """Assemble the run's root from ``view`` (the stdlib paths) and switch to it; returns the workdir."""
    number = PIVOT_ROOT.get(os.uname().machine)
    if number is None:  # fail closed: never run with the host's tree in view
        raise OSError(0, f"no pivot_root syscall number for {os.uname().machine}")
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the host
    new = STAGING
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    for path in _outermost(view):
        _bind_read_only(path, new + path)
        for name in PACKAGE_DIRS:  # a base interpreter keeps installed packages inside its stdlib dir
            if os.path.isdir(os.path.join(path, name)):
                mount("tmpfs", new + os.path.join(path, name), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=755")
    _devices(new + "/dev", limits["shm_mb"])
    os.mkdir(new + "/tmp")
    mount("tmpfs", new + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits['tmpfs_mb']}m,mode=1777")
    os.mkdir(new + "/proc")
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(new)
    _check(_libc.syscall(number, b".", b"."), "pivot_root")  # the old root now lies under the new one ...
    _check(_libc.umount2(b".", MNT_DETACH), "detaching the host's root")  # ... and is gone
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    os.mkdir(WORKDIR, 0o700)
    if uid is not None:
        os.chown(WORKDIR, uid, uid)
    return WORKDIR


def _outermost(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in sorted({os.path.realpath(p) for p in paths if os.path.exists(p)}):
        if not any(p == o or p.startswith(o.rstrip("/") + "/") for o in out):
            out.append(p)
    return out


def _bind_read_only(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "w").close()
    mount(source, target, None, MS_BIND)
    kept = os.statvfs(source).f_flag
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
    for st_flag, ms_flag in _KEPT:
        flags |= ms_flag if kept & st_flag else 0
    if not kept & (os.ST_NOATIME | os.ST_RELATIME):
        flags |= MS_STRICTATIME
    mount(None, target, None, flags)


def _devices(dev: str, shm_mb: int) -> None:
    os.mkdir(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for name in DEVICES:
        open(f"{dev}/{name}", "w").close()
        mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(f"{dev}/shm")
    mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm_mb}m,mode=1777")
    mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
