"""The sandbox worker's pipes: length-prefixed messages with the host, status lines from a run's setup.

Messages are a 4-byte big-endian length, then that many bytes: JSON, except a run's payload, which
the worker keeps as raw bytes (``read_payload``). A run's setup stages report to the worker one JSON
object per line on a status pipe of their own (``send_status``, ``parse_statuses``).

Standard library only: the sandbox worker loads this file by path.
"""

from __future__ import annotations

import json
import os
import struct


def read_message(fd: int) -> dict | None:
    head = _read_exactly(fd, 4)
    if head is None:
        return None
    body = _read_exactly(fd, struct.unpack(">I", head)[0])
    return None if body is None else json.loads(body)


def read_payload(fd: int) -> bytearray | None:
    """A run's payload (its program, files and environment) as raw bytes, in a buffer that ``wipe`` clears.

    The worker never decodes a payload: only the run's own processes do, in their copy of this
    memory. Programs and tests sent for earlier runs (a task's solution among them, when a tester's
    asserts are checked against it) are thus never in the memory a later run inherits.
    """
    head = _read_exactly(fd, 4)
    if head is None:
        return None
    buf = bytearray(struct.unpack(">I", head)[0])
    with memoryview(buf) as view:
        got = 0
        while got < len(buf):
            n = os.readv(fd, [view[got:]])
            if n == 0:
                return None
            got += n
    return buf


def wipe(buf: bytearray) -> None:
    buf[:] = bytes(len(buf))  # in place: the same memory, now zeros


def write_message(fd: int, message: dict) -> None:
    body = json.dumps(message).encode()
    view = memoryview(struct.pack(">I", len(body)) + body)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def send_status(fd: int, **message) -> None:
    """One status line (``init_pid``, ``exit`` or ``setup_error``) from a run's process to the worker."""
    # Setup stages report to the worker on a pipe the program never sees (closed before it starts).
    os.write(fd, (json.dumps(message) + "\n").encode())


def parse_statuses(buf: bytearray) -> list[dict]:
    """The complete status lines received so far."""
    out = []
    for line in bytes(buf).split(b"\n"):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a partial line: the rest is still in the pipe
    return out
