"""Limits for a server that plays marft envs for clients it does not know: request sizes and idle sessions.

:class:`Limits` is plain ASGI middleware (no web framework imported), wrapped around the OpenEnv
server's app (``marft_envs/adapters/openenv.py``):

- **HTTP bodies.** A request whose body is over ``max_body_bytes`` is answered ``413`` and not read
  further: a ``Content-Length`` over the limit is refused before any of the body is read, and a body
  sent in chunks is refused once what arrived passes the limit. The app gets the body only once it is
  whole and within the limit, so a request costs at most the limit in memory.
- **WebSocket messages.** A message over ``max_body_bytes`` closes the session (code 1009, "message
  too big"); :func:`marft_envs.adapters.openenv.serve` also gives the limit to uvicorn
  (``ws_max_size``), which refuses such a frame before it is buffered.
- **Idle WebSocket sessions.** A session that sends nothing for ``idle_timeout_s`` seconds is closed
  (code 1001, "idle timeout"), and its env with it, so that clients who connect and wait cannot hold
  every session of the server for ever.
- **Closing.** The app's close of a session the client already closed (``{"type": "close"}``, then
  hanging up) is dropped, where it used to end in a logged traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

IDLE_CLOSE, TOO_BIG_CLOSE = 1001, 1009
"""WebSocket close codes (RFC 6455): going away (here: idle), message too big."""


class Limits:
    """ASGI middleware: refuse bodies over ``max_body_bytes`` with 413, close WebSocket sessions idle for ``idle_timeout_s``."""

    def __init__(self, app: Callable[..., Awaitable[None]], *, max_body_bytes: int, idle_timeout_s: float):
        if max_body_bytes < 1 or not idle_timeout_s > 0:
            raise ValueError(f"max_body_bytes must be >= 1 and idle_timeout_s > 0, got {max_body_bytes} and {idle_timeout_s}")
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.idle_timeout_s = idle_timeout_s

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: dict, receive: Receive, send: Send) -> None:
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            if not length.strip().isdigit():
                return await _reply(send, 400, "Content-Length must be a number of bytes")
            if int(length) > self.max_body_bytes:
                return await _reply(send, 413, self._too_large(f"the body is {int(length)} bytes"))
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
            if len(body) > self.max_body_bytes:
                return await _reply(send, 413, self._too_large(f"more than {self.max_body_bytes} bytes arrived"))
        whole = {"type": "http.request", "body": bytes(body), "more_body": False}

        async def replay() -> Message:
            nonlocal whole
            if whole is not None:
                message, whole = whole, None
                return message
            return await receive()  # after the body: the client's disconnect

        await self.app(scope, replay, send)

    def _too_large(self, what: str) -> str:
        return f"request too large: {what}; this server takes at most {self.max_body_bytes} bytes (an action's longest text, JSON-escaped)"

    async def _websocket(self, scope: dict, receive: Receive, send: Send) -> None:
        closed = False

        async def close_once(message: Message) -> None:
            nonlocal closed
            if message["type"] != "websocket.close":
                return await send(message)
            if closed:  # the client left, or we closed already: nothing to close (the app closes at its end regardless)
                return
            closed = True
            with contextlib.suppress(OSError):  # the client hung up meanwhile (uvicorn's ClientDisconnected)
                await send(message)

        async def limited() -> Message:
            nonlocal closed
            try:
                message = await asyncio.wait_for(receive(), self.idle_timeout_s)
            except asyncio.TimeoutError:
                return await self._close(close_once, IDLE_CLOSE, f"idle timeout: nothing received for {self.idle_timeout_s:g} s")
            if message["type"] == "websocket.disconnect":
                closed = True
            elif message["type"] == "websocket.receive":
                size = len(message.get("bytes") or b"") + len((message.get("text") or "").encode("utf-8", "surrogatepass"))
                if size > self.max_body_bytes:
                    return await self._close(close_once, TOO_BIG_CLOSE, f"message too big: at most {self.max_body_bytes} bytes")
            return message

        await self.app(scope, limited, close_once)

    @staticmethod
    async def _close(send: Send, code: int, reason: str) -> Message:
        """Close the connection with ``code``, and tell the app the client went (which ends its session)."""
        await send({"type": "websocket.close", "code": code, "reason": reason[:120]})  # a close reason fits in 123 bytes
        return {"type": "websocket.disconnect", "code": code}


async def _reply(send: Send, status: int, detail: str) -> None:
    """A JSON ``{"detail": ...}`` answer that closes the connection (the rest of the body is not read)."""
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
