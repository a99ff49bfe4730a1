"""The Linux process controls the sandbox worker needs and ``os`` lacks: namespaces, prctl, capabilities.

Called through ctypes on the C library. A call that fails raises :class:`SetupError`: the run is
refused, never run with a layer missing.

Standard library only: the sandbox worker loads this file by path.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = {
    "mount": CLONE_NEWNS,
    "uts": CLONE_NEWUTS,
    "ipc": CLONE_NEWIPC,
    "pid": CLONE_NEWPID,
    "net": CLONE_NEWNET,
    "user": CLONE_NEWUSER,
}

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38

_libc = ctypes.CDLL(None, use_errno=True)
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class SetupError(Exception):
    """A sandbox layer could not be put in place; the run is refused, never run with less."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), f"prctl({option})")


def drop_capabilities() -> None:
    """Empty every capability set (a user-namespace root keeps them across a uid change otherwise)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(header, data), "capset")


def become_unprivileged(plan: dict) -> None:
    """The run's own uid and gid (when the plan has one), no new privileges, no capabilities left."""
    if plan.get("uid") is not None:
        os.setgroups([])
        os.setresgid(plan["gid"], plan["gid"], plan["gid"])
        os.setresuid(plan["uid"], plan["uid"], plan["uid"])
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SetupError("still root after setresuid")
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if "user" in plan["namespaces"]:
        drop_capabilities()
