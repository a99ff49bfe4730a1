"""``run_python``: run one untrusted Python program in the sandbox and return what it did."""

from __future__ import annotations

import base64
import dataclasses
import posixpath
from collections.abc import Mapping

from marft_envs.sandbox.isolation import Isolation, detect_isolation, require
from marft_envs.sandbox.limits import Limits
from marft_envs.sandbox.process import SandboxError, WorkerProcess
from marft_envs.sandbox.result import RunResult

BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
"""The whole environment a program sees (plus ``HOME`` and ``TMPDIR``, and the caller's ``env``)."""


def run_python(
    source: str,
    *,
    timeout_s: float | None = None,
    memory_mb: int | None = None,
    files: Mapping[str, str | bytes] | None = None,
    limits: Limits | None = None,
    env: Mapping[str, str] | None = None,
    pool=None,
    allow_weak_isolation: bool | None = None,
    stdin: str | bytes | None = None,
) -> RunResult:
    """Run ``source`` as ``main.py`` in a fresh sandboxed process; ``files`` go in its working directory.

    ``stdin`` (default: none, the program reads EOF) is *sealed input*: the worker feeds it to the
    program's stdin after the run's processes have started, so it is in no process's memory until
    the program reads it; anything the program forks before reading it never sees it.

    ``timeout_s`` and ``memory_mb`` override those fields of ``limits`` (default :class:`Limits`).
    With ``pool`` (a :class:`~marft_envs.sandbox.pool.SandboxPool`) a warm worker serves the run;
    otherwise a worker process is started for it and closed after. Raises
    :class:`~marft_envs.sandbox.isolation.SandboxUnavailable` on a machine without contained
    isolation unless ``allow_weak_isolation`` (or ``MARFT_SANDBOX_ALLOW_WEAK=1``), and
    :class:`~marft_envs.sandbox.process.SandboxError` if the sandbox itself fails.
    """
    limits = resolve_limits(limits, timeout_s, memory_mb)
    if pool is not None:
        return pool.run(source, files=files, limits=limits, env=env, stdin=stdin)
    isolation = detect_isolation()
    require(isolation, allow_weak_isolation)
    worker = WorkerProcess()
    try:
        return run_on(worker, isolation, source, files, limits, env, stdin)
    finally:
        worker.close()


def resolve_limits(limits: Limits | None, timeout_s: float | None, memory_mb: int | None) -> Limits:
    """``limits`` (or the defaults) with ``timeout_s`` and ``memory_mb`` applied."""
    limits = limits or Limits()
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a marft_envs.sandbox.Limits, got {type(limits).__name__}")
    changes = {k: v for k, v in (("timeout_s", timeout_s), ("memory_mb", memory_mb)) if v is not None}
    return dataclasses.replace(limits, **changes) if changes else limits


def run_on(
    worker: WorkerProcess, isolation: Isolation, source: str, files, limits: Limits, env, stdin: str | bytes | None = None
) -> RunResult:
    """Send one run to ``worker`` and turn its answer into a :class:`RunResult`."""
    request = build_request(source, files, limits, env, isolation, worker.slot)
    answer = worker.run(request, limits.timeout_s, _sealed(stdin))
    if answer.get("setup_error"):
        raise SandboxError(f"the sandbox could not set up the run ({isolation.tier} tier): {answer['setup_error']}")
    return RunResult(
        returncode=answer["returncode"],
        stdout=base64.b64decode(answer["stdout_b64"]).decode("utf-8", errors="replace"),
        stderr=base64.b64decode(answer["stderr_b64"]).decode("utf-8", errors="replace"),
        timed_out=answer["timed_out"],
        killed_by=answer["killed_by"],
        duration_s=answer["duration_s"],
        isolation=isolation.tier,
        stdout_truncated=answer["stdout_truncated"],
        stderr_truncated=answer["stderr_truncated"],
    )


def build_request(source: str, files, limits: Limits, env, isolation: Isolation, slot: int) -> dict:
    """The worker's run request; checks the caller's arguments and says what is wrong in one line."""
    if not isinstance(source, str):
        raise TypeError(f"source must be a str of Python code, got {type(source).__name__}")
    wire_files = {}
    for name, content in (files or {}).items():
        wire_files[_check_name(name)] = _encode(name, content)
    run_env = dict(BASE_ENV)  # the worker adds HOME (the working directory) and TMPDIR
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not isinstance(value, str) or "=" in key or "\0" in key + value:
            raise ValueError(f"env entries must be str -> str without '=' or NUL in names, got {key!r}: {value!r}")
        run_env[key] = value
    return {"source": source, "files": wire_files, "env": run_env, "limits": limits.to_wire(), "plan": isolation.plan(slot, limits)}


def _sealed(stdin) -> bytes:
    if stdin is None:
        return b""
    if isinstance(stdin, str):
        return stdin.encode()
    if isinstance(stdin, (bytes, bytearray)):
        return bytes(stdin)
    raise TypeError(f"stdin must be str or bytes, got {type(stdin).__name__}")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"file names must be non-empty strings, got {name!r}")
    norm = posixpath.normpath(name)
    if posixpath.isabs(name) or norm.startswith("..") or "\0" in name or norm in (".", "main.py"):
        raise ValueError(f"file name {name!r} must be a relative path inside the working directory (not main.py)")
    return norm


def _encode(name: str, content) -> dict:
    if isinstance(content, str):
        return {"text": content}
    if isinstance(content, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(content)).decode()}
    raise TypeError(f"file {name!r} must be str or bytes, got {type(content).__name__}")
