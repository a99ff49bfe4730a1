"""One sandbox worker process, seen from the host: start it, send it a run, get the answer in time.

The worker (``worker.py``) is started with ``python -s -S -B`` and a scrubbed environment, in a
session of its own, so nothing of the host's environment or imports reaches a sandboxed program.
If a worker does not answer within a run's timeout plus ``GRACE_S``, its process group is killed
(its runs die with it: each run's processes carry a parent-death signal) and the run raises
:class:`SandboxError`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
START_TIMEOUT_S = 60.0
"""How long a new worker may take to start (a loaded machine can make Python start slowly)."""
GRACE_S = 1.5
"""How long past a run's deadline the host waits for the worker's answer before killing it."""
MAX_SLOTS = 64
"""Concurrent workers per host process (each gets its own uid, so their process limits don't mix)."""
WORKER_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",  # set iteration order is the same in every run: graded output is reproducible
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}


PAYLOAD_KEYS = ("source", "files", "env")
"""The parts of a run request only the run's own processes decode (the worker passes them on as bytes)."""


class SandboxError(RuntimeError):
    """The sandbox itself failed (a layer could not be set up, or a worker died); not the program's fault."""


class _Slots:
    """Small integers for live workers; a worker's uid is derived from its slot."""

    def __init__(self, n: int):
        self._free = list(range(n))
        self._lock = threading.Lock()

    def acquire(self) -> int:
        with self._lock:
            if not self._free:
                raise SandboxError(f"more than {MAX_SLOTS} sandbox workers at once in one process; close some pools")
            return self._free.pop(0)

    def release(self, slot: int) -> None:
        with self._lock:
            if slot not in self._free:
                self._free.append(slot)
                self._free.sort()


_slots = _Slots(MAX_SLOTS)


class WorkerProcess:
    """A running sandbox worker; serves one run at a time (``run``) until ``close``."""

    def __init__(self):
        self.slot = _slots.acquire()
        self.runs = 0
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-S", "-B", str(WORKER_SCRIPT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
                env=dict(WORKER_ENV),
                cwd="/",
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            _slots.release(self.slot)
            raise
        self._in, self._out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        hello = self._receive(time.monotonic() + START_TIMEOUT_S)
        if not hello.get("ready"):
            self.close()
            raise SandboxError(f"the sandbox worker did not start: {hello}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, request: dict, timeout_s: float, stdin: bytes = b"") -> dict:
        """Send one run request and wait for its answer (at most ``timeout_s + GRACE_S``).

        ``stdin`` is the run's sealed input: the worker reads it only after forking the run and
        feeds it to the program's stdin, so no process of the run holds it before the program reads it.
        """
        if not self.alive:
            raise SandboxError("the sandbox worker has exited")
        header = json.dumps({k: v for k, v in request.items() if k not in PAYLOAD_KEYS}).encode()
        payload = json.dumps({k: request[k] for k in PAYLOAD_KEYS}).encode()
        message = b"".join(struct.pack(">I", len(part)) + part for part in (header, payload, bytes(stdin)))
        try:
            _write_all(self._in, message)
        except (BrokenPipeError, OSError) as err:
            self.kill()
            raise SandboxError(f"the sandbox worker is gone ({err})") from None
        self.runs += 1
        return self._receive(time.monotonic() + timeout_s + GRACE_S)

    def kill(self) -> None:
        """Kill the worker and everything it started (runs die through their parent-death signals)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._release()

    def close(self) -> None:
        """Let the worker finish (EOF on its stdin), killing it if it does not within a second."""
        if self.alive:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=1.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.alive:
            self.kill()
        else:
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._release()

    def _release(self) -> None:
        if self.slot is not None:
            _slots.release(self.slot)
            self.slot = None

    def _receive(self, deadline: float) -> dict:
        head = self._read_exactly(4, deadline)
        body = self._read_exactly(struct.unpack(">I", head)[0], deadline)
        return json.loads(body)

    def _read_exactly(self, n: int, deadline: float) -> bytes:
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                self.kill()
                raise SandboxError("the sandbox worker stopped answering; it was killed with everything it ran")
            chunk = os.read(self._out, n - got)
            if not chunk:
                code = self.proc.wait()
                self._release()
                raise SandboxError(f"the sandbox worker exited unexpectedly (status {code})")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def __del__(self):
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            self.kill()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
