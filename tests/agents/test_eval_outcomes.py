"""Evaluation on the validation split (``eval_split``) and every evaluation's per-problem outcomes (issue 53)."""

import json
from fractions import Fraction

import pytest
import torch

import marft_envs
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.rollout.evaluation import HELDOUT_SEED, eval_plan, evaluate, problem_outcomes
from marft_envs.tasks.math.problem import Problem
from marft_envs.tasks.math.synthetic import arithmetic_key, arithmetic_split


def split_of(uid: str, answer: str) -> str:
    """The arithmetic split of a level-1 synthetic problem (integer answer) from its uid and gold answer."""
    return arithmetic_split(arithmetic_key([Fraction(x) for x in uid.split(":")[1].split(",")], Fraction(answer)))


def test_eval_split_sets_the_envs_split_option():
    plan = eval_plan("marft/MathChain-v1", {"split": "train", "rounds": 3}, 1, "validation")
    assert plan.env_kwargs == {"split": "validation", "rounds": 1} and plan.split == "validation" and plan.heldout
    assert eval_plan("marft/MathChain-v1", {}).split == "test"
    assert eval_plan("marft/Booking-v0", {}).split is None
    with pytest.raises(ValueError, match=r"^eval_split=validation: marft/Booking-v0 declares no held-out split option"):
        eval_plan("marft/Booking-v0", {}, 1, "validation")
    with pytest.raises(ValueError, match=r"^eval_split must be one of \['test', 'validation'\], got 'dev'$"):
        eval_plan("marft/MathChain-v1", {}, 1, "dev")
    with pytest.raises(ValueError, match="split by uid .* has no validation split"):  # the -v0 ids keep the old split
        marft_envs.make("marft/MathChain-v0", **eval_plan("marft/MathChain-v0", {}, 1, "validation").env_kwargs)


def _step(agent: str, round_: int, info: dict, *, done: bool = False) -> AgentStep:
    return AgentStep(0, round_, agent, [1], [2], torch.zeros(1), "x", reward=float(done), done=done, info=info)


def test_problem_outcomes_by_hand():
    problem = Problem("2+3?", "5", uid="l0_gift:2,3")
    steps = [
        _step("reasoner_0", 0, {"answer": "6", "reward_components": {"own_correct": 0.0}}),
        _step("actor_0", 0, {"answer": "6", "team_answer": "6", "reward_components": {"own_correct": 0.0}}),
        _step("reasoner_0", 1, {"answer": "5", "reward_components": {"own_correct": 1.0}}),
        _step("actor_0", 1, {"answer": "5", "team_answer": "5", "reward_components": {"own_correct": 1.0}}, done=True),
    ]
    unanswered = [_step("solver_0", 0, {}, done=True)]
    episodes = [Episode(0, steps, solved=True), Episode(1, unanswered, solved=None)]
    lines = problem_outcomes(episodes, [{"problem": problem}, None])
    assert lines[0] == {
        "episode": 0,
        "seed": HELDOUT_SEED,
        "uid": "l0_gift:2,3",
        "answer": "5",
        "team_answer": "5",
        "correct": True,
        "return": 1.0,
        "rounds": 2,
        "agents": {"reasoner_0": {"answer": "5", "own_correct": 1.0}, "actor_0": {"answer": "5", "own_correct": 1.0}},
    }
    assert lines[1]["uid"] is None and lines[1]["correct"] is None and lines[1]["agents"] == {"solver_0": {}}
    assert json.loads(json.dumps(lines)) == lines


def _policy(tiny_model_dir, env_id):
    from marft_agents.models.policy import LaMASPolicy, load_base

    model, tokenizer = load_base(str(tiny_model_dir))
    return LaMASPolicy(model, tokenizer, marft_envs.make(env_id).possible_agents)


def test_evaluate_on_validation_reports_each_problem(tiny_model_dir):
    policy = _policy(tiny_model_dir, "marft/MathChain-v1")
    kwargs = {"problems": "synthetic:1"}
    result = evaluate(policy, "marft/MathChain-v1", kwargs, 4, max_new_tokens=3, split="validation", outcomes=True)
    lines = result["outcomes"]
    assert result["split"] == "validation" and [o["episode"] for o in lines] == [0, 1, 2, 3]
    assert {split_of(o["uid"], o["answer"]) for o in lines} == {"validation"}
    assert all(isinstance(o["correct"], bool) and isinstance(o["team_answer"], (str, type(None))) for o in lines)
    assert set(lines[0]["agents"]) == {"reasoner_0", "actor_0"}
    test = evaluate(policy, "marft/MathChain-v1", kwargs, 4, max_new_tokens=3)
    assert "outcomes" not in test and test["split"] == "test"


def test_marft_eval_writes_outcomes_on_validation(tmp_path, tiny_model_dir, capsys):
    from marft_agents.cli import main as cli

    out = tmp_path / "outcomes.jsonl"
    base = ["eval", "--model", str(tiny_model_dir), "--env", "marft/MathChain-v1", "--episodes", "3", "max_new_tokens=3"]
    assert cli([*base, "eval_split=validation", "--outcomes", str(out)]) == 0
    assert f"outcomes: {out}" in capsys.readouterr().out
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 3 and all(o["uid"].startswith("l") and "answer" in o and "correct" in o for o in lines)
    assert cli([*base, "--outcomes", str(out)]) == 2  # an existing file is kept unless --overwrite
    assert "--outcomes" in capsys.readouterr().err and out.read_text().count("\n") == 3
    assert cli([*base, "--outcomes", str(tmp_path / "o.txt")]) == 2


def test_a_run_writes_every_evaluations_outcomes_and_validates_on_validation(tmp_path, tiny_model_dir):
    from marft_agents.cli import main as cli

    run = tmp_path / "run"
    args = [
        f"model={tiny_model_dir}",
        f"run_dir={run}",
        "env=marft/MathChain-v1",
        "env_kwargs.problems=synthetic:1",
        "eval_split=validation",
        "updates=2",
        "episodes_per_update=4",
        "eval_episodes=3",
        "eval_every=1",
        "eval_rounds=2",
        "eval_transcripts=0",
        "max_new_tokens=3",
        "marft.minibatch_size=4",
        "threads=1",
    ]
    assert cli(["train", "--no-progress", *args]) == 0
    names = sorted(p.name for p in (run / "outcomes").iterdir())
    assert names == [
        "eval_after.jsonl",
        "eval_after_within_2_attempts.jsonl",
        "eval_before.jsonl",
        "eval_before_within_2_attempts.jsonl",
        "eval_update_000001.jsonl",
    ]
    for name in names:
        lines = [json.loads(x) for x in (run / "outcomes" / name).read_text().splitlines()]
        assert len(lines) == 3 and {split_of(o["uid"], o["answer"]) for o in lines} == {"validation"}, name
    summary = json.loads((run / "summary.json").read_text())
    before = json.loads((run / "eval_before.json").read_text())
    assert "outcomes" not in before and before["split"] == summary["eval_after"]["split"] == "validation"


def test_a_run_refuses_a_split_its_env_lacks_before_loading(tmp_path, capsys):
    from marft_agents.cli import main as cli

    for env in ("marft/MathChain-v0", "marft/Booking-v0"):
        assert cli(["train", "model=no/such-model", f"env={env}", "eval_split=validation", f"run_dir={tmp_path / 'r'}"]) == 2
        err = capsys.readouterr().err
        assert "eval_split=validation" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


def test_a_learning_result_commits_its_outcomes_and_not_its_checkpoints(tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).parents[2] / "benchmarks"))
    import learning

    run = tmp_path / "f5_s0"
    for name in ("summary.json", "config.json", "outcomes/eval_before.jsonl", "samples/eval_after.jsonl", "checkpoints/x.pt"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text("{}")
    (tmp_path / "f5_s0.timing.jsonl").write_text("{}")
    files = [p.relative_to(tmp_path).as_posix() for p in learning.result_files(run)]
    assert files == [
        "f5_s0/config.json",
        "f5_s0/summary.json",
        "f5_s0/samples/eval_after.jsonl",
        "f5_s0/outcomes/eval_before.jsonl",
        "f5_s0.timing.jsonl",
    ]
