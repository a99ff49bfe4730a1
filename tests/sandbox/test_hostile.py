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
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from marft_envs.sandbox import Limits
from marft_envs.sandbox.isolation import UID_BASE

from sandbox_checks import descendants, sandbox_processes

TIMEOUT_S = 1.5
LIMITS = Limits(timeout_s=TIMEOUT_S, memory_mb=256, max_processes=32, tmpfs_mb=32, max_file_mb=8,
                max_output_bytes=256 << 10)
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
        print(json.dumps(out))
    """,
}


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
    yield {"victim_dir": str(victim_dir), "project_file": str(project_file), "listeners": listeners,
           "targets": targets, "bystander": bystander}
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
    values = {"VICTIM_DIR": bait["victim_dir"], "PROJECT_FILE": bait["project_file"], "TARGETS": bait["targets"],
              "BYSTANDER": bait["bystander"].pid, "WORKERS": workers}
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
    return {"results": results, "workers": workers, "accepted": accepted,
            "disk_freed_mb": (shutil.disk_usage("/").free - disk_before) / 2**20, "pool": pool}


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
    assert outcomes["disk_freed_mb"] > -LIMITS.tmpfs_mb, "the host disk lost space"
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
