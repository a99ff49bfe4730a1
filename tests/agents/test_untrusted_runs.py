"""Run folders, checkpoints, transcripts and envs that someone crafted (issue 38): one line each, checked early.

Each test fails on the code before the fix: a traceback, a run that says it did what it did not, code
named by a run folder that ran, a file replaced that was not the command's, or a check that came only
after the work. Commands that act on an existing run get a copy of one tiny finished run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from agent_helpers import base_args, one_line

import marft_envs
from marft_agents.cli import main as cli
from marft_agents.runs import checkpoint as ckpt
from marft_agents.training.config import ConfigError, TrainConfig
from marft_agents.training.init_from import load_init_adapters, save_adapters_run
from marft_agents.training.trainer import build_policy, train
from marft_envs import DependencyGraph, FlexEnv, RoundResult


def config_for(model_dir, run_dir, **overrides) -> TrainConfig:
    """A tiny run's config (as test_signal_train's): 3 updates of 4 episodes, dotted keys set."""
    algo = overrides.pop("algo", "marft")
    config = TrainConfig(algo=algo, model=str(model_dir), run_dir=str(run_dir), updates=3, episodes_per_update=4, eval_episodes=2)
    config.eval_rounds, config.max_new_tokens, config.checkpoint_every, config.seed, config.threads = 0, 6, 0, 1, 1
    config.algo_args.minibatch_size = 4
    if algo == "grpo":
        config.algo_args.group_size = 2
    for key, value in overrides.items():
        target = config
        *path, last = key.split(".")
        for part in path:
            target = getattr(target, part)
        setattr(target, last, value)
    return config


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a hash of its content."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(argv: list[str], message: str, capsys, folder: Path | None = None) -> str:
    """``argv`` exits 2 with one line containing ``message``, leaving ``folder`` untouched; returns the line."""
    before = snapshot(folder) if folder else None
    assert cli(argv) == 2
    err = one_line(capsys)
    assert message in err, err
    if folder is not None:
        assert snapshot(folder) == before, "a refused command changed the run folder"
    return err


# -- 3, 16: curriculum levels ------------------------------------------------------------------------


def test_levels_are_checked_and_stored_plain():
    from marft_agents.signal.curriculum import DifficultySampler, check_levels, level_key

    assert check_levels((0, 1.5, "hard"), "env.difficulties()") == (0, 1.5, "hard")
    for levels, message in [
        ((0.0, float("nan")), "which is not finite"),
        ((0, 1, 1), "twice"),
        ((1, True), "twice"),  # True == 1: one level to a dict
        (([0], [1]), "not hashable"),
        ((object(),), "must be plain int, float or str"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_levels(levels, "env.difficulties()")
    from signal_env import Level

    assert [level_key(x) for x in (np.int64(3), np.float32(0.5), Level.HARD, "a")] == [3, 0.5, "Level.HARD", "a"]
    assert all(type(level_key(x)) in (int, float, str) for x in (np.int64(3), np.float32(0.5), Level.HARD))
    sampler = DifficultySampler([Level.EASY, Level.HARD], window=4, low=0.0, high=1.0, floor=0.1)
    assert sampler.state_dict()["levels"] == ["Level.EASY", "Level.HARD"]
    assert set(sampler.metrics()) == {"signal/level_Level.EASY/p", "signal/level_Level.HARD/p"}


@pytest.mark.parametrize(
    "env, message",
    [
        ("signal_env:RaisingLevels", "RaisingLevels.difficulties() failed (RuntimeError: the level table is gone)"),
        ("signal_env:NanLevels", "which is not finite"),
        ("signal_env:DuplicateLevels", "twice"),
        ("signal_env:UnhashableLevels", "not hashable"),
    ],
)
def test_bad_levels_are_refused_before_the_run_folder_is_written(env, message, tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        train(config_for(tiny_model_dir, run, algo="grpo", env=env, **{"signal.curriculum": True}), progress=False, quiet=True)
    assert not run.exists()


def test_a_difficulties_that_raises_does_not_stop_a_run_without_a_curriculum():
    from marft_agents.signal.collection import declared_levels

    env = marft_envs.make("signal_env:RaisingLevels")
    assert declared_levels(env, strict=False) == ()  # the hint that names the curriculum is left out, no more
    with pytest.raises(ConfigError, match="difficulties"):
        declared_levels(env)


@pytest.mark.parametrize("env", ["signal_env:NumpyLevels", "signal_env:EnumLevels"])
def test_every_checkpoint_of_a_curriculum_run_loads_and_resumes(env, tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    overrides = dict(algo="grpo", env=env, checkpoint_every=1, **{"signal.curriculum": True})
    train(config_for(tiny_model_dir, run, **overrides, updates=2), progress=False, quiet=True)
    saved = sorted((run / "checkpoints").glob("update_*.pt"))
    assert len(saved) == 2
    for path in saved:  # what --resume, init_from=RUN and marft eval --run read
        state = torch.load(path, map_location="cpu", weights_only=True)
        assert state["signal"]["curriculum"]["levels"] in ([0, 1], ["Level.EASY", "Level.HARD"])
    summary = train(config_for(tiny_model_dir, run, **overrides, updates=3), resume=True, progress=False, quiet=True)
    assert summary["resumed_from_update"] == 2
    assert [json.loads(line)["update"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]


# -- 17: tree sampling with a branch() that fails ------------------------------------------------------


class Chain(FlexEnv):
    """writer_0 -> judge_0, one round; the team scores 1 when the judge's answer has an even length."""

    metadata = {"name": "tests/BranchChain-v0", "is_parallelizable": False, "render_modes": ["ansi"]}

    def __init__(self, render_mode=None):
        super().__init__(["writer_0", "judge_0"], render_mode=render_mode)

    def reset_task(self, options):
        self.topic = int(self.np_random.integers(1, 10))

    def observe_text(self, agent):
        return f"Write about {self.topic}."

    def round_graph(self):
        return DependencyGraph.from_parents(self.possible_agents, {"judge_0": ["writer_0"]})

    def end_round(self, actions):
        reward = float(len(actions["judge_0"]) % 2 == 0)
        return RoundResult(
            rewards=dict.fromkeys(actions, reward), terminations=dict.fromkeys(actions, True), infos={a: {} for a in actions}
        )


class BranchRaises(Chain):
    def branch(self):
        raise RuntimeError("no copies today")


class BranchNone(Chain):
    def branch(self):
        return None


class BranchUncopyable(Chain):
    def reset_task(self, options):
        super().reset_task(options)
        self.feed = (x for x in range(3))  # a generator: deepcopy cannot copy it


for _cls in (BranchRaises, BranchNone, BranchUncopyable):
    marft_envs.register(f"tests/{_cls.__name__}-v0", _cls)


@pytest.mark.parametrize(
    "env, message",
    [
        ("BranchRaises", "BranchRaises.branch() failed (RuntimeError: no copies today)"),
        ("BranchNone", "BranchNone.branch() returned None"),
        ("BranchUncopyable", "(BranchUncopyable).branch(): its attribute 'feed' (generator) cannot be copied"),
    ],
)
def test_tree_sampling_probes_branch_before_any_work(env, message, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--algo", "grpo", "--no-progress", "grpo.grouping=tree", "model=/nonexistent/model", f"run_dir={run}"]
    assert cli([*argv, "updates=1", "episodes_per_update=4", "grpo.group_size=2", f"env=tests/{env}-v0"]) == 2
    err = one_line(capsys)
    assert "grpo.grouping=tree" in err and message in err, err
    assert not run.exists()  # refused before the model was loaded or a file was written


def test_a_branch_that_fails_mid_run_is_one_line_naming_branch():
    from marft_envs.branching import NotBranchableError, checked_branch

    env = marft_envs.make("tests/BranchNone-v0")
    env.reset(seed=0)
    with pytest.raises(NotBranchableError, match=r"BranchNone.branch\(\) returned None") as err:
        checked_branch(env, "grpo.grouping=tree")
    assert isinstance(err.value, ValueError)  # the CLI's one line and exit 2, not a traceback


# -- 13: init_from on crafted folders -----------------------------------------------------------------


def test_init_from_refuses_crafted_folders_in_one_line(tiny_model_dir, tmp_path):
    source = tmp_path / "source"
    config = config_for(tiny_model_dir, source)
    policy = build_policy(config, ["reasoner_0", "actor_0"])
    save_adapters_run(source, config, policy)
    good = ckpt.load_checkpoint(ckpt.latest_checkpoint(source / "checkpoints"))
    target = config_for(tiny_model_dir, tmp_path / "target", init_from=str(source))

    def crafted(adapters=None, algo=None):
        state = {"algo": algo if algo is not None else {"adapters": adapters}, "config": good["config"]}
        ckpt.save_checkpoint(source / "checkpoints", 1, state)

    for content in ("[]", "null"):
        (source / "config.json").write_text(content)
        with pytest.raises(ConfigError, match="not a run's config"):
            load_init_adapters(target, policy)
    (source / "config.json").write_text(json.dumps(good["config"]))
    crafted(algo=["a list"])
    with pytest.raises(ValueError, match="its 'algo' is list"):
        load_init_adapters(target, policy)
    reasoner = good["algo"]["adapters"]["reasoner_0"]
    name, weight = next(iter(reasoner.items()))
    for bad, message in [
        ({}, "weight .* is missing"),
        (torch.tensor(1.0), "expected a dict of weight names to tensors, got Tensor"),
        (3, "got int"),
        ({**reasoner, name: weight[:1]}, r"is of shape \(1, "),
        ({**reasoner, name: 0.5}, "is float"),
    ]:
        crafted({"reasoner_0": bad, "actor_0": good["algo"]["adapters"]["actor_0"]})
        with pytest.raises(ConfigError, match=message):
            load_init_adapters(target, policy)
    crafted(good["algo"]["adapters"])
    assert load_init_adapters(target, policy)["checkpoint"] == "update_000001.pt"


# -- 14: --resume on crafted checkpoints ---------------------------------------------------------------


def craft_latest(run: Path, **changes) -> Path:
    path = ckpt.latest_checkpoint(run / "checkpoints")
    state = torch.load(path, map_location="cpu", weights_only=True)
    for key, value in changes.items():
        if key.startswith("rng_"):
            state["rng"][key[4:]] = value
        else:
            state[key] = value
    torch.save(state, path)
    return path


@pytest.mark.parametrize(
    "changes, updates, message",
    [
        ({"rng_torch": torch.zeros(3, dtype=torch.uint8)}, 3, "its torch RNG state cannot be restored"),
        ({"rng_torch": "not a state"}, 3, "its torch RNG state cannot be restored"),
        ({"rng_python": (3, (1, 2), None)}, 3, "its python RNG state cannot be restored"),
        ({"rng_numpy": {"bit_generator": "PCG64"}}, 3, "its numpy RNG state cannot be restored"),
        ({"update": "2"}, 3, "its update number '2' is not a whole number"),
        ({"update": 2.5}, 3, "its update number '2.5' is not a whole number"),
        ({"update": 50}, 60, "counts 50 updates, but"),  # metrics.jsonl logs updates 0 and 1 only
        ({}, 1, "was written after update 2, past this run's updates=1"),
        ({"update": 50}, 2, "was written after update 50, past this run's updates=2"),  # used to exit 0
        ({"algo": ["a list"]}, 3, "its 'algo' is list"),
    ],
)
def test_resume_refuses_crafted_checkpoints_naming_them(changes, updates, message, run_copy, tiny_model_dir, capsys):
    path = craft_latest(run_copy, **changes)
    args = [a for a in base_args(tiny_model_dir, run_copy) if not a.startswith("updates=")]
    err = refused(["train", "--resume", "--no-progress", *args, f"updates={updates}"], message, capsys, run_copy)
    assert str(path) in err


def test_resume_refuses_adapters_and_optimizers_that_do_not_fit(run_copy, tiny_model_dir, capsys):
    state = torch.load(ckpt.latest_checkpoint(run_copy / "checkpoints"), map_location="cpu", weights_only=True)
    args = [a for a in base_args(tiny_model_dir, run_copy) if not a.startswith("updates=")]
    for agent in ("reasoner_0", "actor_0"):
        algo = {**state["algo"], "adapters": {**state["algo"]["adapters"], agent: {}}}  # used to resume from untrained weights
        path = craft_latest(run_copy, algo=algo)
        assert str(path) in refused(["train", "--resume", "--no-progress", *args, "updates=3"], "does not fit", capsys, run_copy)
    path = craft_latest(run_copy, algo={**state["algo"], "optimizers": {"reasoner_0": 3, "actor_0": 3}})
    assert str(path) in refused(["train", "--resume", "--no-progress", *args, "updates=3"], "does not fit", capsys, run_copy)


# -- 4: marft eval --run imports nothing a run folder names ---------------------------------------------


def test_eval_of_a_run_does_not_import_its_modules(run_copy, tmp_path, monkeypatch, capsys):
    marker = tmp_path / "ran"
    plugin = tmp_path / "plugin" / "evil_tasks.py"
    plugin.parent.mkdir()
    plugin.write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\nimport marft_envs\nChain = type(marft_envs.make('marft/MathChain-v0'))\n"
    )
    monkeypatch.syspath_prepend(str(plugin.parent))
    config = json.loads((run_copy / "config.json").read_text())
    (run_copy / "config.json").write_text(json.dumps({**config, "imports": [str(plugin)]}))
    assert cli(["eval", "--run", str(run_copy), "--episodes", "1"]) == 0
    assert not marker.exists(), "marft eval --run imported a module the run's config named"

    (run_copy / "config.json").write_text(json.dumps({**config, "env": "evil_tasks:Chain"}))
    refused(["eval", "--run", str(run_copy), "--episodes", "1"], "pass --import evil_tasks if you trust it", capsys)
    assert not marker.exists()
    # the user names the module: then, and only then, it is imported
    assert cli(["eval", "--run", str(run_copy), "--episodes", "1", "--import", "evil_tasks"]) == 0
    assert marker.exists()


# -- 11: marft eval --transcripts checks its file before playing ----------------------------------------


@pytest.fixture
def no_play(monkeypatch):
    """Any evaluation played fails the test: the refusals below must come first."""
    from marft_agents.rollout import evaluation

    def played(*args, **kwargs):
        raise AssertionError("an evaluation was played before the --transcripts path was checked")

    monkeypatch.setattr(evaluation, "evaluate", played)


def test_eval_transcripts_refuses_before_playing(run_copy, tmp_path, no_play, capsys):
    metrics = run_copy / "metrics.jsonl"
    before = metrics.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    (tmp_path / "a_file").write_text("x")
    for target, message in [
        (metrics, "exists: name a new file, or pass --overwrite"),
        (tmp_path / "t.txt", "name a .jsonl file"),
        (link, "is a symbolic link"),
        (tmp_path / "a_file" / "t.jsonl", "is not a folder"),
        (tmp_path, "name a .jsonl file"),
    ]:
        refused(["eval", "--run", str(run_copy), "--episodes", "1", "--transcripts", str(target)], message, capsys)
    assert metrics.read_bytes() == before and not (tmp_path / "elsewhere.jsonl").exists()
    refused(["eval", "--run", str(run_copy), "--transcripts", str(link), "--overwrite"], "is a symbolic link", capsys)


def test_eval_transcripts_overwrite_replaces_the_file(run_copy, tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    out.write_text("old\n")
    assert cli(["eval", "--run", str(run_copy), "--episodes", "1", "--transcripts", str(out), "--overwrite"]) == 0
    assert json.loads(out.read_text().splitlines()[0])["steps"]


# -- 6: marft pretrain --out ------------------------------------------------------------------------------


def test_pretrain_refuses_a_non_empty_folder_and_links_before_any_work(run_copy, tmp_path, capsys):
    before = snapshot(run_copy)
    refused(["pretrain", "--out", str(run_copy), "--max-steps", "1"], "is not empty (a `marft train` run folder)", capsys)
    assert snapshot(run_copy) == before
    out = tmp_path / "model"
    out.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text("keep")
    (out / "config.json").symlink_to(outside)
    refused(["pretrain", "--out", str(out), "--overwrite", "--max-steps", "1"], "is a symbolic link", capsys)
    assert outside.read_text() == "keep"
    (tmp_path / "file").write_text("x")
    refused(["pretrain", "--out", str(tmp_path / "file"), "--max-steps", "1"], "is a file, not a folder", capsys)


def test_pretrain_overwrite_writes_into_a_non_empty_folder(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["pretrain", "--init", "embedded", "--out", str(out), "--max-steps", "1", "--batch-size", "8", "--eval-n", "0"]
    assert cli([*argv, "--no-progress", "--overwrite"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "model.safetensors").is_file()
    assert json.loads((out / "pretrain.json").read_text())["training"]["steps"] == 1
    assert not list(out.glob(".*.tmp"))


# -- 15: marft show on malformed lines ---------------------------------------------------------------------

GOOD = {
    "episode": 0,
    "return": 1.0,
    "solved": True,
    "steps": [{"round": 0, "agent": "solver_0", "reward": 1.0, "reward_components": {}, "observation": {"task": "2+2"}, "action": "4"}],
}


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", ":2: not a JSON transcript"),
        ("[1, 2]", ":2: a list, not a JSON object"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "steps"}), ":2: field 'steps' must be a list"),
        (json.dumps({**GOOD, "return": "high"}), ":2: field 'return' must be a number"),
        (json.dumps({**GOOD, "solved": "yes"}), ":2: field 'solved' must be true, false or null"),
        (json.dumps({**GOOD, "steps": [{**GOOD["steps"][0], "reward": None}]}), ":2: field 'steps[0].reward' must be a number"),
        (json.dumps({**GOOD, "steps": [{**GOOD["steps"][0], "observation": "text"}]}), ":2: field 'steps[0].observation'"),
        (
            json.dumps({**GOOD, "steps": [{k: v for k, v in GOOD["steps"][0].items() if k != "action"}]}),
            ":2: field 'steps[0].action' is missing",
        ),
        ("[" * 100000, ":2: not a JSON transcript"),
    ],
)
def test_show_names_file_line_and_field(line, message, tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    refused(["show", str(path)], f"{path}{message}", capsys)
    assert cli(["show", str(path), "-n", "1"]) == 0  # the first episode is shown without reading the bad line
    assert "=== eval_after, episode 0: solved yes" in capsys.readouterr().out


def test_show_refuses_n_below_one(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(GOOD) + "\n")
    refused(["show", str(path), "-n", "0"], "-n must be at least 1", capsys)
