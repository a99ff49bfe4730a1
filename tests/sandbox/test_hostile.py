"""Hostile programs are contained: the host process and files are untouched, nothing is left running,
and every run ends within its timeout + 2 s.

Only runs where the sandbox is contained (``root`` or ``userns`` tier) *and* a harmless probe has
confirmed its limits (``contained_pool`` in conftest.py); elsewhere every test here is skipped with
the reason. The programs run two at a time on a 2-worker pool; the host sets up bait first (files a
program should not be able to touch, ports it should not reach, a process it should not kill).
"""

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sandbox_checks import descendants, sandbox_processes

from marft_envs.sandbox import Limits
from marft_envs.sandbox.isolation import UID_BASE

TIMEOUT_S = 1.5
HOST_DISK_NOISE_MB = 512
"""How much the host's free space may drop during the suite through other processes' writes."""
LIMITS = Limits(timeout_s=TIMEOUT_S, memory_mb=256, max_processes=32, tmpfs_mb=32, max_file_mb=8, max_output_bytes=256 << 10)
SLACK_S = 2.0  # every run ends within its timeout + 2 s

PROGRAMS = {
    "infinite_loop": "while True:\n    pass\n",
    "ignores_sigterm": """
        import signal
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGXCPU, signal.SIGUSR1):
            signal.signal(s, signal.SIG_IGN)
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
    """,
    "fork_bomb": """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """,
    "memory_hog": """
        hoard = [bytearray(1 << 30) for _ in range(64)]  # 64 GiB; the address-space limit stops the first
    """,
    # Growing page by page in 17 processes: on a busy machine it may run out of time before memory.
    "memory_hog_in_many_processes": """
        import os
        for _ in range(16):
            try:
                if os.fork() == 0:
                    break
            except OSError:
                break
        hoard = []
        while True:
            hoard.append(bytearray(16 << 20))
    """,
    "endless_output": """
        import sys
        while True:
            sys.stdout.write("x" * 65536)
    """,
    "disk_fill": """
        import errno, json, os
        out = {}
        try:
            with open("big", "wb") as f:
                for _ in range(1024):  # 1 GiB, a MiB at a time
                    f.write(b"x" * (1 << 20))
        except OSError as e:
            out["one_big_file"] = errno.errorcode[e.errno]
        n = 0
        try:
            while True:
                with open(f"small_{n}", "wb") as f:
                    f.write(b"x" * (1 << 20))
                n += 1
        except OSError as e:
            out["many_files"] = errno.errorcode[e.errno]
        for d in ("/var/tmp", "/", "/opt", "/usr", VICTIM_DIR, os.path.dirname(VICTIM_DIR)):
            try:
                with open(os.path.join(d, "marft_fill"), "wb") as f:
                    f.write(b"x" * (1 << 20))
                out[d] = "WROTE"
            except OSError as e:
                out[d] = errno.errorcode.get(e.errno, str(e))
        print(json.dumps(out))
    """,
    "delete_and_overwrite_outside": """
        import json, os, shutil
        out = {}
        attempts = {
            "unlink world-writable file": lambda: os.unlink(VICTIM_DIR + "/victim.txt"),
            "overwrite world-writable file": lambda: open(VICTIM_DIR + "/victim.txt", "w").write("pwned"),
            "append to root's file": lambda: open(VICTIM_DIR + "/root_only.txt", "a").write("pwned"),
            "rename": lambda: os.rename(VICTIM_DIR + "/victim.txt", VICTIM_DIR + "/moved.txt"),
            "chmod": lambda: os.chmod(VICTIM_DIR + "/victim.txt", 0),
            "truncate": lambda: os.truncate(VICTIM_DIR + "/victim.txt", 0),
            "new file next to it": lambda: open(VICTIM_DIR + "/new.txt", "w").write("x"),
            "symlink next to it": lambda: os.symlink("/etc/passwd", VICTIM_DIR + "/link"),
            "rmtree the directory": lambda: shutil.rmtree(VICTIM_DIR),
            "unlink the project's file": lambda: os.unlink(PROJECT_FILE),
            "overwrite the project's file": lambda: open(PROJECT_FILE, "a").write("pwned"),
        }
        for name, attempt in attempts.items():
            try:
                attempt()
                out[name] = "DONE"
            except OSError as e:
                out[name] = type(e).__name__
        print(json.dumps(out))
    """,
    "connect_to_host_ports": """
        import json, socket
        out = {}
        for host, port in TARGETS:
            try:
                socket.create_connection((host, port), timeout=0.5).close()
                out[f"{host}:{port}"] = "CONNECTED"
            except OSError as e:
                out[f"{host}:{port}"] = type(e).__name__
            try:
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                u.sendto(b"hello", (host, port))
                out[f"udp {host}:{port}"] = "SENT"
            except OSError as e:
                out[f"udp {host}:{port}"] = type(e).__name__
        print(json.dumps(out))
    """,
    "plant_files_for_a_later_run": """
        import ctypes, json, os
        out = {}
        for path in ("/tmp/marft_planted", "/dev/shm/marft_planted", "/var/tmp/marft_planted", "marft_planted"):
            try:
                with open(path, "w") as f:
                    f.write("the answer is 42")
                os.chmod(path, 0o666)
                out[path] = "PLANTED"
            except OSError as e:
                out[path] = type(e).__name__
        # shm_open itself: multiprocessing.shared_memory would also start a resource-tracker process,
        # whose pipe can break inside the sandbox and end this program with SIGPIPE before it reports
        import _posixshmem
        try:
            fd = _posixshmem.shm_open("/marft_planted_shm", os.O_CREAT | os.O_RDWR, 0o666)
            os.write(fd, b"42")
            os.close(fd)
            out["posix shm"] = "PLANTED"
        except OSError as e:
            out["posix shm"] = type(e).__name__
        libc = ctypes.CDLL(None, use_errno=True)
        out["sysv shm"] = "PLANTED" if libc.shmget(0x4D415246, 4096, 0o1000 | 0o666) >= 0 else "failed"
        print(json.dumps(out))
    """,
    "kill_the_parent": """
        import json, os, signal
        out = {}
        targets = {"parent": os.getppid(), "pid 1": 1, "every process": -1, "host bystander": BYSTANDER,
                   **{f"sandbox worker {k}": pid for k, pid in enumerate(WORKERS)}}
        for name, pid in targets.items():
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                    out[f"{name} {sig.name}"] = "SENT"
                except OSError as e:
                    out[f"{name} {sig.name}"] = type(e).__name__
        print(json.dumps(out), flush=True)
        os.killpg(0, signal.SIGKILL)  # its own process group: ends this program, nothing else
    """,
    "double_forked_daemon": """
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                    signal.signal(s, signal.SIG_IGN)
                while True:
                    time.sleep(0.01)
            os._exit(0)
        if os.fork() == 0:  # a plain orphan too
            while True:
                time.sleep(0.01)
        print("parent exits, leaving its daemons behind")
    """,
    "waits_on_stdin": """
        import json, sys
        out = {}
        try:
            out["input"] = input()
        except EOFError:
            out["input"] = "EOFError"
        out["read"] = sys.stdin.read()
        try:
            open("/dev/tty").read()
            out["tty"] = "OPENED"
        except OSError as e:
            out["tty"] = type(e).__name__
        print(json.dumps(out))
    """,
    # Kernel objects that outlive a process unless the sandbox says otherwise: keyrings belong to a
    # uid (every run of a worker has the same one); SysV and POSIX message queues and semaphores to
    # an IPC namespace.
    "plant_kernel_objects": """
        import ctypes, errno, json, os
        libc = ctypes.CDLL(None, use_errno=True)
        out = {}
        def attempt(name, ret):
            out[name] = "PLANTED" if ret >= 0 else errno.errorcode.get(ctypes.get_errno(), "failed")
        if KEYS:
            add_key, request_key, keyctl = KEYS
            for ring, name in ((-4, "user keyring"), (-5, "user session keyring"), (-3, "session keyring")):
                attempt(name, libc.syscall(add_key, b"user", b"marft_planted", b"42", 2, ring))
            attempt("join a new session keyring", libc.syscall(keyctl, 1, b"marft_session"))
        attempt("sysv message queue", libc.msgget(0x4D415247, 0o1000 | 0o666))
        attempt("sysv semaphore", libc.semget(0x4D415248, 1, 0o1000 | 0o666))
        attempt("posix message queue", libc.mq_open(b"/marft_planted_mq", os.O_CREAT | os.O_RDWR, 0o666, None))
        print(json.dumps(out))
    """,
    "new_namespaces_and_mounts": """
        import ctypes, errno, json, os
        libc = ctypes.CDLL(None, use_errno=True)
        out = {}
        def attempt(name, ret):
            out[name] = "DONE" if ret >= 0 else errno.errorcode.get(ctypes.get_errno(), "failed")
        flags = {"user": 0x10000000, "mount": 0x00020000, "net": 0x40000000, "pid": 0x20000000,
                 "ipc": 0x08000000, "uts": 0x04000000, "cgroup": 0x02000000}
        for name, flag in flags.items():
            attempt(f"unshare {name}", libc.unshare(flag))
        for name in ("user", "mnt", "net", "pid", "ipc", "uts"):
            fd = os.open(f"/proc/self/ns/{name}", os.O_RDONLY)
            attempt(f"setns {name}", libc.setns(fd, 0))
            os.close(fd)
        if CLONE:
            clone, clone3 = CLONE
            pid = libc.syscall(clone, 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
            if pid == 0:
                os._exit(0)
            attempt("clone with CLONE_NEWUSER", pid)
            if pid > 0:
                os.waitpid(pid, 0)
            attempt("clone3", libc.syscall(clone3, 0, 0))
        attempt("mount tmpfs", libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None))
        try:
            os.chroot("/tmp")
            out["chroot"] = "DONE"
        except OSError as e:
            out["chroot"] = errno.errorcode.get(e.errno, str(e))
        if os.fork() == 0:  # plain processes and threads still work
            os._exit(7)
        out["fork"] = os.WEXITSTATUS(os.wait()[1])
        import threading
        t = threading.Thread(target=lambda: out.__setitem__("thread", "ran"))
        t.start()
        t.join()
        print(json.dumps(out))
    """,
    # What the program could read to score without fixing anything (a shipped solution) or to learn
    # about the host: installed packages, this checkout, the task data, home and system files.
    "read_host_files": """
        import json, os, sys
        def visible(path):  # a directory that is only the way to the standard library shows nothing
            if not os.path.isdir(path):
                return os.path.exists(path)
            on_the_way = {p[len(path):].strip("/").split("/")[0] for p in sys.path if p.startswith(path.rstrip("/") + "/")}
            return sorted(set(os.listdir(path)) - on_the_way)
        out = {path: visible(path) for path in HOST_PATHS}
        out["site-packages on sys.path"] = [p for p in sys.path if "-packages" in p]
        for module in ("marft_envs", "numpy", "pytest"):
            try:
                __import__(module)
                out[f"import {module}"] = "IMPORTED"
            except ImportError:
                out[f"import {module}"] = "ImportError"
        out["/"] = sorted(os.listdir("/"))
        print(json.dumps(out))
    """,
    "runaway_recursion": """
        def f():
            return f()
        f()
    """,
    "runaway_recursion_unbounded": """
        import sys
        sys.setrecursionlimit(10**8)
        def f(n):
            return f(n + 1) + 1
        f(0)
    """,
}
SECOND_WAVE = {
    "read_planted_files": """
        import ctypes, json, os
        out = {"/tmp": sorted(os.listdir("/tmp")), "/dev/shm": sorted(os.listdir("/dev/shm")),
               "cwd": sorted(os.listdir("."))}
        for path in ("/tmp/marft_planted", "/dev/shm/marft_planted", "/var/tmp/marft_planted",
                     "/dev/shm/marft_planted_shm", "marft_planted"):
            out[path] = os.path.exists(path)
        libc = ctypes.CDLL(None, use_errno=True)
        out["sysv shm"] = libc.shmget(0x4D415246, 0, 0) >= 0
        out["sysv message queue"] = libc.msgget(0x4D415247, 0) >= 0
        out["sysv semaphore"] = libc.semget(0x4D415248, 0, 0) >= 0
        out["posix message queue"] = libc.mq_open(b"/marft_planted_mq", os.O_RDONLY) >= 0
        if KEYS:
            add_key, request_key, keyctl = KEYS
            for ring in (-4, -5, -3):  # search the user, user session and session keyrings
                out[f"key in keyring {ring}"] = libc.syscall(keyctl, 10, ring, b"user", b"marft_planted", 0) >= 0
            out["request_key"] = libc.syscall(request_key, b"user", b"marft_planted", None, 0) >= 0
        print(json.dumps(out))
    """
}
KEYRING_SYSCALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}
"""``add_key``, ``request_key``, ``keyctl`` (the C library has no wrappers for them)."""
CLONE_SYSCALLS = {"x86_64": (56, 435), "aarch64": (220, 435)}
"""``clone``, ``clone3``."""


REPO = Path(__file__).resolve().parents[2]
HOST_PATHS = sorted(
    {
        sysconfig.get_paths()["purelib"],
        os.path.join(sysconfig.get_paths(vars={"base": sys.base_prefix})["stdlib"], "site-packages"),
        str(REPO),
        str(REPO / "marft_envs"),
        str(REPO / "marft_envs/tasks/code/data/corpus_tasks.jsonl"),
        os.path.expanduser("~"),
        "/home",
        "/root",
        "/etc/passwd",
        "/etc/hostname",
        "/usr/bin",
        "/var",
        "/run",
        os.path.dirname(sys.executable),
        os.path.realpath(sys.executable),
    }
)
"""Host paths a contained run must not see (site-packages, this checkout, task data, home, system files)."""


def _program(source: str, **values) -> str:
    constants = "".join(f"{k} = {v!r}\n" for k, v in values.items())
    return constants + textwrap.dedent(source)


def _timed_run(pool, source):
    started = time.monotonic()
    result = pool.run(source, limits=LIMITS)
    return result, time.monotonic() - started


@pytest.fixture(scope="module")
def bait(tmp_path_factory):
    """Things the programs must not be able to touch: files, listening ports, a bystander process."""
    here = Path(__file__).parent
    victim_dir = here / f".victims-{os.getpid()}"
    victim_dir.mkdir()
    os.chmod(victim_dir, 0o777)  # world-writable: only the read-only mounts protect it
    (victim_dir / "victim.txt").write_text("precious")
    os.chmod(victim_dir / "victim.txt", 0o666)
    (victim_dir / "root_only.txt").write_text("precious")
    project_file = here / f".project-file-{os.getpid()}.txt"
    project_file.write_text("precious")
    listeners = []
    for host in ("127.0.0.1", "0.0.0.0"):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        s.listen(8)
        s.setblocking(False)
        listeners.append(s)
    targets = [("127.0.0.1", listeners[0].getsockname()[1]), ("127.0.0.1", listeners[1].getsockname()[1])]
    external = _external_ip()
    if external:
        targets.append((external, listeners[1].getsockname()[1]))
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield {
        "victim_dir": str(victim_dir),
        "project_file": str(project_file),
        "listeners": listeners,
        "targets": targets,
        "bystander": bystander,
    }
    bystander.kill()
    bystander.wait()
    for s in listeners:
        s.close()
    shutil.rmtree(victim_dir, ignore_errors=True)
    project_file.unlink(missing_ok=True)


def _external_ip() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # picks the outgoing address; sends nothing
            ip = s.getsockname()[0]
        return None if ip.startswith("127.") else ip
    except OSError:
        return None


@pytest.fixture(scope="module")
def outcomes(contained_pool, bait):
    """Run every hostile program (two at a time), then the second wave; record the host's state."""
    pool = contained_pool
    pool.run("pass")  # start both workers, so their pids can be handed to kill_the_parent
    pool.map([{"source": "pass"}, {"source": "pass"}])
    workers = [w.proc.pid for w in pool._all]
    machine = os.uname().machine
    values = {
        "VICTIM_DIR": bait["victim_dir"],
        "PROJECT_FILE": bait["project_file"],
        "TARGETS": bait["targets"],
        "BYSTANDER": bait["bystander"].pid,
        "WORKERS": workers,
        "HOST_PATHS": HOST_PATHS,
        "KEYS": KEYRING_SYSCALLS.get(machine),
        "CLONE": CLONE_SYSCALLS.get(machine),
    }
    disk_before = shutil.disk_usage("/").free
    sources = {name: _program(src, **values) for name, src in PROGRAMS.items()}
    with ThreadPoolExecutor(max_workers=pool.size) as ex:
        results = dict(zip(sources, ex.map(lambda s: _timed_run(pool, s), sources.values())))
        second = {name: _program(src, **values) for name, src in SECOND_WAVE.items()}
        results.update(zip(second, ex.map(lambda s: _timed_run(pool, s), second.values())))
    accepted = []
    for s in bait["listeners"]:
        try:
            accepted.append(s.accept())
        except BlockingIOError:
            pass
    return {
        "results": results,
        "workers": workers,
        "accepted": accepted,
        "disk_freed_mb": (shutil.disk_usage("/").free - disk_before) / 2**20,
        "pool": pool,
    }


def _json(result):
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", [*PROGRAMS, *SECOND_WAVE])
def test_every_run_ends_within_its_timeout_plus_2s(outcomes, name):
    result, elapsed = outcomes["results"][name]
    assert elapsed <= TIMEOUT_S + SLACK_S, f"{name} took {elapsed:.2f}s: {result}"
    assert result.duration_s <= TIMEOUT_S + SLACK_S


@pytest.mark.parametrize("name", ["infinite_loop", "ignores_sigterm", "fork_bomb"])
def test_runaway_programs_are_killed_at_the_deadline(outcomes, name):
    result, elapsed = outcomes["results"][name]
    assert result.timed_out and result.killed_by == "timeout" and result.returncode is None
    assert elapsed >= TIMEOUT_S * 0.9


def test_memory_hogs_hit_the_memory_limit(outcomes):
    result, _ = outcomes["results"]["memory_hog"]
    assert result.killed_by == "memory" and "MemoryError" in result.stderr
    result, _ = outcomes["results"]["memory_hog_in_many_processes"]
    assert result.killed_by in ("memory", "timeout"), result


def test_endless_output_is_cut_off(outcomes):
    result, elapsed = outcomes["results"]["endless_output"]
    assert result.killed_by == "output_limit" and result.stdout_truncated
    assert len(result.stdout) <= LIMITS.max_output_bytes and elapsed < TIMEOUT_S


def test_disk_fill_is_bounded_and_stays_inside(outcomes, bait):
    result, _ = outcomes["results"]["disk_fill"]
    out = _json(result)
    assert out["one_big_file"] == "EFBIG"  # RLIMIT_FSIZE
    assert out["many_files"] == "ENOSPC"  # the private tmpfs is full
    assert "WROTE" not in out.values(), out
    # An escaped writer fills the host disk until ENOSPC (gigabytes within the timeout); other processes
    # on a shared machine move its free space by tens of MB, so the bound is generous, not the tmpfs size.
    assert outcomes["disk_freed_mb"] > -HOST_DISK_NOISE_MB, "the host disk lost space"
    assert sorted(os.listdir(bait["victim_dir"])) == ["root_only.txt", "victim.txt"]


def test_files_outside_the_working_directory_are_untouched(outcomes, bait):
    result, _ = outcomes["results"]["delete_and_overwrite_outside"]
    out = _json(result)
    assert "DONE" not in out.values(), out
    victim = Path(bait["victim_dir"])
    assert sorted(os.listdir(victim)) == ["root_only.txt", "victim.txt"]
    assert (victim / "victim.txt").read_text() == "precious" and (victim / "root_only.txt").read_text() == "precious"
    assert stat.S_IMODE(os.stat(victim / "victim.txt").st_mode) == 0o666
    assert Path(bait["project_file"]).read_text() == "precious"


def test_host_ports_are_unreachable(outcomes):
    result, _ = outcomes["results"]["connect_to_host_ports"]
    out = _json(result)
    assert out and "CONNECTED" not in out.values() and "SENT" not in out.values(), out
    assert outcomes["accepted"] == []


def test_files_planted_in_tmp_do_not_reach_a_later_run(outcomes):
    planted = _json(outcomes["results"]["plant_files_for_a_later_run"][0])
    assert planted["/tmp/marft_planted"] == "PLANTED"  # it could write its private /tmp ...
    seen = _json(outcomes["results"]["read_planted_files"][0])
    assert seen["/tmp"] == ["work"] and seen["/dev/shm"] == [] and seen["cwd"] == ["main.py"]
    assert not any(v for k, v in seen.items() if k not in ("/tmp", "/dev/shm", "cwd")), seen  # ... for nobody
    for path in ("/tmp/marft_planted", "/dev/shm/marft_planted", "/var/tmp/marft_planted", "/dev/shm/marft_planted_shm"):
        assert not os.path.exists(path), f"{path} reached the host"
    ipcs = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout if shutil.which("ipcs") else ""
    assert "0x4d415246" not in ipcs.lower()


def _needs_the_syscall_filter(outcomes):
    isolation = outcomes["pool"].isolation
    if not isolation.syscall_filter:
        pytest.skip(f"no syscall filter on this machine (keyrings and namespaces are not blocked):\n{isolation.describe()}")


def test_kernel_objects_of_a_run_do_not_reach_a_later_run(outcomes):
    _needs_the_syscall_filter(outcomes)
    planted = _json(outcomes["results"]["plant_kernel_objects"][0])
    keyrings = {k: v for k, v in planted.items() if "keyring" in k}
    assert all(v == "EPERM" for v in keyrings.values()), planted  # the syscall filter: no keyrings at all
    assert planted["sysv message queue"] == planted["posix message queue"] == "PLANTED"  # its own IPC namespace ...
    seen = _json(outcomes["results"]["read_planted_files"][0])
    assert not any(v for k, v in seen.items() if k not in ("/tmp", "/dev/shm", "cwd")), seen  # ... for nobody else
    ipcs = subprocess.run(["ipcs", "-q", "-s"], capture_output=True, text=True).stdout if shutil.which("ipcs") else ""
    assert "0x4d415247" not in ipcs.lower() and "0x4d415248" not in ipcs.lower()
    assert not os.path.exists("/dev/mqueue/marft_planted_mq")


def test_a_run_cannot_make_namespaces_or_mount(outcomes):
    _needs_the_syscall_filter(outcomes)
    out = _json(outcomes["results"]["new_namespaces_and_mounts"][0])
    assert out.pop("fork") == 7 and out.pop("thread") == "ran"  # ordinary processes and threads work
    assert "DONE" not in out.values(), out
    assert all(v == "EPERM" for k, v in out.items() if k != "clone3"), out
    if "clone3" in out:
        assert out["clone3"] == "ENOSYS"  # so that the C library falls back to clone


def test_a_run_sees_no_host_files_but_the_standard_library(outcomes):
    out = _json(outcomes["results"]["read_host_files"][0])
    visible = [path for path in HOST_PATHS if out[path]]
    assert visible == [], f"a sandboxed program can see {visible}"
    assert out["site-packages on sys.path"] == []
    assert out["import marft_envs"] == out["import numpy"] == out["import pytest"] == "ImportError"
    assert set(out["/"]) <= {"dev", "proc", "tmp", sys.base_prefix.strip("/").split("/")[0]}, out["/"]


def test_killing_the_parent_hurts_nobody(outcomes, bait):
    result, _ = outcomes["results"]["kill_the_parent"]
    bystander = bait["bystander"]
    assert bystander.poll() is None, "the host bystander process was killed"
    pool = outcomes["pool"]
    assert sorted(w.proc.pid for w in pool._all if w.alive) == sorted(outcomes["workers"])
    assert pool.run("print('still serving')").stdout == "still serving\n"


def test_daemons_die_with_the_run(outcomes):
    result, elapsed = outcomes["results"]["double_forked_daemon"]
    assert result.returncode == 0 and not result.timed_out and elapsed < TIMEOUT_S


def test_stdin_is_at_eof(outcomes):
    result, elapsed = outcomes["results"]["waits_on_stdin"]
    out = _json(result)
    assert out["input"] == "EOFError" and out["read"] == "" and out["tty"] != "OPENED", out
    assert not result.timed_out and elapsed < TIMEOUT_S


def test_runaway_recursion_is_contained(outcomes):
    result, _ = outcomes["results"]["runaway_recursion"]
    assert result.returncode == 1 and "RecursionError" in result.stderr
    result, _ = outcomes["results"]["runaway_recursion_unbounded"]
    assert not result.ok and result.killed_by is not None, result


def test_nothing_is_left_running(outcomes):
    # Killed processes take a moment to disappear from /proc on a loaded machine; never 2 s.
    deadline = time.monotonic() + 2.0
    while sandbox_processes(UID_BASE) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes(UID_BASE) == []
    for pid in outcomes["workers"]:
        assert descendants(pid) == [], f"sandbox worker {pid} still has processes below it"


PARENT_ENV_PROGRAM = """
import json, os
found = {"environ": [k for k, v in os.environ.items() if SECRET in v]}
for pid in [str(HOST_PID), "1", str(os.getppid()), "self", *[p for p in os.listdir("/proc") if p.isdigit()]]:
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                found[f"{pid}/{what}"] = SECRET.encode() in f.read()
        except OSError as e:
            found[f"{pid}/{what}"] = type(e).__name__
print(json.dumps(found))
"""


def test_the_parents_environment_is_unreadable(contained_pool, tmp_path):
    # The secret must be in the host's initial environment (/proc/<pid>/environ shows only that),
    # so a host process is started with it and runs the program through the sandbox itself.
    secret = f"marft-secret-{os.getpid()}-{time.time_ns()}"
    host = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from marft_envs.sandbox import run_python
source = "SECRET = %r\\nHOST_PID = %d\\n" % (os.environ["MARFT_TEST_SECRET"], os.getpid()) + {PARENT_ENV_PROGRAM!r}
result = run_python(source, timeout_s=5, memory_mb=256)
print(result.stdout, end="")
"""
    env = {**os.environ, "MARFT_TEST_SECRET": secret}
    proc = subprocess.run([sys.executable, "-c", host], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["environ"] == []
    assert True not in found.values(), {k: v for k, v in found.items() if v is True}


MEMORY_SCAN = r"""
import ctypes, json, re
found = set()
pattern = re.compile(("marft" + "-canary-").encode() + rb"[0-9a-f]{32}")
with open("/proc/self/maps") as maps:
    regions = [line.split() for line in maps]
for fields in regions:  # the heap and anonymous memory: where freed buffers of the worker would be
    if fields[1].startswith("rw") and (len(fields) == 5 or fields[5] == "[heap]"):
        start, end = (int(x, 16) for x in fields[0].split("-"))
        found.update(m.group().decode() for m in pattern.finditer(ctypes.string_at(start, end - start)))
print(json.dumps(sorted(found)))
"""


def test_an_earlier_runs_program_is_not_in_a_later_runs_memory(contained_pool):
    # A pool worker serves many runs, each a fork of it: what the worker once held (a task's
    # solution, sent to check a tester's asserts against it) must not be in the memory a later
    # run inherits. The scan itself works: it finds a canary in its own run's files.
    from marft_envs.sandbox import SandboxPool

    canary = f"marft-canary-{os.urandom(16).hex()}"
    own = f"marft-canary-{os.urandom(16).hex()}"
    with SandboxPool(workers=1) as pool:
        first = pool.run(f"SOLUTION = {canary!r}\nprint(len(SOLUTION))", files={"tests.txt": canary}, limits=LIMITS)
        assert first.ok, first
        later = pool.run(MEMORY_SCAN, files={"mine.txt": own}, limits=Limits(timeout_s=20, memory_mb=512))
        seen = json.loads(later.stdout)
        later_own = pool.run(
            "MINE = open('mine.txt').read()\n" + MEMORY_SCAN, files={"mine.txt": own}, limits=Limits(timeout_s=20, memory_mb=512)
        )
    assert own in json.loads(later_own.stdout), later_own  # the scan does find what its run holds
    assert canary not in seen, "a later run found an earlier run's program in its memory"
