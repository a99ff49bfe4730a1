"""reasoning-gym's tasks as FlexEnvs: the checkers, its own grading, the splits, the chain, `marft train`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.adapters
pytest.importorskip("reasoning_gym")

import marft_envs  # noqa: E402
from marft_envs.adapters.reasoning_gym import register_envs  # noqa: E402
from marft_envs.testing import check_env  # noqa: E402


def test_registered_lazily_without_importing_reasoning_gym():
    assert register_envs() == ["marft/ReasoningGym-v0", "marft/ReasoningGym-Chain-v0"]
    assert "marft/ReasoningGym-v0" in marft_envs.list_envs("gym")
    code = (
        "import sys, marft_envs; from marft_envs.plugins import load_entry_points; load_entry_points(); "
        "assert 'marft/ReasoningGym-Chain-v0' in marft_envs.list_envs(); assert 'reasoning_gym' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("env_id", ["marft/ReasoningGym-v0", "marft/ReasoningGym-Chain-v0"])
def test_checkers_pass(env_id):
    passed = check_env(env_id, seeds=range(3)).passed
    assert {"pettingzoo.api_test", "marft.determinism", "marft.pure_queries"} <= set(passed)
    assert ("gymnasium.check_env" in passed) == (env_id == "marft/ReasoningGym-v0")


def test_reasoning_gyms_own_score_is_the_reward():
    env = marft_envs.make("marft/ReasoningGym-v0", task="chain_sum")
    cases = [("<answer>{a}</answer>", 1.0, True), ("I think <answer>x</answer>", 0.0, False), ("{a}", 0.0, False)]
    for reply, reward, solved in cases:
        env.reset(seed=0)
        result = env.step({"solver_0": reply.format(a=env.entry["answer"])})
        assert result.rewards == {"solver_0": reward} and result.infos["solver_0"]["solved"] is solved, reply
    env = marft_envs.make("marft/ReasoningGym-v0", task="chain_sum", answer_tag=None)  # the whole reply is the answer
    env.reset(seed=0)
    assert env.step({"solver_0": f" {env.entry['answer']}\n"}).rewards == {"solver_0": 1.0}


def test_the_test_split_draws_other_items():
    train, test = (marft_envs.make("marft/ReasoningGym-v0", split=s, size=50) for s in ("train", "test"))
    questions = {s: set() for s in ("train", "test")}
    for seed in range(20):
        for name, env in (("train", train), ("test", test)):
            env.reset(seed=seed)
            questions[name].add(env.entry["question"])
    assert questions["train"].isdisjoint(questions["test"])


def test_the_actor_sees_the_reasoning_and_credit_follows_the_mode():
    env = marft_envs.make("marft/ReasoningGym-Chain-v0", task="chain_sum", credit="last")
    env.reset(seed=1)
    assert env.ready_agents() == ["reasoner_0"]
    env.step({"reasoner_0": "add them up"})
    assert "reasoner_0: add them up" in env.observe("actor_0")["text"]
    result = env.step({"actor_0": f"<answer>{env.entry['answer']}</answer>"})
    assert result.rewards == {"reasoner_0": 0.0, "actor_0": 1.0}


def test_bad_options_fail_in_one_line():
    with pytest.raises(ValueError, match="unknown reasoning-gym task 'no_such_task'"):
        marft_envs.make("marft/ReasoningGym-v0", task="no_such_task")
    with pytest.raises(ValueError, match="task_config for 'chain_sum' is not valid"):
        marft_envs.make("marft/ReasoningGym-v0", task="chain_sum", task_config={"no_such_field": 1})
    with pytest.raises(ValueError, match="split must be one of"):
        marft_envs.make("marft/ReasoningGym-v0", split="dev")


def test_marft_train_runs_two_updates_on_the_chain(tmp_path):
    run = tmp_path / "run"
    args = [
        "train",
        "--no-progress",
        "env=marft/ReasoningGym-Chain-v0",
        f"run_dir={run}",
        "updates=2",
        "episodes_per_update=4",
        "eval_episodes=2",
        "eval_rounds=0",
        "eval_every=0",
        "max_new_tokens=6",
        "marft.minibatch_size=4",
        "threads=1",
        "env_kwargs.task=chain_sum",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "marft_agents.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["eval_before"]["success_reported"]  # the env reports "solved": accuracy is measured
    steps = json.loads((run / "samples" / "eval_after.jsonl").read_text().splitlines()[0])["steps"]
    assert [s["agent"] for s in steps] == ["reasoner_0", "actor_0"]
