"""A pool of warm sandbox workers: many runs, concurrently, without starting a process per run.

Each worker is a small Python process that has already started (the costly part of a fresh
run); a run forks from it into new namespaces, so every run still gets a fresh process, fresh
mounts and a fresh ``/tmp``. Runs on different workers go in parallel (``map``). A worker that fails
is killed and replaced on its next use.

    with SandboxPool(workers=2) as pool:
        results = pool.map([{"source": "print(1)"}, {"source": "print(2)", "timeout_s": 1}])

``shared_pool()`` is a process-wide pool, started on first use and closed at exit (a forked child
gets its own).
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from marft_envs.sandbox.isolation import detect_isolation, require
from marft_envs.sandbox.limits import Limits
from marft_envs.sandbox.process import SandboxError, WorkerProcess
from marft_envs.sandbox.result import RunResult
from marft_envs.sandbox.run import resolve_limits, run_on


class SandboxPool:
    """Warm sandbox workers serving runs; thread-safe; ``map`` runs a batch in parallel."""

    def __init__(self, workers: int | None = None, *, limits: Limits | None = None, allow_weak_isolation: bool | None = None):
        self.size = workers if workers is not None else min(4, os.cpu_count() or 1)
        if self.size < 1:
            raise ValueError(f"a SandboxPool needs at least one worker, got workers={self.size}")
        self.limits = limits or Limits()
        self.isolation = detect_isolation()
        require(self.isolation, allow_weak_isolation)
        self._owner = os.getpid()
        self._idle: queue.LifoQueue[WorkerProcess | None] = queue.LifoQueue()
        for _ in range(self.size):
            self._idle.put(None)  # started on first use
        self._all: list[WorkerProcess] = []
        self._lock = threading.Lock()
        self._closed = False

    def run(
        self,
        source: str,
        *,
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        stdin: str | bytes | None = None,
    ) -> RunResult:
        """Run one program on an idle worker (waits for one); same arguments as ``run_python``."""
        if self._closed:
            raise SandboxError("this SandboxPool is closed")
        if os.getpid() != self._owner:
            raise SandboxError("a SandboxPool cannot be used after fork(); create a new one in the child")
        limits = resolve_limits(limits or self.limits, timeout_s, memory_mb)
        worker = self._idle.get()
        try:
            if worker is None or not worker.alive:
                worker = self._start()
            result = run_on(worker, self.isolation, source, files, limits, env, stdin)
        except SandboxError:
            if worker is not None:
                worker.kill()
            self._idle.put(None)
            raise
        except BaseException:
            self._idle.put(worker)
            raise
        self._idle.put(worker)
        return result

    def map(self, programs: Iterable[Mapping]) -> list[RunResult]:
        """Run many programs in parallel; each is a dict of ``run`` arguments (``source`` required)."""
        programs = list(programs)
        if not programs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.size, len(programs))) as ex:
            return list(ex.map(lambda p: self.run(**p), programs))

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        with self._lock:
            self._closed = True
            workers, self._all = self._all, []
        if os.getpid() == self._owner:
            for worker in workers:
                worker.close()

    def _start(self) -> WorkerProcess:
        worker = WorkerProcess()
        with self._lock:
            self._all = [w for w in self._all if w.alive] + [worker]
        return worker

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SandboxPool(workers={self.size}, tier={self.isolation.tier!r})"


_shared: dict[int, SandboxPool] = {}
_shared_lock = threading.Lock()


def shared_pool() -> SandboxPool:
    """The process-wide pool (``min(4, cpus)`` workers), started on first use and closed at exit."""
    with _shared_lock:
        pool = _shared.get(os.getpid())
        if pool is None or pool._closed:
            pool = _shared[os.getpid()] = SandboxPool()
            atexit.register(pool.close)
        return pool
