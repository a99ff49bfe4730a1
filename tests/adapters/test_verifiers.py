"""marft envs as verifiers v1 envs: episodes through verifiers' own loader and ``Env.run_episode`` against a
scripted OpenAI-compatible endpoint (no LLM), the rewards ``finalize`` writes, a graph layer run concurrently,
verifiers' own validation, its commands (``vf-validate``, ``vf-eval``) loading an installed env in a fresh
process, and docs/adapters.md's verifiers section."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.adapters
pytest.importorskip("verifiers")

import verifiers.v1 as vf  # noqa: E402
from docs_blocks import ROOT, run_tagged_blocks  # noqa: E402
from verifiers.v1.cli.validate import run_validate  # noqa: E402
from verifiers.v1.configs.cli.validate import ValidateConfig  # noqa: E402

from marft_envs.adapters.verifiers import plugin, verifiers_env  # noqa: E402
from marft_envs.registration import make  # noqa: E402

GOLD = {"gold_policy": "marft_envs.tasks.math.scripted:chain_policy", "gold_policy_kwargs": {"slip": 0.0}}


class ScriptedModel:
    """An OpenAI-compatible chat endpoint on 127.0.0.1: each model name answers a fixed text.

    It records every request in arrival order and the most requests it held at once; with a
    ``barrier``, the first ``barrier.parties`` requests each wait for the others (so they overlap only
    if they were sent together; a broken barrier lets them through, and ``peak`` tells)."""

    def __init__(self, replies: dict[str, str], barrier: threading.Barrier | None = None):
        self.replies, self.barrier = replies, barrier
        self.requests: list[tuple[str, list[dict]]] = []
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = json.dumps(model.completion(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def completion(self, body: dict) -> dict:
        with self.lock:
            self.requests.append((body["model"], body["messages"]))
            n = len(self.requests)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            if self.barrier is not None and n <= self.barrier.parties:
                try:
                    self.barrier.wait()
                except threading.BrokenBarrierError:
                    pass
            text = self.replies[body["model"]]
        finally:
            with self.lock:
                self.in_flight -= 1
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def play(env, task, url: str):
    """One episode of ``task``, as verifiers' eval runs it: inside ``serving()``, the run's model at ``url``."""
    ctx = vf.ModelContext(model="unpinned", client=vf.EvalClientConfig(base_url=url, api_key_var="MARFT_TEST_NO_KEY"))

    async def episode():
        async with env.serving():
            return await env.run_episode(task, ctx)

    return asyncio.run(episode())


def gold_answer(env_id: str, seed: int, **kwargs) -> str:
    probe = make(env_id, **kwargs)
    probe.reset(seed=seed)
    return probe.problem.answer


def test_each_env_and_kwargs_is_a_plugin_with_one_seat_per_agent():
    env = verifiers_env("marft/MathDebate-v0", {"n_agents": 3})
    assert isinstance(env, vf.Env) and isinstance(env.taskset, vf.Taskset)
    assert sorted(env.config.agent_harnesses()) == ["solver_0", "solver_1", "solver_2"]
    assert env.config.taskset.id == plugin("marft/MathDebate-v0", {"n_agents": 3}) != plugin("marft/MathDebate-v0")
    assert env.config.solver_0.runtime.type == "subprocess" and env.config.agent_weight == 1.0 and env.config.team_weight == 0.0
    tasks = list(env.taskset.take(2))
    assert [t.data.info["seed"] for t in tasks] == [0, 1] and tasks[1].data.name == "marft/MathDebate-v0#1"


def test_a_chain_episode_walks_the_graph_and_finalize_writes_team_and_agent_rewards():
    env = verifiers_env(
        "marft/MathChain-v0", {"credit": "last"}, reasoner_0={"model": "reasoner"}, actor_0={"model": "actor"}, taskset={"num_tasks": 2}
    )
    task = list(env.taskset)[1]
    gold = gold_answer("marft/MathChain-v0", task.data.info["seed"], credit="last")
    with ScriptedModel({"reasoner": "Let me think.", "actor": f"\\boxed{{{gold}}}"}) as model:
        episode = play(env, task, model.url)
    assert episode.ok, episode.errors
    assert [m for m, _ in model.requests] == ["reasoner", "actor"]  # the reasoner's layer, then the actor's
    system, *_, user = model.requests[1][1]
    assert system["role"] == "system" and "Problem:" in user["content"]
    assert "reasoner_0: Let me think." in user["content"]  # the actor sees its parent's reply this round
    traces = {t.agent.name: t for t in episode.traces}
    # credit="last": the round's team reward (1, the right answer) goes to the actor alone; team is the
    # mean of the agents' returns, (0 + 1) / 2; trace.reward is the agent reward (team_weight 0)
    got = {a: (t.rewards["agent"].score, t.rewards["team"].score, t.reward) for a, t in traces.items()}
    assert got == {"reasoner_0": (0.0, 0.5, 0.0), "actor_0": (1.0, 0.5, 1.0)}
    assert all(t.metrics["solved"] == 1.0 and t.metrics["round"] == 0.0 for t in traces.values())
    assert traces["actor_0"].task.data.prompt == user["content"]  # each step's trace records its own prompt


def test_a_wrong_answer_pays_no_one():
    env = verifiers_env("marft/MathChain-v0", reasoner_0={"model": "reasoner"}, actor_0={"model": "actor"}, taskset={"num_tasks": 1})
    with ScriptedModel({"reasoner": "Let me think.", "actor": "I do not know."}) as model:
        episode = play(env, next(iter(env.taskset)), model.url)
    assert episode.ok, episode.errors
    got = sorted((t.agent.name, t.reward, t.rewards["team"].score, t.metrics["solved"]) for t in episode.traces)
    assert got == [("actor_0", 0.0, 0.0, 0.0), ("reasoner_0", 0.0, 0.0, 0.0)]


def test_a_layer_of_independent_agents_runs_together_and_before_the_next():
    kwargs = {"n_agents": 2, "rounds": 2, "credit": "per_agent"}
    seats = {"solver_0": {"model": "right"}, "solver_1": {"model": "lost"}}
    env = verifiers_env("marft/MathDebate-v0", kwargs, **seats, max_concurrent_agents=None, taskset={"num_tasks": 1})
    task = next(iter(env.taskset))
    replies = {"right": f"\\boxed{{{gold_answer('marft/MathDebate-v0', task.data.info['seed'], **kwargs)}}}", "lost": "no idea"}
    with ScriptedModel(replies, barrier=threading.Barrier(2, timeout=60)) as model:
        episode = play(env, task, model.url)
    assert episode.ok, episode.errors
    assert model.peak == 2  # round 0's two solvers were in flight at once, each waiting for the other
    later = ["Answers from the previous round" in messages[-1]["content"] for _, messages in model.requests]
    assert later == [False, False, True, True]  # all of round 0's layer before round 1's
    # per_agent credit: 1 a round for the right solver, 0 for the other; "agent" is the return from the
    # step's round on; "team" the mean of the episode returns, (2 + 0) / 2
    got = sorted((t.agent.name, int(t.metrics["round"]), t.rewards["agent"].score, t.rewards["team"].score) for t in episode.traces)
    assert got == [("solver_0", 0, 2.0, 1.0), ("solver_0", 1, 1.0, 1.0), ("solver_1", 0, 0.0, 1.0), ("solver_1", 1, 0.0, 1.0)]


def test_verifiers_validation_passes_gold_and_noop(tmp_path):
    name = plugin("marft/MathChain-v0")
    config = ValidateConfig(
        taskset={"id": name, "num_tasks": 3, **GOLD}, runtime={"type": "subprocess"}, rich=False, output_dir=tmp_path / "gold"
    )
    rows = asyncio.run(run_validate(config))
    assert [r["reason"] for r in rows] == ["valid"] * 3, rows
    assert all(r["gold"]["valid"] is True and r["noop"]["rewards"] == {"team": 0.0} for r in rows)
    # without a gold policy the gold check is verifiers' "unchecked"; the noop check still runs
    bare = ValidateConfig(taskset={"id": name, "num_tasks": 1}, runtime={"type": "subprocess"}, rich=False, output_dir=tmp_path / "bare")
    (row,) = asyncio.run(run_validate(bare))
    assert (row["gold"]["reason"], row["noop"]["reason"]) == ("unchecked", "valid"), row


def test_a_shipped_env_s_plugin_is_its_installed_package_and_a_module_of_yours_defines_others(tmp_path, monkeypatch):
    import marft_mathsolo_v0

    assert plugin("marft/MathSolo-v0") == "marft_mathsolo_v0" and sys.modules["marft_mathsolo_v0"] is marft_mathsolo_v0
    assert marft_mathsolo_v0.TasksetConfig().env == "marft/MathSolo-v0" and issubclass(marft_mathsolo_v0.Env, vf.Env)
    (tmp_path / "my_debate3.py").write_text(
        "from marft_envs.adapters.verifiers import define_plugin\n\n"
        '__all__ = define_plugin(__name__, "marft/MathDebate-v0", {"n_agents": 3})\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    env = vf.load_environment(vf.resolve_env_config({"taskset": {"id": "my_debate3", "num_tasks": 1}}))
    assert sorted(env.config.agent_harnesses()) == ["solver_0", "solver_1", "solver_2"]
    assert next(iter(env.taskset)).data.info["env_kwargs"] == {"n_agents": 3}


def vf_command(name: str, *args: str, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """verifiers' own command ``name`` (this venv's), in a fresh process that finds marft only as installed:
    run from ``cwd``, without PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [str(Path(sys.executable).parent / name), *args]
    done = subprocess.run(command, cwd=cwd, env={**env, **(extra_env or {})}, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


def test_vf_validate_loads_an_installed_marft_env_by_name(tmp_path):
    gold = ["--taskset.gold-policy", GOLD["gold_policy"], "--taskset.gold-policy-kwargs", json.dumps(GOLD["gold_policy_kwargs"])]
    vf_command(
        "vf-validate", "marft_mathchain_v0", "--taskset.num-tasks", "2", *gold, "--runtime.type", "subprocess", "--rich", "False",
        "-o", str(tmp_path), "--run.name", "check", cwd=tmp_path,
    )  # fmt: skip
    rows = [json.loads(line) for line in (tmp_path / "check" / "results.jsonl").read_text().splitlines()]
    assert sorted((r["name"], r["reason"], r["noop"]["rewards"]["team"]) for r in rows) == [
        ("marft/MathChain-v0#0", "valid", 0.0),
        ("marft/MathChain-v0#1", "valid", 0.0),
    ]


def test_vf_eval_plays_an_installed_marft_env_by_name(tmp_path):
    gold = gold_answer("marft/MathChain-v0", 0)
    with ScriptedModel({"reasoner": "Let me think.", "actor": f"\\boxed{{{gold}}}"}) as model:
        vf_command(
            "vf-eval", "marft_mathchain_v0", "-m", "reasoner", "--env.actor-0.model", "actor", "--env.taskset.num-tasks", "1",
            "--client.base-url", model.url, "--client.api-key-var", "MARFT_TEST_NO_KEY", "--push", "False",
            "-o", str(tmp_path), "--run.name", "eval", cwd=tmp_path, extra_env={"MARFT_TEST_NO_KEY": "unused"},
        )  # fmt: skip
    assert [m for m, _ in model.requests] == ["reasoner", "actor"]  # the chain's graph, one layer at a time
    (episode,) = [json.loads(line) for line in (tmp_path / "eval" / "traces.jsonl").read_text().splitlines()]
    assert episode["ok"] and episode["task"]["data"]["info"]["env"] == "marft/MathChain-v0"
    got = {t["agent"]["name"]: (t["agent"]["config"]["model"], t["metrics"]["solved"]) for t in episode["traces"]}
    assert got == {"reasoner_0": ("reasoner", 1.0), "actor_0": ("actor", 1.0)}


def test_the_docs_section_runs(tmp_path):
    page = ROOT / "docs" / "adapters.md"
    ((block, expected, printed),) = run_tagged_blocks(page, "verifiers", tmp_path)
    assert expected is not None and printed == expected, f"{page}:{block.line} prints\n{printed}"
