"""The sandbox worker's pipes: length-prefixed messages with the host, status lines from a run's setup.

Messages are a 4-byte big-endian length, then that many bytes: JSON, except a run's payload, which
the worker keeps as raw bytes (``read_payload``). A run's setup stages report to the worker one JSON
object per line on a status pipe of their own (``send_status``, ``parse_statuses``).

Standard library only: the sandbox worker loads this file by path.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct

CHUNK = 1 << 16
"""Bytes a ``Feeder`` writes at a time."""


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
        view = view[os.write(fd, view) :]


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


class Feeder:
    """Writes a run's sealed input into its stdin pipe as the program reads it, then wipes the buffer."""

    def __init__(self, fd: int, data: bytearray):
        self.fd, self.data, self.sent = fd, data, 0
        os.set_blocking(fd, False)
        # A program that exits without reading must not kill the worker with SIGPIPE; the runs it
        # forks later are forked with the default disposition again (``close``).
        self._sigpipe = signal.signal(signal.SIGPIPE, signal.SIG_IGN)

    def register(self, poller) -> None:
        if self.sent >= len(self.data):
            self.close(poller, registered=False)
        else:
            poller.register(self.fd, select.POLLOUT)

    def feed(self, poller, event: int) -> None:
        if event & select.POLLOUT:
            try:
                with memoryview(self.data) as view:
                    self.sent += os.write(self.fd, view[self.sent : self.sent + CHUNK])
            except BlockingIOError:
                return
            except OSError:  # the program closed its stdin
                self.sent = len(self.data)
        else:
            self.sent = len(self.data)
        if self.sent >= len(self.data):
            self.close(poller)

    def close(self, poller=None, registered: bool = True) -> None:
        if self.fd is None:
            return
        if registered and poller is not None:
            try:
                poller.unregister(self.fd)
            except KeyError:
                pass
        os.close(self.fd)
        self.fd = None
        wipe(self.data)
        signal.signal(signal.SIGPIPE, self._sigpipe)
