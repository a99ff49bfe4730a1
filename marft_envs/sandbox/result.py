"""What a sandboxed run returns."""

from __future__ import annotations

from dataclasses import dataclass

KILL_REASONS = ("timeout", "cpu_time", "memory", "output_limit", "file_size")
"""``killed_by`` values besides ``"signal:<NAME>"`` (a crash) and ``None`` (the program ended by itself)."""


@dataclass(frozen=True)
class RunResult:
    """The outcome of one sandboxed run of a Python program."""

    returncode: int | None
    """Exit status (negative: killed by that signal); ``None`` when the sandbox ended the run."""
    stdout: str
    """Standard output (UTF-8, undecodable bytes replaced), at most ``Limits.max_output_bytes``."""
    stderr: str
    """Standard error, likewise."""
    timed_out: bool
    """True when the wall-clock deadline ended the run."""
    killed_by: str | None
    """Why the run ended early: one of ``KILL_REASONS``, ``"signal:SIGSEGV"`` and the like, or ``None``."""
    duration_s: float
    """Wall-clock seconds from the start of the run to the moment nothing of it was left running."""
    isolation: str
    """The isolation tier the run had (see :mod:`marft_envs.sandbox.isolation`)."""
    stdout_truncated: bool = False
    """True when stdout went over the output limit."""
    stderr_truncated: bool = False
    """True when stderr went over the output limit."""

    @property
    def ok(self) -> bool:
        """True when the program ended by itself with status 0."""
        return self.returncode == 0 and self.killed_by is None
