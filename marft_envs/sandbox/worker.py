"""The sandbox worker: a small server that runs each untrusted program in a fresh, contained process.

This file runs as its own Python process (``python -s -S -B worker.py``), started and spoken to by
:mod:`marft_envs.sandbox.process`. It imports only the standard library, never ``marft_envs``: it
must start fast and its memory is what every sandboxed program inherits (nothing secret is in it:
see ``read_payload``).

Protocol: length-prefixed messages (4-byte big-endian length) on stdin and stdout. A request is two
messages: the run's plan and limits (JSON), then its payload (JSON of the program, its files and
environment), which the worker never decodes (see ``read_payload``); one JSON response per request;
EOF on stdin ends the worker.

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
"""

from __future__ import annotations

import base64
import builtins
import ctypes
import errno
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
import types

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


rootfs = _sibling("rootfs")
seccomp = _sibling("seccomp")

# Modules test programs commonly import, loaded once here so that every run gets them for free (and
# so that on the weak tiers, where the run's uid may not be able to read the interpreter's files,
# they import at all). A run's changes to them stay in that run's own copy of this memory.
PRELOADED = ("math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "typing",
             "random", "hashlib", "fractions", "operator", "copy", "ast")
for _name in PRELOADED:
    __import__(_name)
# Extension modules that may link shared libraries outside the standard library's directories
# (OpenSSL, SQLite, zlib, ...), which a contained run cannot see: loaded here so that they import.
LINKED = ("_ssl", "_hashlib", "_sqlite3", "_bz2", "_lzma", "zlib", "binascii", "_uuid", "_ctypes", "_decimal",
          "pyexpat", "_elementtree", "_dbm", "_gdbm", "_curses", "_curses_panel", "_multiprocessing", "_posixshmem")
for _name in LINKED:
    try:
        __import__(_name)
    except ImportError:
        pass

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = {"mount": CLONE_NEWNS, "uts": CLONE_NEWUTS, "ipc": CLONE_NEWIPC, "pid": CLONE_NEWPID,
                   "net": CLONE_NEWNET, "user": CLONE_NEWUSER}

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
READ_CHUNK = 1 << 16
SWEEP_S = 2.0  # without a PID namespace, how long to keep killing a run's leftovers (a loaded machine is slow to let them die)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class SetupError(Exception):
    """A sandbox layer could not be put in place; the run is refused, never run with less."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), f"prctl({option})")


def drop_capabilities() -> None:
    """Empty every capability set (a user-namespace root keeps them across a uid change otherwise)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(header, data), "capset")


# -- messages --------------------------------------------------------------------------------------


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


def _status(fd: int, **message) -> None:
    # Setup stages report to the worker on a pipe the program never sees (closed before it starts).
    os.write(fd, (json.dumps(message) + "\n").encode())


# -- the program's own process (U) -------------------------------------------------------------------


def set_limits(limits: dict, plan: dict) -> None:
    mb = 1 << 20
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # soft: SIGXCPU; hard: SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["max_file_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["max_open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash must not write a core file to disk
    if plan["nproc"] is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (plan["nproc"],) * 2)


def become_unprivileged(plan: dict) -> None:
    if plan.get("uid") is not None:
        os.setgroups([])
        os.setresgid(plan["gid"], plan["gid"], plan["gid"])
        os.setresuid(plan["uid"], plan["uid"], plan["uid"])
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SetupError("still root after setresuid")
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if "user" in plan["namespaces"]:
        drop_capabilities()


def write_files(workdir: str, files: dict) -> None:
    for name, content in files.items():
        path = os.path.join(workdir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = base64.b64decode(content["b64"]) if "b64" in content else content["text"].encode()
        with open(path, "wb") as f:
            f.write(data)


def run_program(source: str, workdir: str) -> int:
    """Run ``source`` as ``__main__`` the way ``python main.py`` would; returns the exit code."""
    sys.argv = ["main.py"]
    sys.path = [workdir, *BASE_SYS_PATH]  # never site-packages: a run gets the standard library only
    module = types.ModuleType("__main__")
    module.__file__ = os.path.join(workdir, "main.py")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    code = 0
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException as err:  # an uncaught error prints its traceback and exits 1, as python does
        tb = err.__traceback__
        traceback.print_exception(type(err), err, tb.tb_next if tb else None)  # without this frame
        code = 1
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    return code


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def user_main(req: dict, workdir: str, out_w: int, err_w: int, status_w: int) -> None:
    """Process U: limits, identity, stdio, then the program. Never returns."""
    plan, limits = req["plan"], req["limits"]
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        set_limits(limits, plan)
        become_unprivileged(plan)
        if "pid" not in plan["namespaces"]:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
        os.chdir(workdir)
        write_files(workdir, req["files"])
        with open("main.py", "w") as f:
            f.write(req["source"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.environ.setdefault("HOME", workdir)
        os.environ.setdefault("TMPDIR", "/tmp" if "mount" in plan["namespaces"] else workdir)
        if plan.get("syscall_filter"):
            seccomp.install(_filter())  # last: from here on no namespaces, keyrings or mounts
    except BaseException as err:
        _status(status_w, setup_error=f"preparing the program's process: {type(err).__name__}: {err}")
        os._exit(71)
    os.closerange(3, 1 << 16)  # the program keeps only stdin, stdout and stderr
    code = 1
    try:  # nothing may return from here into the worker's code: this process is the program's
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
        code = run_program(req["source"], workdir)
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


def init_main(req: dict, out_w: int, err_w: int, status_w: int) -> None:
    """Process I: PID 1 of the run (in the strong tiers). Never returns."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with C, which dies with the worker
    plan = req["plan"]
    if "mount" in plan["namespaces"]:
        workdir = rootfs.build_root(BASE_SYS_PATH, plan.get("uid"), req["limits"])
    else:
        workdir = plan["host_workdir"]
    upid = os.fork()
    if upid == 0:
        try:
            user_main(req, workdir, out_w, err_w, status_w)
        finally:
            os._exit(71)  # never fall through into init's code
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
    _status(status_w, exit=status)
    os._exit(0)  # as PID 1, this kills every process left in the namespace


def creator_main(req: dict, worker_pid: int, out_w: int, err_w: int, status_w: int) -> None:
    """Process C: enter the new namespaces, start the run's init, wait for it. Never returns."""
    plan = req["plan"]
    stage = "entering namespaces"
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the worker never leaves a run behind
        if os.getppid() != worker_pid:
            os._exit(1)
        flags = 0
        for name in plan["namespaces"]:
            flags |= NAMESPACE_FLAGS[name]
        outer_uid, outer_gid = os.getuid(), os.getgid()
        if flags:
            unshare(flags)
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
                init_main(req, out_w, err_w, status_w)
            except BaseException as err:
                _status(status_w, setup_error=f"setting up the run: {type(err).__name__}: {err}")
            finally:
                os._exit(70)
        _status(status_w, init_pid=ipid)
        for fd in (out_w, err_w, status_w):
            os.close(fd)
    except BaseException as err:
        _status(status_w, setup_error=f"{stage}: {type(err).__name__}: {err}")
        os._exit(70)
    # Reaping I means its PID namespace is empty: every process of the run is gone.
    os.waitpid(ipid, 0)
    os._exit(0)


# -- the worker (W): start a run, watch it, end it ------------------------------------------------


def serve_run(req: dict, payload: bytearray) -> dict:
    plan, limits = req["plan"], req["limits"]
    if plan.get("syscall_filter"):
        _filter()
    started = time.monotonic()
    deadline = started + limits["timeout_s"]
    if "mount" not in plan["namespaces"]:
        plan["host_workdir"] = _host_workdir(plan)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    status_r, status_w = os.pipe()
    worker_pid = os.getpid()
    cpid = os.fork()
    if cpid == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # the worker's request and response pipes stay with the worker
            os.dup2(devnull, fd)
        for fd in (out_r, err_r, status_r, devnull):
            os.close(fd)
        try:
            creator_main({**req, **json.loads(bytes(payload))}, worker_pid, out_w, err_w, status_w)
        finally:
            os._exit(70)
    wipe(payload)  # the run has its own copy
    for fd in (out_w, err_w, status_w):
        os.close(fd)

    streams = {out_r: bytearray(), err_r: bytearray()}
    status_buf = bytearray()
    open_fds = {out_r, err_r, status_r}
    cap = limits["max_output_bytes"]
    killed_by, timed_out, swept = None, False, False
    poller = select.poll()
    for fd in open_fds:
        poller.register(fd, select.POLLIN)
    while open_fds:
        messages = _messages(status_buf)
        if any("setup_error" in m for m in messages):
            break
        if not swept and "pid" not in plan["namespaces"] and any("exit" in m for m in messages):
            _sweep(plan, cpid)  # no PID namespace: kill what the program left behind ourselves
            swept = True
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out, killed_by = True, "timeout"
            break
        for fd, _ in poller.poll(max(1, int(left * 1000))):
            chunk = os.read(fd, READ_CHUNK)
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

    init_pid = next((m["init_pid"] for m in _messages(status_buf) if "init_pid" in m), None)
    _end_run(cpid, init_pid, plan, swept)
    _drain(open_fds - {status_r}, streams, cap)
    if status_r in open_fds:
        status_buf += _drain_one(status_r)
    for fd in (out_r, err_r, status_r):
        os.close(fd)
    if plan.get("host_workdir"):
        shutil.rmtree(plan["host_workdir"], ignore_errors=True)
    messages = _messages(status_buf)
    setup_error = next((m["setup_error"] for m in messages if "setup_error" in m), None)
    exit_status = next((m["exit"] for m in messages if "exit" in m), None)
    returncode, signal_name = _decode_status(exit_status)
    stderr = bytes(streams[err_r][:cap])
    if killed_by is None and signal_name is not None:
        killed_by = {"SIGXCPU": "cpu_time", "SIGXFSZ": "file_size"}.get(signal_name, f"signal:{signal_name}")
        if signal_name == "SIGKILL" and _cpu_exhausted(limits, started):
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


def _messages(buf: bytearray) -> list[dict]:
    out = []
    for line in bytes(buf).split(b"\n"):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a partial line: the rest is still in the pipe
    return out


def _end_run(cpid: int, init_pid: int | None, plan: dict, swept: bool) -> None:
    """Kill and reap everything the run started; after this, nothing of it is running."""
    if init_pid is not None:
        try:
            os.kill(init_pid, signal.SIGKILL)  # PID 1 of the namespace: the kernel kills all of it
        except ProcessLookupError:
            pass
    if "pid" not in plan["namespaces"]:
        _sweep(plan, cpid, remove_files=not swept)
    try:
        os.waitpid(cpid, 0)  # C exits only after reaping I, i.e. once the PID namespace is empty
    except ChildProcessError:
        pass  # already reaped by a sweep
    _reap_adopted()


def _sweep(plan: dict, cpid: int, remove_files: bool = True) -> None:
    """Without a PID namespace: kill every process of the run's uid, else the adopted orphans."""
    give_up = time.monotonic() + SWEEP_S
    if plan.get("uid") is not None:
        while time.monotonic() < give_up:
            pid = os.fork()
            if pid == 0:  # kill(-1) as the run's uid reaches exactly that uid's processes
                try:
                    os.setresuid(plan["uid"], plan["uid"], plan["uid"])
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            _reap_adopted()
            if not _processes_of(plan["uid"]):  # (kill(-1) cannot say whether it reached anyone)
                break
            time.sleep(0.001)
        if remove_files:
            _remove_planted_files(plan["uid"])
    else:
        while time.monotonic() < give_up:  # orphans re-parent to us (a subreaper); kill them until none are left
            children = [p for p in _children() if p != cpid]
            if not children:
                break
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.001)
            _reap_adopted()


def _processes_of(uid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                found.append(int(name))
                            break
            except (OSError, ValueError):
                pass
    return found


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _reap_adopted() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _remove_planted_files(uid: int) -> None:
    """No private /tmp: delete what the run's uid left in the shared temp dirs, for no later run to read.

    The uid can only have created entries in world-writable directories (or in directories it
    created, which go as a whole), so only those are searched.
    """
    stack = [d for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(d)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
                if st.st_uid == uid:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
                elif entry.is_dir(follow_symlinks=False) and st.st_mode & 0o002:
                    stack.append(entry.path)
            except OSError:
                pass


def _host_workdir(plan: dict) -> str:
    path = tempfile.mkdtemp(prefix="marft-sandbox-")
    if plan.get("uid") is not None:
        os.chown(path, plan["uid"], plan["gid"])
    return path


def _drain(fds: set[int], streams: dict, cap: int) -> None:
    for fd in fds:
        data = _drain_one(fd)
        streams[fd] += data[: max(0, cap + 1 - len(streams[fd]))]


def _drain_one(fd: int) -> bytes:
    # Everything that could write is dead by now, so this ends; the time limit is a second guard.
    os.set_blocking(fd, False)
    out, end = bytearray(), time.monotonic() + 0.5
    while time.monotonic() < end:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            select.select([fd], [], [], 0.05)
            continue
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _decode_status(status) -> tuple[int | None, str | None]:
    if status is None:
        return None, None
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return -sig, name
    return os.WEXITSTATUS(status), None


def _cpu_exhausted(limits: dict, started: float) -> bool:
    # The hard CPU limit ends a program with SIGKILL; only a run that lasted that long can have hit it.
    return time.monotonic() - started >= limits["cpu_s"] * 0.9


def main() -> None:
    # Orphans of a run are re-parented to us, so we can reap them. (No parent-death signal here: it
    # fires when the *thread* that started us exits, and pools start workers from short-lived threads;
    # EOF on stdin ends the worker instead, at the latest when the run in progress times out.)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    write_message(1, {"ready": True, "pid": os.getpid()})
    while True:
        req = read_message(0)
        payload = read_payload(0) if req is not None else None
        if payload is None:
            return
        try:
            response = serve_run(req, payload)
        except BaseException as err:  # a bug here must answer, not leave the caller waiting
            response = {"setup_error": f"worker: {type(err).__name__}: {err}", "trace": traceback.format_exc()}
        finally:
            wipe(payload)
        write_message(1, response)


if __name__ == "__main__":
    main()
