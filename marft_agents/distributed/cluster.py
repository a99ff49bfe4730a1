"""Joining a Ray cluster, or starting a private local one for a run (``distributed.address`` empty).

A local cluster that marft starts is for the user who runs it, on this machine only:

- **Loopback only.** The node's address is 127.0.0.1, so GCS, the raylet, Ray's agents and every
  worker listen on loopback alone (Ray binds its gRPC servers to loopback when the node's address is
  127.0.0.1). Ray turns a ``_node_ip_address`` of 127.0.0.1 into the machine's interface address
  unless ``ray_constants.ENABLE_RAY_CLUSTER`` is off (its macOS and Windows default, where
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` names it), so it is off while the node starts, and only then;
  likewise while a driver joins a head at a loopback address (``distributed.address=127.0.0.1:PORT``).
- **Token authentication stays on.** A fresh random token (256 bits) in a file only its owner can
  read (0600, in the cluster's 0700 session folder), handed to Ray through ``RAY_AUTH_MODE=token`` and
  ``RAY_AUTH_TOKEN_PATH`` (Ray 2.60 reads a token from ``RAY_AUTH_TOKEN``, then that path, then
  ``~/.ray/auth_token``); the cluster's processes inherit them. ``~/.ray`` is never read or written,
  and the folder goes when the run ends.
- **Private folders.** Ray's temp folder (sockets, logs) is inside that 0700 session folder, unless
  ``distributed.temp_dir`` names another: Ray makes its temp folder and every folder in it 0777 again
  each time one of its processes starts, so only a private folder around it keeps others out. A run
  killed with SIGKILL leaves its cluster's processes and folder behind; a watcher process started
  with the cluster ends and removes them within seconds (and the next local cluster would, first:
  :mod:`marft_agents.distributed.session`).
- **Workers at the run's priority** (:data:`WORKER_NICENESS`), not Ray's nice 15: on a busy machine
  the workers would starve beside any other process.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
from dataclasses import dataclass, field

from marft_agents.distributed import ClusterError
from marft_agents.distributed.config import DistributedConfig
from marft_agents.distributed.session import MARKER, end_leftovers, make_session_folder, session_base, start_watcher

AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""The environment variables Ray 2.60 reads its token settings from (set while a local cluster lives)."""
SET_VARS = (*AUTH_VARS, MARKER)
"""The variables a local cluster sets in this process (its processes inherit them), put back at the end."""
LOOPBACK = "127.0.0.1"
WORKER_NICENESS = 0
"""The rollout workers' nice value. Ray's default is 15 (``worker_niceness`` in Ray's
``src/ray/common/ray_config_def.h``, to keep CPU for GCS and the raylet); here the workers do the
run's generation, and at nice 15 beside ordinary (nice 0) processes a worker got about 4 % of a core."""


@dataclass
class Connection:
    """What :func:`connect` did, for :func:`disconnect` to undo."""

    started: bool = False
    """This process called ``ray.init`` (joined or started a cluster), so it shuts Ray down at the end."""
    folders: list[str] = field(default_factory=list)
    """Folders to remove at the end (the session folder with the token and, by default, Ray's temp folder)."""
    saved_env: dict[str, str | None] = field(default_factory=dict)
    """The values :data:`SET_VARS` had before the local cluster (None: unset), put back at the end."""


def connect(settings: DistributedConfig, cpus: int | None = None) -> Connection:
    """Join ``settings.address``, or start a private local cluster of ``cpus`` CPUs (default: this machine's).

    A process already connected to Ray (a test's cluster, a notebook's ``ray.init``) keeps its cluster.
    """
    import ray

    if ray.is_initialized():
        return Connection()
    if settings.address:
        _check_reachable(settings.address)
        host = settings.address.rpartition(":")[0]
        try:  # Ray would turn a loopback address into the interface address, where a loopback head is not
            with _loopback_node() if host in ("127.0.0.1", "localhost") else contextlib.nullcontext():
                ray.init(address=settings.address, log_to_driver=False, logging_level="warning")
        except Exception as err:  # Ray raises many kinds; the user needs one line
            raise ClusterError(f"cannot join the Ray cluster at {settings.address}: {first_line(err)}") from None
        return Connection(started=True)
    base = session_base()  # short: Ray's sockets live under it
    end_leftovers(base)  # the processes and folders of local clusters whose run was killed
    connection = Connection(started=True)
    folder = make_session_folder(base)  # 0700: Ray makes its own folders 0777
    connection.folders.append(folder)
    temp_dir = settings.temp_dir or os.path.join(folder, "ray")
    token_path = os.path.join(folder, "auth_token")
    fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    connection.saved_env = {name: os.environ.get(name) for name in SET_VARS}
    os.environ.pop("RAY_AUTH_TOKEN", None)  # it would win over the file
    os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token_path, MARKER: folder})
    reset_auth_state()
    try:
        with _loopback_node():
            ray.init(
                num_cpus=cpus or os.cpu_count() or 1,
                include_dashboard=False,
                _node_ip_address=LOOPBACK,
                _temp_dir=os.path.abspath(temp_dir),
                log_to_driver=False,
                logging_level="warning",
                _system_config={"worker_niceness": WORKER_NICENESS},
            )
    except Exception as err:
        disconnect(connection)
        raise ClusterError(f"cannot start a local Ray cluster in {temp_dir}: {first_line(err)}") from None
    start_watcher(folder)  # a run killed with SIGKILL: its cluster ends within seconds, not at the next run
    return connection


def disconnect(connection: Connection) -> None:
    """Leave (or shut down) the cluster :func:`connect` reached, put the environment back, remove its folders."""
    import ray

    if connection.started:
        ray.shutdown()
        connection.started = False
    if connection.saved_env:
        for name, value in connection.saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        connection.saved_env = {}
        reset_auth_state()  # before the token file goes (Ray's own order, ray._private.authentication_test_utils)
    for folder in connection.folders:
        shutil.rmtree(folder, ignore_errors=True)
    connection.folders = []


class _loopback_node:
    """``ray_constants.ENABLE_RAY_CLUSTER`` off inside the block: a 127.0.0.1 node address stays 127.0.0.1."""

    def __enter__(self):
        from ray._private import ray_constants

        self.saved = ray_constants.ENABLE_RAY_CLUSTER
        ray_constants.ENABLE_RAY_CLUSTER = False

    def __exit__(self, *exc):
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = self.saved


def reset_auth_state() -> None:
    """Make this process read the token settings again (Ray caches the mode and the token)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _check_reachable(address: str) -> None:
    """Fail in seconds on an address nothing listens at (``ray.init`` would retry for minutes)."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except (OSError, ValueError) as err:
        raise ClusterError(
            f"no Ray cluster at distributed.address={address} ({first_line(err)}): start one with "
            "`ray start --head --port PORT` or fix the address"
        ) from None


def first_line(err: BaseException) -> str:
    """The first non-blank line of an error's message (Ray's carry tracebacks)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
