"""The OpenEnv server's limits as plain ASGI (no web framework): bodies over the limit get 413 unread, idle sessions close.

These run without openenv; tests/adapters/test_openenv.py checks the same limits on a running server.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from marft_envs.adapters.server_limits import IDLE_CLOSE, TOO_BIG_CLOSE, Limits

LIMIT = 100


class App:
    """An ASGI app that records what it was given: the whole body (HTTP), or the messages until the client left (WebSocket)."""

    def __init__(self):
        self.calls = 0
        self.body = b""
        self.messages: list[dict] = []

    async def __call__(self, scope, receive, send):
        self.calls += 1
        if scope["type"] == "http":
            more = True
            while more:
                message = await receive()
                self.body += message.get("body", b"")
                more = message.get("more_body", False)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        while True:  # a WebSocket handler: until the client leaves, then its own close (as OpenEnv's does)
            message = await receive()
            self.messages.append(message)
            if message["type"] == "websocket.disconnect":
                break
        await send({"type": "websocket.close", "code": 1000})


def run(scope: dict, incoming: list[dict], *, idle_timeout_s: float = 30.0, send_error: type[BaseException] | None = None):
    """Serve one connection: ``incoming`` messages, then a client that waits for ever; returns (app, sent, read)."""
    app, sent, read = App(), [], []

    async def receive():
        if len(read) < len(incoming):
            read.append(incoming[len(read)])
            return read[-1]
        await asyncio.Event().wait()  # a client that sends nothing more

    async def send(message):
        if send_error is not None and message["type"] == "websocket.close":
            raise send_error("the client hung up")
        sent.append(message)

    async def main():
        await asyncio.wait_for(Limits(app, max_body_bytes=LIMIT, idle_timeout_s=idle_timeout_s)(scope, receive, send), 60)

    asyncio.run(main())
    return app, sent, read


def http(length: int | None) -> dict:
    headers = [(b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http", "method": "POST", "path": "/step", "headers": headers}


def chunk(n: int, more: bool) -> dict:
    return {"type": "http.request", "body": b"x" * n, "more_body": more}


def status_and_detail(sent: list[dict]) -> tuple[int, str]:
    return sent[0]["status"], json.loads(sent[1]["body"])["detail"]


def test_a_declared_body_over_the_limit_is_answered_413_without_reading_it():
    app, sent, read = run(http(LIMIT + 1), [chunk(LIMIT + 1, False)])
    status, detail = status_and_detail(sent)
    assert status == 413 and "the body is 101 bytes" in detail and "at most 100 bytes" in detail
    assert app.calls == 0 and read == []  # not one byte read


def test_a_chunked_body_is_refused_once_what_arrived_passes_the_limit():
    app, sent, read = run(http(None), [chunk(60, True), chunk(60, True), chunk(60, False)])
    assert status_and_detail(sent)[0] == 413 and app.calls == 0
    assert len(read) == 2  # the third chunk is never read


def test_a_body_within_the_limit_reaches_the_app_whole():
    app, sent, _ = run(http(None), [chunk(40, True), chunk(60, False)])
    assert app.calls == 1 and app.body == b"x" * 100 and sent[0]["status"] == 200


@pytest.mark.parametrize("length", [b"12x", b"-1", b""])
def test_a_content_length_that_is_not_a_number_is_answered_400(length):
    scope = {"type": "http", "headers": [(b"content-length", length)]}
    app, sent, _ = run(scope, [chunk(1, False)])
    assert status_and_detail(sent)[0] == 400 and app.calls == 0


WS = {"type": "websocket", "path": "/ws", "headers": []}
CONNECT = {"type": "websocket.connect"}


def test_a_websocket_session_that_sends_nothing_is_closed_and_its_handler_ends():
    app, sent, _ = run(WS, [CONNECT, {"type": "websocket.receive", "text": "{}"}], idle_timeout_s=0.05)
    assert app.messages[-1] == {"type": "websocket.disconnect", "code": IDLE_CLOSE}  # the handler saw the client leave
    closes = [m for m in sent if m["type"] == "websocket.close"]
    assert len(closes) == 1 and closes[0]["code"] == IDLE_CLOSE and closes[0]["reason"].startswith("idle timeout")


def test_a_websocket_message_over_the_limit_closes_the_session():
    app, sent, _ = run(WS, [CONNECT, {"type": "websocket.receive", "text": "é" * 51}])  # 102 bytes in UTF-8
    assert [m["code"] for m in sent if m["type"] == "websocket.close"] == [TOO_BIG_CLOSE]
    assert app.messages[-1]["type"] == "websocket.disconnect"


def test_closing_a_session_the_client_already_left_is_dropped():
    app, sent, _ = run(WS, [CONNECT, {"type": "websocket.receive", "text": '{"type": "close"}'}, {"type": "websocket.disconnect"}])
    assert app.messages[-1] == {"type": "websocket.disconnect"} and sent == []  # the app's close went nowhere
    _, sent, _ = run(WS, [CONNECT], idle_timeout_s=0.05, send_error=OSError)  # hung up as the close went out: no error
    assert sent == []


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="max_body_bytes must be >= 1"):
        Limits(App(), max_body_bytes=0, idle_timeout_s=1.0)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["marft/NoSuchEnv-v0"], "unknown env id 'marft/NoSuchEnv-v0'"),
        (["marft/MathChain-v0", "--port", "99999"], "--port must be in 0..65535, got 99999"),
        (["marft/MathChain-v0", "--max-sessions", "0"], "--max-sessions (max_concurrent_envs) must be an integer >= 1"),
        (["marft/MathChain-v0", "--idle-timeout", "nan"], "--idle-timeout (idle_timeout_s) must be a finite number of seconds > 0"),
    ],
)
def test_the_servers_command_line_refuses_bad_values_in_one_line(argv, message, capsys):
    from marft_envs.adapters.openenv import main

    assert main(argv) == 2  # checked before openenv is imported: the same here and in the adapters' venv
    err = capsys.readouterr().err
    assert err.startswith("python -m marft_envs.adapters.openenv: error: ") and message in err and err.count("\n") == 1
