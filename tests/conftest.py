import os
from pathlib import Path

import pytest

# Never reach for the Hub in tests: offline calls otherwise hang for tens of seconds.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture
def fixtures() -> Path:
    return Path(__file__).parent / "fixtures"


# -- Ray: one local cluster for the whole session (tests/agents/test_distributed*.py) ----------------------------
# Token auth would write ~/.ray/auth_token; the tests' clusters are local and short-lived.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

RAY_CPUS = 2
"""Logical CPUs of the session's cluster: two one-CPU workers."""


@pytest.fixture(scope="session")
def ray_cluster():
    """A Ray head started with ``ray start --head`` in a short temp dir; yields its address ("127.0.0.1:PORT").

    Ray's sockets live under its temp dir and must fit in 107 bytes, hence /tmp, not pytest's tmp_path.
    At the end, exactly this cluster's processes (those whose command line names its temp dir) are
    stopped and the dir removed; nothing may appear in ~/.ray or /tmp/ray.
    """
    import shutil
    import socket
    import subprocess
    import sys
    import tempfile

    pytest.importorskip("ray")
    before = {p: p.exists() for p in (Path.home() / ".ray", Path("/tmp/ray"))}
    temp = tempfile.mkdtemp(prefix="marft-ray-", dir="/tmp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    ray = str(Path(sys.executable).with_name("ray"))
    try:
        subprocess.run([ray, "start", "--head", "--temp-dir", temp, "--port", str(port), "--num-cpus", str(RAY_CPUS),
                        "--node-ip-address", "127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"],
                       env=env, check=True, capture_output=True, timeout=180)
        yield f"127.0.0.1:{port}"
    finally:
        import ray as ray_module

        ray_module.shutdown()
        _stop_processes_naming(temp)
        shutil.rmtree(temp, ignore_errors=True)
    appeared = [str(p) for p, existed in before.items() if p.exists() and not existed]
    assert not appeared, f"the Ray tests wrote {appeared}"


def _stop_processes_naming(text: str, wait_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, every process whose command line contains ``text`` (one cluster's temp dir)."""
    import signal
    import time

    def pids() -> list[int]:
        found = []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and text.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
        return found

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while pids() and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture
def ray_connected(ray_cluster):
    """This process connected to the session's cluster (a test may disconnect; the next one reconnects)."""
    import ray

    if not ray.is_initialized():
        ray.init(address=ray_cluster, log_to_driver=False, logging_level="warning")
    return ray_cluster
