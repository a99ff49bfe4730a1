"""A sandbox for untrusted Python: one bad program must not hurt the machine, the run or your files.

    from marft_envs.sandbox import run_python

    result = run_python("print(sum(range(10)))", timeout_s=2, memory_mb=256)
    result.stdout, result.returncode, result.timed_out, result.killed_by   # '45\\n', 0, False, None

Each run is a fresh process with resource limits (CPU time, address space, file size, open files,
processes), a root of its own that holds the standard library (read-only), a private working
directory in a private tmpfs ``/tmp`` and a private ``/dev/shm`` and nothing else of the host's files,
a scrubbed environment, an unprivileged uid, no network, its own IPC objects, a syscall filter (no new
namespaces, keyrings, mounts or other processes' memory), stdin at EOF unless the caller gives
sealed input (``stdin=``: in no process's memory before the program reads it); at its deadline
its whole process tree is killed and reaped (a PID namespace), double-forked daemons included.
What this machine allows is detected at run time (:func:`detect_isolation`);
without contained isolation the sandbox refuses untrusted code unless the caller opts in.
:class:`SandboxPool` keeps warm workers for throughput. Standard library only, torch-free.
See ``docs/envs/code.md`` for the guarantees and what it does not protect against.
"""

from marft_envs.sandbox.isolation import Isolation, SandboxUnavailable, detect_isolation
from marft_envs.sandbox.limits import Limits
from marft_envs.sandbox.pool import SandboxPool, shared_pool
from marft_envs.sandbox.process import SandboxError
from marft_envs.sandbox.result import RunResult
from marft_envs.sandbox.run import run_python

__all__ = [
    "Isolation",
    "Limits",
    "RunResult",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
    "detect_isolation",
    "run_python",
    "shared_pool",
]
