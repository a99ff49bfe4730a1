"""A marft env behind an OpenEnv server: `openenv validate --url` passes on loopback, an episode plays over a WebSocket session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.adapters
pytest.importorskip("openenv")

import uvicorn  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402

from marft_envs.adapters.openenv import FlexAction, FlexEnvironment, create_server_app  # noqa: E402
from marft_envs.registration import make  # noqa: E402


@pytest.fixture(scope="module")
def server_url():
    """A MathChain server on 127.0.0.1 (a free port), stopped after the module's tests."""
    server = uvicorn.Server(uvicorn.Config(create_server_app("marft/MathChain-v0"), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the OpenEnv server did not start"
        time.sleep(0.05)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    assert host == "127.0.0.1"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)
    assert not thread.is_alive()


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
