"""The algorithms' layout: siblings over one base, one config section per run, a registry."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import marft_agents
from marft_agents import algorithms
from marft_agents.algorithms.base import Learner
from marft_agents.cli import main as cli
from marft_agents.training.config import ConfigError, TrainConfig, describe, field_docs, from_dict, load, to_dict

PACKAGE = Path(marft_agents.__file__).parent
SHARED = (
    *("__init__", "base", "ppo_settings", "advantages", "losses", "tis", "critic", "sequential", "prepare", "returns"),
    *("action_ppo", "token_ppo", "data_parallel", "optimizers"),
)
"""The shared base and the shared pieces beside it: every algorithm may import these, and no other sibling."""
ALGORITHM_FILES = sorted(p for p in (PACKAGE / "algorithms").glob("*.py") if p.stem not in SHARED)


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; ``from x import y`` gives ``x`` and ``x.y``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return out


@pytest.mark.parametrize("path", ALGORITHM_FILES, ids=lambda p: p.name)
def test_an_algorithm_imports_no_other_algorithm_module(path):
    siblings = {f"marft_agents.algorithms.{p.stem}" for p in ALGORITHM_FILES}
    own = f"marft_agents.algorithms.{path.stem}"
    assert not (imported_modules(path) & siblings) - {own}


def imported_names(path: Path) -> set[str]:
    """The names ``path`` imports with ``from x import name``."""
    return {a.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom) for a in node.names}


def called_names(path: Path) -> set[str]:
    """The names of everything ``path`` calls (``f(...)`` and ``x.f(...)`` both give ``f``)."""
    calls = [n.func for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
    return {f.id if isinstance(f, ast.Name) else f.attr for f in calls if isinstance(f, (ast.Name, ast.Attribute))}


def test_the_base_takes_no_callbacks():
    # The base hands data to the algorithm and takes its optimizer steps; it never calls it back.
    base = PACKAGE / "algorithms" / "base.py"
    args = [
        a
        for f in ast.walk(ast.parse(base.read_text()))
        if isinstance(f, ast.FunctionDef)
        for a in (*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs)
    ]
    assert args and not [a.arg for a in args if a.annotation is not None and "Callable" in ast.unparse(a.annotation)]
    assert not [m for m in imported_modules(base) if m.endswith(".Callable")]


@pytest.mark.parametrize("path", [p for p in ALGORITHM_FILES if p.name not in ("base.py", "__init__.py")], ids=lambda p: p.name)
def test_each_algorithm_writes_its_own_loss_or_calls_a_shared_step_by_module_name(path):
    calls = called_names(path)
    own = {"minibatches", "apply"} <= calls and calls & {"ppo_clip_loss", "grpo_loss"}
    # the action- and token-level PPO families share one written-once step each, called as action_ppo.step / token_ppo.step
    shared = {"action_ppo", "token_ppo"} & imported_names(path) and "step" in calls
    assert own or shared, path.name


@pytest.mark.parametrize("module", ["action_ppo", "token_ppo"])
def test_the_shared_ppo_steps_are_built_over_the_base_minibatches(module):
    calls = called_names(PACKAGE / "algorithms" / f"{module}.py")
    assert {"minibatches", "apply", "ppo_clip_loss"} <= calls


@pytest.mark.parametrize("name", list(algorithms.BUILTIN))
def test_no_update_logic_in_a_base_class(name):
    # Compose, don't inherit: between a learner and Learner stands no shared class, so its update and every method
    # it calls on itself are written in its own module (MAPPO may extend IPPO beside it), and Learner defines no update.
    _, learner_class = algorithms.lookup(name)
    tower = [k for k in learner_class.__mro__ if issubclass(k, Learner) and k is not Learner]
    assert {k.__module__ for k in tower} == {learner_class.__module__}, [k.__qualname__ for k in tower]
    assert learner_class.update.__module__ == learner_class.__module__
    assert getattr(Learner.update, "__isabstractmethod__", False)


def test_the_base_module_holds_the_protocol_and_no_other_learner_class():
    tree = ast.parse((PACKAGE / "algorithms" / "base.py").read_text())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    learners = [c.name for c in classes if any(ast.unparse(b) in ("ABC", "Learner") for b in c.bases)]
    assert learners == ["Learner"]
    methods = {f.name for c in classes if c.name == "Learner" for f in c.body if isinstance(f, ast.FunctionDef)}
    protocol = {"__init__", "check_env", "check_data_parallel", "learned", "collector", "before_collect", "update"}
    assert methods <= protocol | {"state_dict", "load_state_dict"}, methods - protocol


def test_every_registered_learner_subclasses_the_base_and_has_a_dataclass_config():
    for name in algorithms.names():
        config_class, learner_class = algorithms.lookup(name)
        assert dataclasses.is_dataclass(config_class) and issubclass(learner_class, Learner), name
        docs = field_docs(config_class)
        assert all(docs.get(f.name) for f in dataclasses.fields(config_class)), f"{name}: a field without a docstring"


def test_a_config_holds_only_the_chosen_algorithms_section():
    config = load(overrides=["algo=grpo", "grpo.group_size=2"])
    saved = to_dict(config)
    assert saved["grpo"]["group_size"] == 2
    assert not set(saved) & (set(algorithms.names()) - {"grpo"}) and "algo_args" not in saved
    assert from_dict(saved).algo_args.group_size == 2  # round trip
    # the algorithm may come after its keys, on the command line or in a file
    assert load(overrides=["ppo.lr=1e-3", "algo=ppo"]).algo_args.lr == 1e-3
    assert load(overrides=["marft.lr=1e-3"], algo="marft").algo_args.lr == 1e-3


def test_a_key_of_another_algorithm_is_one_clear_error():
    with pytest.raises(ConfigError, match=r"marft.lr is a key of algo=marft, but this run uses algo=ppo: use ppo.lr"):
        load(overrides=["marft.lr=1e-9"], algo="ppo")
    with pytest.raises(ConfigError, match="unknown algorithm 'nope'"):
        load(overrides=["algo=nope"])
    assert not hasattr(TrainConfig(algo="ppo"), "marft")  # the section is config.algo_args, nothing else


def test_old_run_configs_with_every_section_still_load():
    old = {**to_dict(TrainConfig()), **{n: {} for n in algorithms.names() if n != "marft"}}
    old["grpo"] = {"group_size": 8}
    with pytest.raises(ConfigError, match="is a key of algo=grpo"):
        from_dict(old)
    assert from_dict(old, other_sections="drop").algo == "marft"


def test_cli_refuses_a_key_of_another_algorithm_before_any_work(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli(["train", "--algo", "ppo", "env=marft/MathSolo-v0", "marft.lr=1e-4", f"run_dir={run}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "marft.lr is a key of algo=marft" in err and "\n" not in err
    assert not run.exists()


def test_help_config_lists_the_chosen_algorithms_fields_with_docstrings(capsys):
    assert cli(["train", "--help-config", "--algo", "grpo"]) == 0
    out = capsys.readouterr().out
    assert "grpo.group_size = 4\n    Episodes played per problem" in out
    assert "marft." not in out and "cory." not in out
    keys = [line.split(" = ")[0] for line in out.splitlines() if " = " in line and not line.startswith(("#", " "))]
    assert keys == [k for k, _, _ in describe("grpo")]
    assert all(doc for _, _, doc in describe("grpo")), "every key has a docstring"


def test_a_user_algorithm_registers_and_is_selected_by_name():
    @dataclasses.dataclass
    class NoopConfig:
        """Hyper-parameters of a learner that learns nothing."""

        lr: float = 0.0
        """Unused."""

    class Noop(Learner):
        """A learner that learns nothing (registry test)."""

        def update(self, episodes, update, rng):
            return {}

    algorithms.register("noop_test", NoopConfig, Noop)
    try:
        assert load(overrides=["algo=noop_test", "noop_test.lr=0.5"]).algo_args.lr == 0.5
        with pytest.raises(TypeError, match="must subclass"):
            algorithms.register("bad_test", NoopConfig, object)
    finally:
        algorithms._registered.pop("noop_test", None)
