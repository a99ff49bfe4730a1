"""The OpenEnv server's round-3 leftovers (issue 51, case 3), on 127.0.0.1 only, bounded in requests and time.

- A request holding a non-finite number (``{"seed": 1e400}``: JSON reads it as infinity) is a 422 saying
  what is wrong, where FastAPI's answer failed to encode and the server answered 500 with a traceback.
- Sessions opened over HTTP (``POST /mcp``, ``openenv/session/create``) and then left idle are reaped
  after ``--idle-timeout``, so eight of them no longer keep a ninth client out for ever; a WebSocket
  session that is in use (asking only for ``state``) is not reaped from under its client.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.adapters
pytest.importorskip("openenv")

from test_openenv import running  # noqa: E402  (the server on 127.0.0.1 in a thread, as serve runs it)
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from marft_envs.adapters.openenv import create_server_app  # noqa: E402


@contextlib.contextmanager
def logged_errors():
    """The ERROR records uvicorn logs meanwhile (a traceback of the app is one)."""
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append
    logging.getLogger("uvicorn.error").addHandler(handler)
    try:
        yield errors
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)


def post(url: str, body: bytes) -> tuple[int, object]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


NON_FINITE = [
    ("/reset", b'{"seed": 1e400}', "'body', 'seed'", "finite"),
    ("/reset", b'{"seed": -1e400}', "'body', 'seed'", "finite"),
    ("/reset", b'{"seed": NaN}', "'body', 'seed'", "finite"),
    ("/reset", b'{"seed": 1, "episode_id": 1e400}', "'episode_id'", "valid string"),
    ("/step", b'{"action": {"agent": "reasoner_0", "text": 1e400}}', "'text'", "valid string"),
]


def test_a_non_finite_number_is_a_422_saying_what_is_wrong_not_a_500():
    with running(create_server_app("marft/MathChain-v0", 1, idle_timeout_s=30.0)) as url, logged_errors() as errors:
        for path, body, where, what in NON_FINITE:
            status, answer = post(url + path, body)
            assert status == 422, (path, body, status, answer)
            (problem,) = answer["detail"]
            assert where in str(tuple(problem["loc"])) and what in problem["msg"], problem
            assert problem["input"] in ("inf", "-inf", "nan"), problem  # quoted as text: JSON has no infinity
        status, answer = post(url + "/reset", b'{"seed": 1, "options": {"difficulty": 1e400}}')
        assert status == 422 and answer["detail"] == "synthetic-v0 has levels [1, 2, 3, 4], not inf"  # the env's one line
        status, _ = post(url + "/reset", b'{"seed": 1}')  # the server still serves
        assert status == 200
        time.sleep(0.2)
    assert [r.getMessage() for r in errors] == []


def create_http_session(url: str, k: int) -> dict:
    status, answer = post(url + "/mcp", json.dumps({"jsonrpc": "2.0", "id": k, "method": "openenv/session/create", "params": {}}).encode())
    assert status == 200
    return answer


def reset_over_websocket(url: str) -> dict:
    """The server's first answer to a WebSocket client that resets (a refused one is closed at once, maybe before it sends)."""
    with connect(url.replace("http", "ws") + "/ws") as client:
        with contextlib.suppress(ConnectionClosed):
            client.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        return json.loads(client.recv(timeout=30))


def test_idle_sessions_opened_over_http_are_reaped_so_a_ninth_client_gets_in():
    with running(create_server_app("marft/MathChain-v0", 8, idle_timeout_s=1.0)) as url:
        for k in range(8):
            assert "session_id" in create_http_session(url, k)["result"]
        assert "capacity" in create_http_session(url, 8)["error"]["message"]
        assert reset_over_websocket(url)["data"]["code"] == "CAPACITY_REACHED"  # the eight hold every place
        start = time.monotonic()
        while (answer := reset_over_websocket(url))["type"] != "observation":  # reaped within max(1 / 4, 5) s of idling 1 s
            assert time.monotonic() - start < 30, answer
            time.sleep(0.5)
        assert answer["data"]["observation"]["agent"] == "reasoner_0"


def test_a_websocket_session_in_use_is_not_reaped_from_under_its_client():
    with running(create_server_app("marft/MathChain-v0", 1, idle_timeout_s=1.0)) as url:
        with connect(url.replace("http", "ws") + "/ws") as client:
            client.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(client.recv(timeout=30))["type"] == "observation"
            for _ in range(14):  # 7 s of asking for state only: past the timeout and a pass of the reaper (every 5 s)
                client.send(json.dumps({"type": "state"}))
                assert json.loads(client.recv(timeout=30))["type"] == "state"
                time.sleep(0.5)
            assert reset_over_websocket(url)["data"]["code"] == "CAPACITY_REACHED"  # it still holds the only place
            client.send(json.dumps({"type": "step", "data": {"agent": "reasoner_0", "text": "Add them up."}}))
            answer = json.loads(client.recv(timeout=30))
            assert answer["type"] == "observation" and answer["data"]["observation"]["agent"] == "actor_0"
