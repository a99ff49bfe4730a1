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
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

RAY_CPUS = 2
"""Logical CPUs of the session's cluster: two one-CPU workers."""


@pytest.fixture(scope="session")
def ray_cluster():
    """A Ray head started with ``ray start --head`` in a short temp dir; yields its address ("127.0.0.1:PORT").

    Ray's sockets live under its temp dir and must fit in 107 bytes, hence /tmp, not pytest's tmp_path.
    As a cluster marft starts (marft_agents/distributed/cluster.py): on loopback only
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps ``--node-ip-address 127.0.0.1`` from becoming the
    machine's interface address), token auth on, its token in a 0600 file in a 0700 folder of its own
    (``RAY_AUTH_TOKEN_PATH``, set in this process too for the tests' drivers). At the end, exactly this
    cluster's processes (those whose command line names its temp dir) are stopped and the dir removed;
    nothing may appear in ~/.ray or /tmp/ray.
    """
    import secrets
    import shutil
    import subprocess
    import sys
    import tempfile

    pytest.importorskip("ray")
    before = {p: p.exists() for p in (Path.home() / ".ray", Path("/tmp/ray"))}
    temp = tempfile.mkdtemp(prefix="marft-ray-", dir="/tmp")
    port, client_port = _free_ports(2)
    token_dir = tempfile.mkdtemp(prefix="marft-ray-auth-", dir="/tmp")  # 0700: Ray makes its temp dir 0777
    token = Path(token_dir) / "auth_token"
    token.touch(mode=0o600)
    token.write_text(secrets.token_hex(32))
    os.environ.pop("RAY_AUTH_TOKEN", None)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    from marft_agents.distributed.cluster import WORKER_NICENESS, reset_auth_state

    reset_auth_state()  # Ray read the token settings when it was imported
    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_worker_niceness": str(WORKER_NICENESS),  # as marft's own clusters: Ray's nice 15 starves on a busy machine
    }
    ray = str(Path(sys.executable).with_name("ray"))
    try:
        subprocess.run(
            [
                ray,
                "start",
                "--head",
                "--temp-dir",
                temp,
                "--port",
                str(port),
                "--ray-client-server-port",  # not the fixed 10001 another cluster may hold
                str(client_port),
                "--num-cpus",
                str(RAY_CPUS),
                "--node-ip-address",
                "127.0.0.1",
                "--include-dashboard=false",
                "--disable-usage-stats",
            ],
            env=env,
            check=True,
            capture_output=True,
            timeout=180,
        )
        yield f"127.0.0.1:{port}"
    finally:
        import ray as ray_module

        ray_module.shutdown()
        for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH"):
            os.environ.pop(name, None)
        # the Ray client server's command line names the cluster's address, not its temp dir
        names = (temp, f"--address=127.0.0.1:{port}")
        for text in names:
            _stop_processes_naming(text)
        shutil.rmtree(temp, ignore_errors=True)
        shutil.rmtree(token_dir, ignore_errors=True)
    appeared = [str(p) for p, existed in before.items() if p.exists() and not existed]
    assert not appeared, f"the Ray tests wrote {appeared}"
    outlived = [pid for text in names for pid in _pids_naming(text)]
    assert not outlived, f"processes of the session's Ray cluster outlived it: {outlived}"


def _free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports free right now (all held open until every one is chosen)."""
    import socket

    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _pids_naming(text: str) -> list[int]:
    """Every process whose command line contains ``text``, and their descendants.

    Ray's agents rename themselves ("ray::DashboardAgent"), so only their parent's command line names the cluster.
    """
    named, parent = set(), {}
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit():
                continue
            parent[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if text.encode() in (proc / "cmdline").read_bytes():
                named.add(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue

    def descends(pid: int) -> bool:
        seen = set()
        while pid in parent and pid not in seen and pid > 1:
            if pid in named:
                return True
            seen.add(pid)
            pid = parent[pid]
        return False

    return [pid for pid in parent if descends(pid)]


def _stop_processes_naming(text: str, wait_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, every process :func:`_pids_naming` finds (one cluster's)."""
    import signal
    import time

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _pids_naming(text):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while _pids_naming(text) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture
def ray_connected(ray_cluster):
    """This process connected to the session's cluster (a test may disconnect; the next one reconnects)."""
    import ray

    from marft_agents.distributed.cluster import connect
    from marft_agents.distributed.config import DistributedConfig

    if not ray.is_initialized():
        connect(DistributedConfig(address=ray_cluster))  # as a run joins it: on loopback
    return ray_cluster
