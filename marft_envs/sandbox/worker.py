"""The sandbox worker: a small server that runs each untrusted program in a fresh, contained process.

This file runs as its own Python process (``python -s -S -B worker.py``), started and spoken to by
:mod:`marft_envs.sandbox.process`. It imports only the standard library, never ``marft_envs``: it
must start fast and its memory is what every sandboxed program inherits (nothing secret is in it:
see ``read_payload``).

Protocol: length-prefixed messages (4-byte big-endian length) on stdin and stdout. A request is three
messages: the run's plan and limits (JSON), then its payload (JSON of the program, its files and
environment), which the worker never decodes (see ``read_payload``), then its sealed input (raw
bytes for the program's stdin, often empty); one JSON response per request; EOF on stdin ends the
worker.

The sealed input is read from the host only *after* the run's first process has been forked, and
the worker feeds it into the program's stdin pipe from its own buffer (then wipes it): no process
of the run has it in memory until the program itself reads it. The code-repair judge relies on
this to keep a program's tests out of the memory of the program it forks
(``marft_envs/tasks/code/judge.py``).

One run, for the strongest tier (``"root"``: namespaces plus an unprivileged uid)::

    worker (W, a child subreaper)          polls the output pipes against the deadline
      └─ C   unshare(pid, mount, net, ipc, uts [, user]); fork I; report I's pid; exit
           I   PID 1 of the new PID namespace, reparented to W: a root of its own (``rootfs``:
               the standard library, fresh tmpfs /tmp and /dev/shm, new /proc); fork U; reap; exit
               with U — the kernel then kills everything left in the namespace
             └─ U  new session, rlimits, unprivileged uid, no new privileges, scrubbed environment,
                   stdin at EOF, the syscall filter (``seccomp``): runs the program as ``__main__``

At the deadline W sends SIGKILL to I: the kernel kills the whole PID namespace (double-forked
daemons and processes in new sessions included), and once W has reaped I nothing of the run is
left. Weaker tiers (no namespaces) fall back to killing every process of the run's uid, or the
run's process group and W's adopted orphans; they are refused unless the user opts in.

This file holds the worker's loop and the three processes of a run; the rest is in sibling modules,
standard library only and loaded by path at start-up (before any run hides the host's files):
``wire`` (the pipes' messages), ``linux`` (namespaces, prctl, capabilities), ``program`` (the
program's limits, files and ``__main__``), ``rootfs`` (the run's root), ``seccomp`` (the syscall
filter) and ``teardown`` (killing, reaping and cleaning up after a run).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import select
import shutil
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
# Only the interpreter's own library directories: never the script's directory or the user site.
sys.path = [os.path.abspath(p) for p in sys.path if p and os.path.isabs(p) and HERE != p]
BASE_SYS_PATH = list(sys.path)
"""The standard library: the only directories of the host a contained run sees, and its ``sys.path``."""


def _sibling(name: str):
    # The sandbox's other standard-library-only modules, loaded by path (the package is not importable).
    spec = importlib.util.spec_from_file_location(f"marft_sandbox_{name}", os.path.join(HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


linux = _sibling("linux")
program = _sibling("program")
rootfs = _sibling("rootfs")
seccomp = _sibling("seccomp")
teardown = _sibling("teardown")
wire = _sibling("wire")

# Modules test programs commonly import, loaded once here so that every run gets them for free (and
# so that on the weak tiers, where the run's uid may not be able to read the interpreter's files,
# they import at all). A run's changes to them stay in that run's own copy of this memory.
PRELOADED = (
    "math",
    "re",
    "collections",
    "itertools",
    "functools",
    "heapq",
    "bisect",
    "string",
    "typing",
    "random",
    "hashlib",
    "fractions",
    "operator",
    "copy",
    "ast",
)
for _name in PRELOADED:
    __import__(_name)
# Extension modules that may link shared libraries outside the standard library's directories
# (OpenSSL, SQLite, zlib, ...), which a contained run cannot see: loaded here so that they import.
LINKED = (
    "_ssl",
    "_hashlib",
    "_sqlite3",
    "_bz2",
    "_lzma",
    "zlib",
    "binascii",
    "_uuid",
    "_ctypes",
    "_decimal",
    "pyexpat",
    "_elementtree",
    "_dbm",
    "_gdbm",
    "_curses",
    "_curses_panel",
    "_multiprocessing",
    "_posixshmem",
)
for _name in LINKED:
    try:
        __import__(_name)
    except ImportError:
        pass


# -- the program's own process (U) -------------------------------------------------------------------


def user_main(req: dict, workdir: str, in_r: int, out_w: int, err_w: int, status_w: int) -> None:
    """Process U: limits, identity, stdio, then the program. Never returns."""
    plan, limits = req["plan"], req["limits"]
    try:
        os.setsid()
        os.dup2(in_r, 0)  # the sealed input, fed by the worker (EOF at once when there is none)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        program.set_limits(limits, plan)
        linux.become_unprivileged(plan)
        if "pid" not in plan["namespaces"]:
            linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
        os.chdir(workdir)
        program.write_files(workdir, req["files"])
        req["files"].clear()  # on disk now; not kept in this process's objects
        with open("main.py", "w") as f:
            f.write(req["source"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.environ.setdefault("HOME", workdir)
        os.environ.setdefault("TMPDIR", "/tmp" if "mount" in plan["namespaces"] else workdir)
        if plan.get("syscall_filter"):
            seccomp.install(_filter())  # last: from here on no namespaces, keyrings or mounts
    except BaseException as err:
        wire.send_status(status_w, setup_error=f"preparing the program's process: {type(err).__name__}: {err}")
        os._exit(71)
    os.closerange(3, 1 << 16)  # the program keeps only stdin, stdout and stderr
    code = 1
    try:  # nothing may return from here into the worker's code: this process is the program's
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
        code = program.run_program(req["source"], workdir, BASE_SYS_PATH)
    except BaseException:
        os.write(2, traceback.format_exc().encode(errors="replace"))
    finally:
        os._exit(code)


_compiled_filter = None


def _filter() -> int:
    # Compiled once per worker, before a run's filesystem hides libseccomp from its processes.
    global _compiled_filter
    if _compiled_filter is None:
        _compiled_filter = seccomp.build()
    return _compiled_filter


# -- the run's init (I) and the namespace creator (C) ------------------------------------------------


def init_main(req: dict, in_r: int, out_w: int, err_w: int, status_w: int) -> None:
    """Process I: PID 1 of the run (in the strong tiers). Never returns."""
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with C, which dies with the worker
    plan = req["plan"]
    if "mount" in plan["namespaces"]:
        workdir = rootfs.build_root(BASE_SYS_PATH, plan.get("uid"), req["limits"])
    else:
        workdir = plan["host_workdir"]
    upid = os.fork()
    if upid == 0:
        try:
            user_main(req, workdir, in_r, out_w, err_w, status_w)
        finally:
            os._exit(71)  # never fall through into init's code
    os.close(in_r)
    os.close(out_w)
    os.close(err_w)
    while True:  # as PID 1, also reap the orphans re-parented to us
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            status = None
            break
        if pid == upid:
            break
    wire.send_status(status_w, exit=status)
    os._exit(0)  # as PID 1, this kills every process left in the namespace


def creator_main(req: dict, worker_pid: int, in_r: int, out_w: int, err_w: int, status_w: int) -> None:
    """Process C: enter the new namespaces, start the run's init, wait for it. Never returns."""
    plan = req["plan"]
    stage = "entering namespaces"
    try:
        linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # the worker never leaves a run behind
        if os.getppid() != worker_pid:
            os._exit(1)
        flags = 0
        for name in plan["namespaces"]:
            flags |= linux.NAMESPACE_FLAGS[name]
        outer_uid, outer_gid = os.getuid(), os.getgid()
        if flags:
            linux.unshare(flags)
        if "user" in plan["namespaces"]:
            stage = "mapping the user namespace"
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"{plan['inner_uid']} {outer_uid} 1")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"{plan['inner_uid']} {outer_gid} 1")
        stage = "starting the run's init"
        ipid = os.fork()
        if ipid == 0:
            try:
                init_main(req, in_r, out_w, err_w, status_w)
            except BaseException as err:
                wire.send_status(status_w, setup_error=f"setting up the run: {type(err).__name__}: {err}")
            finally:
                os._exit(70)
        wire.send_status(status_w, init_pid=ipid)
        for fd in (in_r, out_w, err_w, status_w):
            os.close(fd)
    except BaseException as err:
        wire.send_status(status_w, setup_error=f"{stage}: {type(err).__name__}: {err}")
        os._exit(70)
    # Reaping I means its PID namespace is empty: every process of the run is gone.
    os.waitpid(ipid, 0)
    os._exit(0)


# -- the worker (W): start a run, watch it, end it ------------------------------------------------


def serve_run(req: dict, payload: bytearray) -> dict:
    """One run: fork it, feed its sealed input (read from fd 0 only now), watch it, answer."""
    plan, limits = req["plan"], req["limits"]
    if plan.get("syscall_filter"):
        _filter()
    started = time.monotonic()
    deadline = started + limits["timeout_s"]
    if "mount" not in plan["namespaces"]:
        plan["host_workdir"] = program.host_workdir(plan)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    status_r, status_w = os.pipe()
    worker_pid = os.getpid()
    cpid = os.fork()
    if cpid == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # the worker's request and response pipes stay with the worker
            os.dup2(devnull, fd)
        for fd in (in_w, out_r, err_r, status_r, devnull):
            os.close(fd)
        try:
            creator_main({**req, **json.loads(bytes(payload))}, worker_pid, in_r, out_w, err_w, status_w)
        finally:
            os._exit(70)
    wire.wipe(payload)  # the run has its own copy
    for fd in (in_r, out_w, err_w, status_w):
        os.close(fd)
    sealed = wire.read_payload(0)  # only now: the run's processes never had it in memory
    feeder = wire.Feeder(in_w, sealed if sealed is not None else bytearray())  # None: the host left; main() sees EOF next
    try:
        return _watch_run(req, cpid, started, deadline, feeder, out_r, err_r, status_r)
    finally:
        feeder.close()


def _watch_run(req: dict, cpid: int, started: float, deadline: float, feeder, out_r: int, err_r: int, status_r: int) -> dict:
    plan, limits = req["plan"], req["limits"]

    streams = {out_r: bytearray(), err_r: bytearray()}
    status_buf = bytearray()
    open_fds = {out_r, err_r, status_r}
    cap = limits["max_output_bytes"]
    killed_by, timed_out, swept = None, False, False
    poller = select.poll()
    for fd in open_fds:
        poller.register(fd, select.POLLIN)
    feeder.register(poller)
    while open_fds:
        messages = wire.parse_statuses(status_buf)
        if any("setup_error" in m for m in messages):
            break
        if not swept and "pid" not in plan["namespaces"] and any("exit" in m for m in messages):
            teardown.sweep(plan, cpid)  # no PID namespace: kill what the program left behind ourselves
            swept = True
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out, killed_by = True, "timeout"
            break
        for fd, event in poller.poll(max(1, int(left * 1000))):
            if fd == feeder.fd:
                feeder.feed(poller, event)
                continue
            chunk = os.read(fd, teardown.READ_CHUNK)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
            elif fd == status_r:
                status_buf += chunk
            else:
                streams[fd] += chunk
                if len(streams[fd]) > cap:
                    killed_by = "output_limit"
        if killed_by:
            break

    feeder.close(poller)
    init_pid = next((m["init_pid"] for m in wire.parse_statuses(status_buf) if "init_pid" in m), None)
    teardown.end_run(cpid, init_pid, plan, swept)
    teardown.drain(open_fds - {status_r}, streams, cap)
    if status_r in open_fds:
        status_buf += teardown.drain_one(status_r)
    for fd in (out_r, err_r, status_r):
        os.close(fd)
    if plan.get("host_workdir"):
        shutil.rmtree(plan["host_workdir"], ignore_errors=True)
    messages = wire.parse_statuses(status_buf)
    setup_error = next((m["setup_error"] for m in messages if "setup_error" in m), None)
    exit_status = next((m["exit"] for m in messages if "exit" in m), None)
    returncode, signal_name = teardown.decode_status(exit_status)
    stderr = bytes(streams[err_r][:cap])
    if killed_by is None and signal_name is not None:
        killed_by = {"SIGXCPU": "cpu_time", "SIGXFSZ": "file_size"}.get(signal_name, f"signal:{signal_name}")
        if signal_name == "SIGKILL" and program.cpu_exhausted(limits, started):
            killed_by = "cpu_time"
    elif killed_by is None and returncode not in (0, None) and b"MemoryError" in stderr[-4096:]:
        killed_by = "memory"
    return {
        "returncode": None if killed_by in ("timeout", "output_limit") else returncode,
        "signal": signal_name,
        "stdout_b64": base64.b64encode(bytes(streams[out_r][:cap])).decode(),
        "stderr_b64": base64.b64encode(stderr).decode(),
        "stdout_truncated": len(streams[out_r]) > cap,
        "stderr_truncated": len(streams[err_r]) > cap,
        "timed_out": timed_out,
        "killed_by": killed_by,
        "duration_s": time.monotonic() - started,
        "setup_error": setup_error,
    }


def main() -> None:
    # Orphans of a run are re-parented to us, so we can reap them. (No parent-death signal here: it
    # fires when the *thread* that started us exits, and pools start workers from short-lived threads;
    # EOF on stdin ends the worker instead, at the latest when the run in progress times out.)
    linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    wire.write_message(1, {"ready": True, "pid": os.getpid()})
    while True:
        req = wire.read_message(0)
        payload = wire.read_payload(0) if req is not None else None
        if payload is None:
            return
        try:
            response = serve_run(req, payload)
        except BaseException as err:  # a bug here must answer, not leave the caller waiting
            response = {"setup_error": f"worker: {type(err).__name__}: {err}", "trace": traceback.format_exc()}
        finally:
            wire.wipe(payload)
        wire.write_message(1, response)


if __name__ == "__main__":
    main()
