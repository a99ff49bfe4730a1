"""A marft env behind an OpenEnv server: `openenv validate --url` passes on loopback, an episode plays over a WebSocket session."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.adapters
pytest.importorskip("openenv")

import uvicorn  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402

from marft_envs.adapters.openenv import FlexAction, FlexEnvironment, create_server_app  # noqa: E402
from marft_envs.registration import make  # noqa: E402


@contextlib.contextmanager
def running(app):
    """``app`` served on 127.0.0.1 (a free port) in a thread, as ``serve`` runs it; yields its URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws_max_size=app.state.max_request_bytes)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the OpenEnv server did not start"
        time.sleep(0.05)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    assert host == "127.0.0.1"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive()


@pytest.fixture(scope="module")
def server_url():
    """A MathChain server with the default limits, stopped after the module's tests."""
    with running(create_server_app("marft/MathChain-v0")) as url:
        yield url


@pytest.fixture(scope="module")
def tight_url():
    """A MathChain server of one session, closed after 1 s idle, taking requests of at most 4096 bytes."""
    with running(create_server_app("marft/MathChain-v0", 1, idle_timeout_s=1.0, max_request_bytes=4096)) as url:
        yield url


def test_openenv_validate_passes_on_the_running_server(server_url):
    cli = shutil.which("openenv", path=os.path.dirname(sys.executable))
    command = [cli] if cli else [sys.executable, "-m", "openenv.cli"]
    out = subprocess.run([*command, "validate", "--url", server_url], capture_output=True, text=True, timeout=120)
    report = json.loads(out.stdout[out.stdout.index("{") :])
    failed = [c["id"] for c in report["criteria"] if not c["passed"]]
    assert out.returncode == 0 and report["passed"] and not failed, (failed, out.stderr[-2000:])


def test_an_episode_plays_over_a_websocket_session(server_url):
    with GenericEnvClient(base_url=server_url).sync() as client:
        first = client.reset(seed=4).observation
        assert first["agent"] == "reasoner_0" and first["ready"] == ["reasoner_0"] and "Problem:" in first["text"]
        refused = client.step({"agent": "actor_0", "text": "\\boxed{1}"}).observation
        assert "may not act now" in refused["error"] and refused["agent"] == "reasoner_0"  # nothing changed
        middle = client.step({"agent": "reasoner_0", "text": "Add them up."})
        assert middle.observation["agent"] == "actor_0" and "Add them up." in middle.observation["text"]
        assert middle.reward == 0.0 and not middle.done and middle.observation["rewards"] == {}
        last = client.step({"agent": "actor_0", "text": "\\boxed{-1}"})
        assert last.done and set(last.observation["rewards"]) == {"reasoner_0", "actor_0"}
        assert last.observation["agent"] is None


def test_the_environment_pays_the_team_mean_and_refuses_a_finished_episode():
    env = FlexEnvironment(make("marft/MathChain-v0"))
    env.reset(seed=2)
    env.step(FlexAction(agent="reasoner_0", text="thinking"))
    answer = env.flex.problem.answer
    obs = env.step(FlexAction(agent="actor_0", text=f"\\boxed{{{answer}}}"))
    assert obs.done and obs.reward == 1.0 and obs.rewards == {"reasoner_0": 1.0, "actor_0": 1.0}
    assert env.state.step_count == 2 and env.state.agents == []
    again = env.step(FlexAction(agent="actor_0", text="more"))
    assert again.error.startswith("agent 'actor_0' may not act now; the episode is over")


def test_a_bad_env_id_fails_when_the_app_is_built():
    with pytest.raises(Exception, match="NoSuchEnv"):
        create_server_app("marft/NoSuchEnv-v0")


def post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.parametrize(
    "options, message", [("x", "options must be a dict"), ({"difficulty": 99}, "synthetic-v0 has levels [1, 2, 3, 4], not 99")]
)
def test_a_reset_the_env_refuses_is_a_422_with_its_one_line(server_url, options, message):
    status, answer = post(server_url + "/reset", json.dumps({"seed": 1, "options": options}).encode())
    assert status == 422 and message in answer["detail"] and "\n" not in answer["detail"]


def test_a_request_over_the_limit_is_a_413(tight_url, server_url):
    status, answer = post(tight_url + "/step", json.dumps({"action": {"agent": "reasoner_0", "text": "x" * 5000}}).encode())
    assert status == 413 and "at most 4096 bytes" in answer["detail"]
    status, _ = post(tight_url + "/step", json.dumps({"action": {"agent": "reasoner_0", "text": "x" * 100}}).encode())
    assert status == 200
    port = int(server_url.rsplit(":", 1)[1])
    declared = 6 * 2**20 + 64 * 1024 + 1  # over MathChain's 1 Mi-character actions, JSON-escaped: refused before a byte is sent
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(f"POST /step HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {declared}\r\n\r\n".encode())
        assert conn.recv(4096).startswith(b"HTTP/1.1 413")


def test_an_idle_session_is_closed_and_frees_its_place(tight_url):
    from websockets.sync.client import connect

    ws_url = tight_url.replace("http", "ws") + "/ws"
    with connect(ws_url) as idle:  # holds the server's only session, and sends nothing
        with connect(ws_url) as refused:
            assert "capacity" in refused.recv(timeout=30).lower()
        with pytest.raises(Exception, match="idle timeout"):
            idle.recv(timeout=60)  # the server closes it
    deadline = time.monotonic() + 30
    while True:  # the place it held is free again
        with connect(ws_url) as client:
            client.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            answer = json.loads(client.recv(timeout=30))
        if answer["type"] == "observation" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert answer["type"] == "observation"


def test_the_documented_close_message_ends_a_session_without_an_error(server_url):
    from websockets.sync.client import connect

    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append
    logging.getLogger("uvicorn.error").addHandler(handler)
    try:
        for _ in range(3):
            with connect(server_url.replace("http", "ws") + "/ws") as client:
                client.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                client.recv(timeout=30)
                client.send(json.dumps({"type": "close"}))
        with GenericEnvClient(base_url=server_url).sync() as client:  # the server still serves
            assert client.reset(seed=4).observation["agent"] == "reasoner_0"
        time.sleep(0.5)  # the server's side of the last close
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
    assert [r.getMessage() for r in errors] == []
