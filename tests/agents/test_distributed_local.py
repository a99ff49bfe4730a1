"""The local Ray cluster a run starts (``distributed.address`` empty) is on loopback only, with token auth.

One subprocess (this test session is already connected to the session's cluster) starts a cluster
as a run does (:func:`marft_agents.distributed.cluster.connect`), runs a task on it so a worker
process exists, and reports every inet socket of the driver and the cluster's processes, the token
file, and what Ray's GCS answers a call without a token; then it shuts the cluster down. Nothing in
it sends traffic anywhere but 127.0.0.1. Its environment holds a fake ``HF_TOKEN``: a worker started
as the pool starts one sees it (inherited from the raylet), and no file of the cluster holds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hf_marftTestTokenThatMustNotReachADisk0123"

PROBE = r"""
import json, os, stat, sys
import grpc, psutil, ray
from marft_agents.distributed.cluster import AUTH_VARS, connect, disconnect
from marft_agents.distributed.config import DistributedConfig
from marft_agents.distributed.environment import worker_env_vars

env_before = {k: os.environ.get(k) for k in AUTH_VARS}
connection = connect(DistributedConfig(workers=1), cpus=1)
token_path = os.environ["RAY_AUTH_TOKEN_PATH"]
out = {"mode": os.environ["RAY_AUTH_MODE"], "token_path": token_path,
       "token_mode": oct(stat.S_IMODE(os.stat(token_path).st_mode)),
       "token_dir_mode": oct(stat.S_IMODE(os.stat(os.path.dirname(token_path)).st_mode))}

@ray.remote
def pid():
    return os.getpid(), os.nice(0), os.environ.get("HF_TOKEN"), os.environ.get("HF_HUB_OFFLINE")

# a worker process, with its own gRPC server, started with the runtime_env a WorkerPool gives its workers
call = pid.options(runtime_env={"env_vars": worker_env_vars(os.environ)}).remote()
worker, out["worker_niceness"], out["worker_token"], out["worker_offline"] = ray.get(call)
folder = os.path.dirname(token_path)
temp = ray._private.worker._global_node.get_temp_dir_path()
out["folder_mode"] = oct(stat.S_IMODE(os.stat(folder).st_mode))
out["temp_in_folder"] = temp.startswith(folder + "/")
holding = []
for root, dirs, files in os.walk(folder):
    for name in files:
        try:
            with open(os.path.join(root, name), "rb") as f:
                if os.environ["HF_TOKEN"].encode() in f.read():
                    holding.append(name)
        except OSError:  # sockets
            pass
out["files_with_token"] = holding
out["runtime_env_logs"] = sum("runtime_env" in n for _, _, files in os.walk(folder) for n in files)
gcs = ray.get_runtime_context().gcs_address
out["gcs"] = gcs
out["nodes"] = [n["NodeManagerAddress"] for n in ray.nodes()]
procs = {p.pid: p for p in psutil.Process().children(recursive=True)}
procs[os.getpid()] = psutil.Process()
out["worker_seen"] = worker in procs
from marft_agents.distributed.session import marked_pids
marked = marked_pids(folder)  # what the next local cluster would end, were this run killed
out["marked"] = {"worker": worker in marked, "only_ours": set(marked) <= set(procs), "n": len(marked)}
sockets = []
for p in procs.values():
    try:
        for c in p.net_connections(kind="inet"):
            sockets.append([p.name(), c.status, c.laddr.ip, c.raddr.ip if c.raddr else None])
    except psutil.Error:
        pass
out["sockets"] = sockets
call = grpc.insecure_channel(gcs).unary_unary("/ray.rpc.NodeInfoGcsService/GetAllNodeInfo")
try:
    call(b"", timeout=30)
    out["without_token"] = "OK"
except grpc.RpcError as err:
    out["without_token"] = err.code().name
disconnect(connection)
out["token_removed"] = not os.path.exists(token_path)
out["env_restored"] = {k: os.environ.get(k) for k in AUTH_VARS} == env_before
print("PROBE " + json.dumps(out))
"""


def is_loopback(ip: str | None) -> bool:
    return ip is None or ip in ("127.0.0.1", "::1", "::ffff:127.0.0.1")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    tmp = tempfile.mkdtemp(prefix="mt-", dir="/tmp")  # short: Ray's sockets go under it
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}
    env.update(
        HOME=str(home),
        TMPDIR=tmp,
        RAY_AUTH_MODE="disabled",  # the user's choice is not the cluster's
        HF_TOKEN=SECRET,
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    )
    try:
        done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, check=False)
        left = os.listdir(tmp)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE "))
    return {**json.loads(line[len("PROBE ") :]), "home": home, "tmp": tmp, "left": left}


def test_every_socket_of_a_local_cluster_is_on_loopback(probe):
    assert probe["worker_seen"] and len(probe["sockets"]) > 5
    listening = [s for s in probe["sockets"] if s[1] == "LISTEN"]
    assert {s[0] for s in listening} >= {"gcs_server", "raylet"}, listening
    assert [s for s in probe["sockets"] if not (is_loopback(s[2]) and is_loopback(s[3]))] == []
    assert probe["gcs"].startswith("127.0.0.1:") and set(probe["nodes"]) == {"127.0.0.1"}


def test_a_local_cluster_keeps_token_auth_on_with_a_private_token_file(probe):
    assert probe["mode"] == "token" and probe["without_token"] == "UNAUTHENTICATED"
    assert probe["token_mode"] == "0o600" and probe["token_dir_mode"] == "0o700"
    assert probe["token_path"].startswith(probe["tmp"] + "/marft-ray-")  # under TMPDIR, not in ~/.ray
    assert probe["token_removed"] and probe["env_restored"] and probe["left"] == []
    assert list(probe["home"].iterdir()) == []  # ~/.ray neither read into being nor written


def test_a_local_clusters_workers_run_at_the_runs_priority(probe):
    # Ray's default nice 15 left a worker ~4 % of a core beside two busy processes
    assert probe["worker_niceness"] == os.nice(0)


def test_a_local_clusters_folders_are_private_and_hold_no_secret(probe):
    # Ray makes its temp folder 0777 (again at each worker's start): the 0700 folder around it keeps others out
    assert probe["folder_mode"] == "0o700" and probe["temp_in_folder"]
    assert probe["worker_token"] == SECRET and probe["worker_offline"] == "1"  # inherited, and handed on
    assert probe["runtime_env_logs"] > 0 and probe["files_with_token"] == []  # Ray logged the runtime_env, without it


def test_every_process_of_a_local_cluster_carries_its_folders_marker(probe):
    # by it the next local cluster finds and ends what a killed run left (marft_agents/distributed/session.py)
    assert probe["marked"]["worker"] and probe["marked"]["only_ours"] and probe["marked"]["n"] >= 5
