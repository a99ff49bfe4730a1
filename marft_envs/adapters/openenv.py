"""Any marft env behind an OpenEnv server (openenv-core==0.3.0): ``{agent, text}`` in, the next agent's view out.

OpenEnv serves one ``Environment`` (``reset``/``step``/``state``) over HTTP and WebSocket with
FastAPI. :class:`FlexEnvironment` is that ``Environment`` for a FlexEnv; :func:`create_server_app`
builds the app and :func:`serve` runs it (on 127.0.0.1 unless told otherwise)::

    python -m marft_envs.adapters.openenv marft/MathChain-v0 --port 8000
    openenv validate --url http://127.0.0.1:8000

The wire format:

- **action** (:class:`FlexAction`): ``{"agent": "reasoner_0", "text": "..."}``, for an agent that
  may act now (its round-graph parents have acted this round).
- **observation** (:class:`FlexObservation`): ``agent``, the next agent to act (the first ready
  one; ``null`` once the episode is over), with its ``instructions`` and ``text``; ``ready``, every
  agent that may act now; ``rewards``, each agent's reward from the round this step ended (empty on
  a step inside a round); ``reward``, their mean (the team's); ``done`` once no agent is left; and
  ``error``: a refused action (unknown agent, one not ready, not a string) leaves the episode as it
  was and says why here, in one line.
- **state** (:class:`FlexState`): the episode id, steps, ``round``, active ``agents`` and the env's
  global ``state_text``.

Over plain HTTP each request gets a fresh env (OpenEnv's contract); an episode is played over a
WebSocket session (``openenv``'s ``EnvClient``/``GenericEnvClient``), one FlexEnv per session.

Limits (``marft_envs/adapters/server_limits.py``): at most ``--max-sessions`` sessions at once (8);
a WebSocket session that sends nothing for ``--idle-timeout`` seconds (300) is closed, and a session
opened over HTTP (``POST /mcp``, ``openenv/session/create``) that is not used for as long is reaped
(OpenEnv's reaper, which looks every ``max(timeout / 4, 5)`` seconds), so idle clients cannot keep a
new one out; a request or message over :func:`request_limit` bytes (the longest action text,
JSON-escaped) is refused, over HTTP with 413. A ``/reset`` the env refuses (a bad option) is
answered 422 with the env's one line; a request that does not fit the API (``{"seed": 1e400}``, which
JSON reads as infinity) is answered 422 with FastAPI's list of what is wrong, non-finite numbers
written as text.

Version history:
    v0: first release (openenv-core 0.3.0).
        fixes kept under v0: a request holding a non-finite number is a 422, where it was a 500 with a
            traceback in the log; sessions opened over HTTP ``/mcp`` are reaped after ``--idle-timeout``.
"""

from __future__ import annotations

import argparse
import contextvars
import importlib.util
import math
import sys
import uuid
from collections.abc import Callable
from typing import Any

from marft_envs.core import FlexEnv
from marft_envs.errors import EnvUsageError
from marft_envs.registration import make

JSON_BYTES_PER_CHAR = 6
"""The most bytes one character of a text takes in JSON as clients send it (``\\uXXXX``; ``json.dumps``'s default)."""
ENVELOPE_BYTES = 64 * 1024
"""Room in a request's limit for what is not the action's text (the JSON around it, the agent's id)."""
IDLE_TIMEOUT_S = 300.0
"""Seconds a WebSocket session may send nothing before the server closes it (``--idle-timeout``)."""
MAX_SESSIONS = 8
"""WebSocket sessions (each one FlexEnv) the server holds at once (``--max-sessions``)."""
PROG = "python -m marft_envs.adapters.openenv"


class RequestRefused(ValueError):
    """A request the env refused (a bad reset option): HTTP answers it 422 with this one line."""


LAZY = ("FlexAction", "FlexObservation", "FlexState", "FlexEnvironment")
"""The module's classes: they subclass openenv's, so they are built when first asked for (this module
imports without openenv, as every marft module does; using it without openenv says what to install)."""
_built: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name in LAZY:
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _classes() -> dict[str, type]:
    if _built:
        return _built
    if importlib.util.find_spec("openenv") is None:
        raise ImportError("the OpenEnv adapter needs openenv: pip install 'marft[adapters]' (openenv-core==0.3.0)")
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
    from pydantic import Field

    class FlexAction(Action):
        """One agent's message."""

        agent: str = Field(..., description="The agent acting: one the last observation listed as ready")
        text: str = Field(..., description="Its message (the env grades it)")

    class FlexObservation(Observation):
        """The next agent's view, the round's rewards, and why an action was refused (if it was)."""

        agent: str | None = Field(default=None, description="The next agent to act; null once the episode is over")
        instructions: str = Field(default="", description="That agent's role prompt")
        text: str = Field(default="", description="What that agent sees now")
        ready: list[str] = Field(default_factory=list, description="Every agent that may act now")
        rewards: dict[str, float] = Field(default_factory=dict, description="Per-agent rewards of the round this step ended")
        error: str | None = Field(default=None, description="Why the action was refused; the episode is unchanged")

    class FlexState(State):
        """Where the episode is."""

        round: int = Field(default=0, description="Rounds finished")
        agents: list[str] = Field(default_factory=list, description="Agents still in the episode")
        state_text: str = Field(default="", description="The env's global state, as text")

    class FlexEnvironment(Environment):
        """A FlexEnv behind OpenEnv's ``Environment`` API, one agent's message per step."""

        SUPPORTS_CONCURRENT_SESSIONS = True  # each session builds its own FlexEnv; they share nothing

        def __init__(self, env: FlexEnv):
            super().__init__()
            self.flex = env
            self._state = FlexState(episode_id=None, step_count=0)

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> FlexObservation:
            try:
                self.flex.reset(seed=seed, options=kwargs.get("options"))
            except (ValueError, TypeError, KeyError) as err:  # the client's seed or options (EnvUsageError is a ValueError)
                message = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
                raise RequestRefused((message.splitlines() or [type(err).__name__])[0]) from None
            self._state = FlexState(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
            self._sync_state()
            return self._view()

        def step(self, action: FlexAction, timeout_s: float | None = None, **kwargs: Any) -> FlexObservation:
            ready = self.flex.ready_agents()
            if action.agent not in ready:
                why = "the episode is over: reset" if not self.flex.agents else f"agents that may act now: {ready}"
                return self._view(error=f"agent {action.agent!r} may not act now; {why}")
            try:
                result = self.flex.step({action.agent: action.text})
            except EnvUsageError as err:  # e.g. a text past the action space's length: refused, nothing changed
                return self._view(error=str(err).splitlines()[0])
            self._state.step_count += 1
            self._sync_state()
            rewards = {} if result is None else {a: float(r) for a, r in result.rewards.items()}
            return self._view(rewards=rewards)

        @property
        def state(self) -> FlexState:
            return self._state

        def get_metadata(self) -> EnvironmentMetadata:
            return EnvironmentMetadata(
                name=self.flex.name,
                description=f"marft env {self.flex.name}: agents {self.flex.possible_agents}, one {{agent, text}} action per step",
                version="0",
            )

        def close(self) -> None:
            self.flex.close()

        def _sync_state(self) -> None:
            self._state.round = self.flex.round
            self._state.agents = list(self.flex.agents)
            self._state.state_text = self.flex.state()

        def _view(self, rewards: dict[str, float] | None = None, error: str | None = None) -> FlexObservation:
            ready = self.flex.ready_agents()
            nxt = ready[0] if ready else None
            seen = self.flex.observe(nxt) if nxt else {"instructions": "", "text": ""}
            rewards = rewards or {}
            return FlexObservation(
                agent=nxt,
                instructions=seen["instructions"],
                text=seen["text"],
                ready=ready,
                rewards=rewards,
                reward=sum(rewards.values()) / len(rewards) if rewards else 0.0,
                done=not self.flex.agents,
                error=error,
            )

    _built.update(FlexAction=FlexAction, FlexObservation=FlexObservation, FlexState=FlexState, FlexEnvironment=FlexEnvironment)
    return _built


_IN_WEBSOCKET = contextvars.ContextVar("marft_openenv_in_websocket", default=False)
"""True while a WebSocket connection is being served: the sessions it opens are its own (:func:`_server_class`)."""


class _MarkWebSockets:
    """ASGI middleware that sets :data:`_IN_WEBSOCKET` for the connections it serves."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        token = _IN_WEBSOCKET.set(scope["type"] == "websocket")
        try:
            await self.app(scope, receive, send)
        finally:
            _IN_WEBSOCKET.reset(token)


def _server_class() -> type:
    """OpenEnv's ``HTTPEnvServer`` whose idle-session reaper leaves the sessions a WebSocket holds alone.

    OpenEnv's reaper ends sessions not used for the timeout, judged by their last reset or step; a
    WebSocket session is the WebSocket's to end (Limits closes it when it sends nothing; a client that
    only asks for ``state`` is not idle), so only sessions opened over HTTP ``/mcp`` are reaped.
    """
    from openenv.core.env_server.http_server import HTTPEnvServer

    class Server(HTTPEnvServer):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._websocket_sessions: set[str] = set()

        async def _create_session(self) -> tuple[str, Any]:
            session_id, env = await super()._create_session()
            if _IN_WEBSOCKET.get():
                self._websocket_sessions.add(session_id)
            return session_id, env

        async def _destroy_session(self, session_id: str) -> None:
            if session_id in self._websocket_sessions and not _IN_WEBSOCKET.get():
                return  # the reaper: the WebSocket that holds this session ends it
            self._websocket_sessions.discard(session_id)
            await super()._destroy_session(session_id)

    return Server


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float written as text (``inf``, ``nan``): JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def environment_factory(env_id: str, **env_kwargs: Any) -> Callable[[], Any]:
    """What OpenEnv's ``create_app`` takes: a function building a fresh ``FlexEnvironment``."""
    make(env_id, **env_kwargs).close()  # a bad id or kwarg fails here, in one line, not at the first request
    environment = _classes()["FlexEnvironment"]
    return lambda: environment(make(env_id, **env_kwargs))


def request_limit(env: FlexEnv) -> int:
    """The most bytes a request to a server of ``env`` needs: its longest action text, JSON-escaped, and an envelope."""
    longest = max(getattr(env.action_space(agent), "max_length", 0) or 0 for agent in env.possible_agents)
    return JSON_BYTES_PER_CHAR * longest + ENVELOPE_BYTES


def create_server_app(
    env_id: str,
    max_concurrent_envs: int = MAX_SESSIONS,
    *,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
    max_request_bytes: int | None = None,
    **env_kwargs: Any,
):
    """The FastAPI app serving ``env_id`` (OpenEnv's ``create_app``, without its web UI), with the module's limits.

    ``max_request_bytes``: the largest request body or WebSocket message (default: :func:`request_limit`).
    """
    if isinstance(max_concurrent_envs, bool) or not isinstance(max_concurrent_envs, int) or max_concurrent_envs < 1:
        raise ValueError(f"--max-sessions (max_concurrent_envs) must be an integer >= 1, got {max_concurrent_envs!r}")
    if isinstance(idle_timeout_s, bool) or not isinstance(idle_timeout_s, (int, float)) or not 0 < idle_timeout_s < float("inf"):
        raise ValueError(f"--idle-timeout (idle_timeout_s) must be a finite number of seconds > 0, got {idle_timeout_s!r}")
    factory = environment_factory(env_id, **env_kwargs)
    if max_request_bytes is None:
        probe = make(env_id, **env_kwargs)
        max_request_bytes = request_limit(probe)
        probe.close()
    from fastapi import FastAPI
    from fastapi.encoders import jsonable_encoder
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from openenv.core.env_server.types import ConcurrencyConfig
    from starlette.exceptions import HTTPException

    from marft_envs.adapters.server_limits import Limits

    classes = _classes()
    # OpenEnv's create_fastapi_app, with our server class and its idle-session reaper on
    app = FastAPI(title="OpenEnv Environment HTTP API", version="1.0.0", description=f"marft env {env_id} over OpenEnv")
    limits = ConcurrencyConfig(max_concurrent_envs=max_concurrent_envs, session_timeout=float(idle_timeout_s))
    _server_class()(factory, classes["FlexAction"], classes["FlexObservation"], concurrency_config=limits).register_routes(app)

    async def refused(request, err: RequestRefused):
        return JSONResponse(status_code=422, content={"detail": str(err)})

    # FastAPI's answers, whose JSON fails (a 500 and a traceback) when they quote a non-finite number
    async def invalid(request, err: RequestValidationError):
        return JSONResponse(status_code=422, content={"detail": _json_safe(jsonable_encoder(err.errors()))})

    async def http_error(request, err: HTTPException):  # e.g. OpenEnv's 422 for an action that is not a FlexAction
        err.detail = _json_safe(jsonable_encoder(err.detail))
        return await http_exception_handler(request, err)

    app.add_exception_handler(RequestRefused, refused)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_middleware(_MarkWebSockets)
    app.add_middleware(Limits, max_body_bytes=max_request_bytes, idle_timeout_s=float(idle_timeout_s))
    app.state.max_request_bytes = max_request_bytes
    return app


def serve(
    env_id: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    max_sessions: int = MAX_SESSIONS,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
    **env_kwargs: Any,
) -> None:
    """Run the server until interrupted (loopback by default: pass ``host`` to listen elsewhere)."""
    _run(create_server_app(env_id, max_sessions, idle_timeout_s=idle_timeout_s, **env_kwargs), host, port)


def _run(app: Any, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning", ws_max_size=app.state.max_request_bytes)


def main(argv: list[str] | None = None) -> int:
    """``python -m marft_envs.adapters.openenv ENV_ID``: a bad value ends in one line on stderr and exit status 2."""
    parser = argparse.ArgumentParser(prog=PROG, description="Serve a marft env over OpenEnv's HTTP/WebSocket API")
    parser.add_argument("env_id", help="a registered id, e.g. marft/MathChain-v0")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="0 to 65535 (0: any free port)")
    parser.add_argument("--max-sessions", type=int, default=MAX_SESSIONS, help=f"WebSocket sessions at once (default {MAX_SESSIONS})")
    parser.add_argument(
        "--idle-timeout", type=float, default=IDLE_TIMEOUT_S, help=f"close a session silent this many seconds (default {IDLE_TIMEOUT_S:g})"
    )
    args = parser.parse_args(argv)
    try:
        if not 0 <= args.port <= 65535:
            raise ValueError(f"--port must be in 0..65535, got {args.port}")
        app = create_server_app(args.env_id, args.max_sessions, idle_timeout_s=args.idle_timeout)
    except Exception as err:  # a bad id, env kwargs or limit, openenv missing: the user needs one line, not a traceback
        message = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
        return _fail(parser, (message.splitlines() or [type(err).__name__])[0])
    _run(app, args.host, args.port)
    return 0


def _fail(parser: argparse.ArgumentParser, message: str) -> int:
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
