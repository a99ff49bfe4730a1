"""Training transcripts (``log.transcripts_every``, issue 54): a sample of an update's episodes and each mid-run
evaluation's transcripts in ``samples/``, kept across ``--resume``, shown by ``marft show`` (escaped) and sent to W&B.

The runs are tiny (a random model, 2 updates of 4 episodes); the W&B tests use a fake ``wandb`` module that
records what it is given, so they run where wandb is not installed.
"""

from __future__ import annotations

import json
import sys
import types

import pytest
from agent_helpers import one_line, plant_rewards
from transformers import AutoTokenizer

from marft_agents.cli import main as cli
from marft_agents.rollout.evaluation import pick_transcripts
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs import transcripts
from marft_agents.runs.report import check_transcript, show
from marft_agents.runs.trackers import TRAIN_TRANSCRIPT_COLUMNS, TRANSCRIPT_COLUMNS, LogConfig, train_transcript_rows
from marft_agents.training import trainer
from marft_agents.training.config import ConfigError, TrainConfig, load, validate
from marft_agents.training.trainer import train


def tiny_config(model_dir, run_dir, **log) -> TrainConfig:
    """2 updates of 4 episodes, a mid-run evaluation after the first, a training sample of 2 episodes every update."""
    config = TrainConfig(
        model=str(model_dir),
        run_dir=str(run_dir),
        updates=2,
        episodes_per_update=4,
        eval_episodes=4,
        eval_rounds=0,
        eval_every=1,
        eval_transcripts=2,
        max_new_tokens=6,
        checkpoint_every=1,
        seed=3,
        threads=1,
        log=LogConfig(**{"transcripts_every": 1, "transcripts_episodes": 2, **log}),
    )
    config.algo_args.minibatch_size = 4
    return config


@pytest.fixture
def paid(monkeypatch):
    """Half of every batch rewarded (a random tiny model earns nothing), and each update's episodes, by update."""
    collect = RolloutEngine.collect
    monkeypatch.setattr(RolloutEngine, "collect", lambda self, *a, **k: plant_rewards(collect(self, *a, **k)))
    learned, learn = {}, trainer._learn

    def recording(config, run, episodes, update):
        learned[update] = list(episodes)
        return learn(config, run, episodes, update)

    monkeypatch.setattr(trainer, "_learn", recording)
    return learned


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_update_writes_a_sample_whose_texts_are_the_episodes_tokens(tiny_model_dir, tmp_path, paid):
    run = tmp_path / "run"
    train(tiny_config(tiny_model_dir, run), progress=False, quiet=True)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    metrics = lines(run / "metrics.jsonl")
    for update in (0, 1):
        written = lines(run / "samples" / f"train_update_{update:06d}.jsonl")
        chosen = pick_transcripts(paid[update], 2)  # one rewarded, one not
        assert [t["episode"] for t in written] == [e.index for e in chosen]
        assert {t["return"] != 0 for t in written} == {True, False}
        for t, episode in zip(written, chosen):
            check_transcript(t, "line")  # marft show reads it
            assert t["update"] == update and t["return"] == episode.team_return and t["solved"] == episode.solved
            assert t["agents"]["reasoner_0"]["advantage_mean"] == metrics[update]["reasoner_0/advantage_mean"]
            assert [s["agent"] for s in t["steps"]] == [s.agent for s in episode.steps]
            for row, step in zip(t["steps"], episode.steps):
                assert row["prompt"] == tokenizer.decode(step.prompt, skip_special_tokens=False) != ""
                assert row["response"] == tokenizer.decode(step.response, skip_special_tokens=False)
                assert row["action"] == step.text and row["reward"] == step.reward
            assert t["steps"][0]["return_to_go"] == pytest.approx(episode.team_return)
            assert t["steps"][-1]["return_to_go"] == pytest.approx(episode.steps[-1].chain_reward)
    mid = lines(run / "samples" / "eval_update_000001.jsonl")  # the evaluation after update 1 of 2
    assert len(mid) == 2 and all("prompt" not in s for t in mid for s in t["steps"])
    assert set(transcripts.names(run / "samples")) == {
        "eval_before",
        "eval_after",
        "eval_update_000001",
        "train_update_000000",
        "train_update_000001",
    }


def test_transcripts_every_0_writes_no_training_sample_and_transcripts_change_nothing_the_run_plays(tiny_model_dir, tmp_path):
    off, on = tmp_path / "off", tmp_path / "on"
    config = tiny_config(tiny_model_dir, off, transcripts_every=0)
    config.eval_transcripts = 0  # and a mid-run evaluation without transcripts writes no file
    train(config, progress=False, quiet=True)
    assert transcripts.names(off / "samples") == ["eval_after", "eval_before"]
    train(tiny_config(tiny_model_dir, on), progress=False, quiet=True)
    assert len(transcripts.names(on / "samples")) == 5

    def played(run):  # no random draw for the sample: the same episodes, updates and evaluations
        return [{k: v for k, v in line.items() if not k.startswith("time/")} for line in lines(run / "metrics.jsonl")]

    assert played(off) == played(on)


def test_transcripts_every_n_writes_updates_0_n_2n(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    config = tiny_config(tiny_model_dir, run, transcripts_every=2)
    config.updates, config.eval_every, config.checkpoint_every = 3, 0, 0
    train(config, progress=False, quiet=True)
    assert transcripts.written(run / "samples", transcripts.TRAIN) == [0, 2]


def test_resume_keeps_the_earlier_samples_and_writes_the_later_ones_anew(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    config = tiny_config(tiny_model_dir, run)
    config.updates = 1
    train(config, progress=False, quiet=True)
    samples = run / "samples"
    first = (samples / "train_update_000000.jsonl").read_bytes()
    stale = '{"left": "by a run killed after its checkpoint"}\n'
    for name in ("train_update_000001", "eval_update_000002"):  # past the checkpoint: played again on resume
        (samples / f"{name}.jsonl").write_text(stale)
    config.updates = 3
    train(config, resume=True, progress=False, quiet=True)
    assert (samples / "train_update_000000.jsonl").read_bytes() == first
    assert transcripts.written(samples, transcripts.TRAIN) == [0, 1, 2]
    assert transcripts.written(samples, transcripts.EVAL) == [2]  # eval_every=1: after update 2 of 3
    for name in ("train_update_000001", "eval_update_000002"):
        assert [t["episode"] for t in lines(samples / f"{name}.jsonl")] and stale not in (samples / f"{name}.jsonl").read_text()
    assert [t["update"] for t in lines(samples / "train_update_000002.jsonl")] == [2, 2]


def test_a_lower_number_of_updates_on_resume_drops_nothing_before_the_checkpoint(tmp_path):
    samples = tmp_path / "samples"
    samples.mkdir()
    for name in (
        "eval_before",
        "train_update_000000",
        "train_update_000004",
        "train_update_000005",
        "eval_update_000005",
        "eval_update_000006",
    ):
        (samples / f"{name}.jsonl").write_text("")
    transcripts.drop_after(samples, 5)  # the checkpoint after 5 updates: update 5 is played again, evaluation 5 is not
    assert transcripts.names(samples) == ["eval_before", "eval_update_000005", "train_update_000000", "train_update_000004"]


def training_line(update: int, agent: str = "actor_0", prompt: str = "2+2?", response: str = "4") -> dict:
    step = {
        "round": 0,
        "agent": agent,
        "observation": {"text": prompt},
        "action": response,
        "reward": 1.0,
        "reward_components": {},
        "prompt": prompt,
        "response": response,
        "return_to_go": 1.0,
    }
    return {"update": update, "episode": 3, "solved": True, "return": 1.0, "steps": [step], "agents": {agent: {"advantage_mean": 0.25}}}


@pytest.fixture
def run_with_samples(tmp_path):
    """A run folder whose samples/ holds two training samples and a mid-run evaluation (written by hand)."""
    samples = tmp_path / "run" / "samples"
    samples.mkdir(parents=True)
    for update in (0, 25):
        (samples / f"train_update_{update:06d}.jsonl").write_text(json.dumps(training_line(update, prompt=f"<s>update {update}")) + "\n")
    evaluation = {k: v for k, v in training_line(0).items() if k not in ("update", "agents")}
    evaluation["steps"] = [{k: v for k, v in s.items() if k not in ("prompt", "response", "return_to_go")} for s in evaluation["steps"]]
    (samples / "eval_update_000025.jsonl").write_text(json.dumps(evaluation) + "\n")
    return tmp_path / "run"


def test_marft_show_prints_the_latest_training_sample_or_the_one_named(run_with_samples, capsys):
    assert cli(["show", str(run_with_samples), "--which", "train"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("=== train_update_000025, episode 3: solved yes, return 1.00\n")
    assert "learner, actor_0: advantage_mean=0.25" in out and "(reward 1, return to go 1)" in out
    assert "[prompt]\n<s>update 25\n[response]\n4" in out
    assert cli(["show", str(run_with_samples), "--which", "train", "--update", "0"]) == 0
    assert "[prompt]\n<s>update 0\n" in capsys.readouterr().out
    assert cli(["show", str(run_with_samples), "--which", "eval"]) == 0
    assert "=== eval_update_000025, episode 3" in (out := capsys.readouterr().out) and "[action]\n4" in out
    assert cli(["show", str(run_with_samples), "--list"]) == 0
    assert capsys.readouterr().out.split() == ["eval_update_000025", "train_update_000000", "train_update_000025"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--which", "train", "--update", "7"], "no train transcripts of update 7"),
        (["--which", "../../etc/passwd"], "--which must be eval_before, eval_after, train, eval"),
        (["--which", "eval_before", "--update", "0"], "--update 0 picks among --which train or --which eval"),
    ],
)
def test_marft_show_refuses_what_the_run_does_not_hold_in_one_line(run_with_samples, capsys, args, message):
    assert cli(["show", str(run_with_samples), *args]) == 2
    assert message in one_line(capsys)


def test_marft_show_escapes_the_model_text_of_a_training_sample(run_with_samples, capsys):
    line = training_line(30, agent="actor_0\x1b[2K", prompt="Problem \x1b]0;pwned\x07\nline two", response="\\boxed{7}\x1b[8m\r")
    (run_with_samples / "samples" / "train_update_000030.jsonl").write_text(json.dumps(line) + "\n")
    (run_with_samples / "samples" / "eval_update_000030\x1b[2J.jsonl").write_text("")
    assert cli(["show", str(run_with_samples), "--which", "train"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\r")
    assert "learner, actor_0\\x1b[2K: advantage_mean=0.25" in out
    assert "[prompt]\nProblem \\x1b]0;pwned\\x07\nline two\n[response]\n\\boxed{7}\\x1b[8m\\x0d" in out
    assert cli(["show", str(run_with_samples), "--list"]) == 0  # a file name is text from the folder too
    assert "eval_update_000030\\x1b[2J" in (out := capsys.readouterr().out) and "\x1b" not in out


def test_a_training_line_with_a_field_of_the_wrong_type_is_named(tmp_path):
    bad = training_line(0)
    bad["steps"][0]["prompt"] = ["not", "text"]
    with pytest.raises(ValueError, match=r"steps\[0\]\.prompt' must be a string"):
        check_transcript(bad, "f:1")
    with pytest.raises(ValueError, match="return_to_go"):
        check_transcript({**training_line(0), "steps": [{**training_line(0)["steps"][0], "return_to_go": "1"}]}, "f:1")
    (tmp_path / "t.jsonl").write_text(json.dumps(training_line(0)) + "\n")  # a sample copied out of its run
    assert "[prompt]\n2+2?" in show(tmp_path / "t.jsonl")


@pytest.mark.parametrize(
    "override, needle", [("log.transcripts_every=-1", "log.transcripts_every"), ("log.transcripts_episodes=0", "log.transcripts_episodes")]
)
def test_bad_transcript_settings_are_one_line(override, needle):
    with pytest.raises(ConfigError, match=needle):
        validate(load(overrides=[override]))


class FakeTable:
    def __init__(self, columns, data):
        self.columns, self.data = columns, data


class FakeRun:
    """What a W&B run is told: each ``log`` call with its step."""

    id = "fake-run"

    def __init__(self):
        self.logged, self.summary = [], {}

    def log(self, data, step):
        self.logged.append((step, data))

    def finish(self, exit_code=0):
        self.exit_code = exit_code


@pytest.fixture
def fake_wandb(monkeypatch):
    run = FakeRun()
    module = types.ModuleType("wandb")
    module.Table, module.init, module.login = FakeTable, lambda **kwargs: run, lambda **kwargs: None
    monkeypatch.setitem(sys.modules, "wandb", module)
    monkeypatch.setenv("WANDB_MODE", "offline")
    return run


def test_the_tracker_gets_each_sample_as_a_table_at_its_update(tiny_model_dir, tmp_path, paid, fake_wandb):
    run = tmp_path / "run"
    config = tiny_config(tiny_model_dir, run, wandb=True)
    train(config, progress=False, quiet=True)
    steps = [step for step, _ in fake_wandb.logged]
    assert steps == sorted(steps)  # W&B drops a row logged at an earlier step
    tables = {(step, key): value for step, data in fake_wandb.logged for key, value in data.items() if key.endswith("/transcripts")}
    for update in (0, 1):
        table = tables[(update, "train/transcripts")]
        written = lines(run / "samples" / f"train_update_{update:06d}.jsonl")
        assert table.columns == TRAIN_TRANSCRIPT_COLUMNS and table.data == train_transcript_rows(written)
        assert [row[7] for row in table.data] == [s["response"] for t in written for s in t["steps"]]
    table = tables[(0, "eval/transcripts")]  # the evaluation after update 1, in update 0's row with its eval/accuracy
    assert table.columns == TRANSCRIPT_COLUMNS
    assert [row[6] for row in table.data] == [s["action"] for t in lines(run / "samples" / "eval_update_000001.jsonl") for s in t["steps"]]
    assert "eval/accuracy" in next(data for step, data in fake_wandb.logged if step == 0 and "train/solved" in data)
