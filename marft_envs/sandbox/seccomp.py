"""The syscall filter of a sandboxed run: no new namespaces, no kernel keyrings, no mounts.

A run already has its own PID, mount, network, IPC and UTS namespaces, so files, shared memory,
SysV IPC and POSIX message queues it creates die with it. Two kinds of kernel object do not: kernel
keyrings belong to a uid (and every run of a worker has the same one), and a new user namespace
would hand the program every capability inside it. This filter makes those syscalls fail with
``EPERM`` (``clone3``, whose flags a filter cannot read, fails with ``ENOSYS`` so that the C
library falls back to ``clone``), along with another process's memory and file descriptors (``ptrace``, ``process_vm_readv``,
``pidfd_getfd``: the code-repair judge shares its run with the program it grades), mounting and a
few rarely needed kernel interfaces
that have been the way into kernel bugs (``bpf``, ``io_uring``, ``userfaultfd``, ``perf_event_open``).

The filter is compiled by libseccomp (``libseccomp.so.2``, through ctypes), which knows each
architecture's syscall numbers and kills a process that makes syscalls of another architecture.
Standard library only: the sandbox worker loads this file by path.

    ctx = build()        # in the worker, before any run (the library must be loaded before the
    install(ctx)         # run's filesystem hides it); in the run's process, after no_new_privs
"""

from __future__ import annotations

import ctypes
import errno

LIBRARY = "libseccomp.so.2"
BLOCKED = {
    "namespaces": ("unshare", "setns"),
    "keyrings": ("add_key", "request_key", "keyctl"),
    "mounts": (
        "mount",
        "umount2",
        "umount",
        "pivot_root",
        "chroot",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
    ),
    # The code-repair judge and the program it grades are two processes of one run with one uid:
    # neither may read or write the other's memory or take its file descriptors.
    "other processes": ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp"),
    "kernel interfaces": (
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
    ),
}
"""Syscalls that fail with ``EPERM``, by what they would reach."""
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
"""``CLONE_NEWNS``, ``NEWCGROUP``, ``NEWUTS``, ``NEWIPC``, ``NEWUSER``, ``NEWPID``, ``NEWNET``: a ``clone``
with any of them fails with ``EPERM`` (plain ``fork`` and threads work)."""

_ACT_ALLOW = 0x7FFF0000
_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


_lib = None


def library():
    """libseccomp, loaded once; raises ``OSError`` if this machine does not have it."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(LIBRARY, use_errno=True)
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        _lib = lib
    return _lib


def available() -> str | None:
    """``None`` when a filter can be built here, else why not (one line)."""
    try:
        library().seccomp_release(ctypes.c_void_p(build()))
    except OSError as err:
        return f"no syscall filter: {err}"
    return None


def build() -> int:
    """A compiled filter context (not yet installed); raises ``OSError`` when libseccomp fails."""
    lib = library()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    for names in BLOCKED.values():
        for name in names:
            _rule(lib, ctx, name, _act_errno(errno.EPERM))
    _rule(lib, ctx, "clone3", _act_errno(errno.ENOSYS))
    for flag in CLONE_NAMESPACE_FLAGS:
        _rule(lib, ctx, "clone", _act_errno(errno.EPERM), _ArgCmp(0, _CMP_MASKED_EQ, flag, flag))
    return ctx


def install(ctx: int) -> None:
    """Load the filter into this process (needs ``PR_SET_NO_NEW_PRIVS``); it holds for its children too."""
    ret = library().seccomp_load(ctx)
    if ret != 0:
        raise OSError(-ret, f"seccomp_load: {errno.errorcode.get(-ret, ret)}")


def _rule(lib, ctx: int, name: str, action: int, *conditions: _ArgCmp) -> None:
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        return  # this architecture has no such syscall (e.g. `umount` on x86_64)
    array = (_ArgCmp * max(1, len(conditions)))(*conditions)
    ret = lib.seccomp_rule_add_array(ctx, action, number, len(conditions), array)
    if ret != 0:
        raise OSError(-ret, f"seccomp_rule_add({name}): {errno.errorcode.get(-ret, ret)}")
