"""What one sandboxed run may use: time, memory, processes, files, output."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run; every field is enforced by the kernel or by the worker."""

    timeout_s: float = 10.0
    """Wall-clock limit: at this deadline the run's whole process tree is killed."""
    memory_mb: int = 512
    """Address space per process (``RLIMIT_AS``); Python raises ``MemoryError`` beyond it."""
    cpu_s: float | None = None
    """CPU seconds per process (``RLIMIT_CPU``); ``None``: the timeout rounded up, plus one."""
    max_processes: int = 32
    """Processes and threads the program may have at once (``RLIMIT_NPROC``, on a uid of its own)."""
    max_open_files: int = 64
    """Open file descriptors per process (``RLIMIT_NOFILE``)."""
    max_file_mb: int = 16
    """Largest file the program may write (``RLIMIT_FSIZE``)."""
    tmpfs_mb: int = 64
    """Size of the private ``/tmp``, which also holds the working directory."""
    shm_mb: int = 16
    """Size of the private ``/dev/shm``."""
    max_output_bytes: int = 1 << 20
    """Bytes kept per stream (stdout, stderr); a program that writes more is killed."""

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not value > 0:
                raise ValueError(f"Limits.{f.name} must be positive, got {value!r}")
        if self.memory_mb < 64:
            raise ValueError(f"Limits.memory_mb must be at least 64 (the interpreter needs ~30 MB), got {self.memory_mb}")

    @property
    def cpu_seconds(self) -> int:
        """The ``RLIMIT_CPU`` soft limit actually set."""
        return math.ceil(self.cpu_s if self.cpu_s is not None else self.timeout_s + 1)

    def to_wire(self) -> dict:
        """The limits as the worker reads them."""
        return {
            "timeout_s": float(self.timeout_s),
            "cpu_s": self.cpu_seconds,
            "memory_mb": int(self.memory_mb),
            "max_open_files": int(self.max_open_files),
            "max_file_mb": int(self.max_file_mb),
            "tmpfs_mb": int(self.tmpfs_mb),
            "shm_mb": int(self.shm_mb),
            "max_output_bytes": int(self.max_output_bytes),
        }
