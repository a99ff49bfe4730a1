"""Config fields carry their range or their choices (``marft_agents/settings/fields.py``): shipped and plugin configs are checked alike."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from marft_agents import algorithms
from marft_agents.algorithms.base import Learner
from marft_agents.algorithms.grpo import GRPOConfig
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.algorithms.ppo_settings import ChainSettings
from marft_agents.algorithms.sequential import SequentialConfig
from marft_agents.settings.fields import (
    AT_LEAST_ONE,
    LR,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    TEMPERATURE,
    UNIT,
    Ranged,
    Spelling,
    check_ranges,
    check_value,
    choice,
    ranged,
    rule_of,
)
from marft_agents.training.config import ConfigError, TrainConfig, describe, load, validate

# (rule, value, accepted?)
TABLE = [
    (POSITIVE, 1e-9, True),
    (POSITIVE, 0, False),
    (POSITIVE, -1, False),
    (NON_NEGATIVE, 0, True),
    (NON_NEGATIVE, -1e-9, False),
    (AT_LEAST_ONE, 1, True),
    (AT_LEAST_ONE, 0.5, False),
    (UNIT, 0.0, True),
    (UNIT, 1.0, True),
    (UNIT, 1.01, False),
    (UNIT, -0.01, False),
    (LR, 3e-4, True),
    (LR, 0.0, False),
    (LR, 1.0, False),
    (TEMPERATURE, 1e-3, True),
    (TEMPERATURE, 9e-4, False),
    (SEED, 0, True),
    (SEED, 2**32 - 1, True),
    (SEED, 2**32, False),
    (SEED, 1.0, False),
    (POSITIVE, None, True),  # None means "off" wherever a field allows it
    (POSITIVE, float("inf"), False),
    (NON_NEGATIVE, float("nan"), False),
]


@pytest.mark.parametrize(("rule", "value", "ok"), TABLE)
def test_each_rule_accepts_and_refuses_the_hand_picked_values(rule, value, ok):
    if ok:
        check_value("x", value, rule)
    else:
        with pytest.raises(ValueError, match=r"^x must be "):
            check_value("x", value, rule)


def test_an_unknown_rule_is_refused_where_the_field_is_written():
    with pytest.raises(ValueError, match="unknown range rule '> 2'"):
        ranged(3, "> 2")


@dataclasses.dataclass
class StepConfig(Ranged):
    """Hyper-parameters of a plugin learner that learns nothing."""

    lr: float = ranged(1e-3, LR)
    """Unused learning rate."""
    horizon: int = ranged(8, AT_LEAST_ONE, "one step at least")
    """Unused horizon."""
    plain: float = -5.0
    """A field without a range: any finite number."""


class Step(Learner):
    """A learner that learns nothing (range test)."""

    def update(self, episodes, update, rng):
        return {}


@pytest.fixture
def plugin():
    algorithms.register("ranged_test", StepConfig, Step)
    yield "ranged_test"
    algorithms._registered.pop("ranged_test", None)


def test_a_plugin_algorithms_out_of_range_field_is_refused_in_one_line(plugin):
    validate(load(overrides=[f"algo={plugin}", f"{plugin}.lr=1e-2", f"{plugin}.plain=-9"]))  # in range: fine
    with pytest.raises(ConfigError) as err:
        validate(load(overrides=[f"algo={plugin}", f"{plugin}.horizon=0"]))
    assert str(err.value) == "ranged_test.horizon must be >= 1 (one step at least), got 0"
    with pytest.raises(ConfigError, match=r"^ranged_test.lr must be in \(0, 1\), got 2.0$"):
        validate(load(overrides=[f"algo={plugin}", f"{plugin}.lr=2"]))


def test_a_ranged_dataclass_checks_itself_when_built():
    with pytest.raises(ValueError, match=r"^StepConfig.horizon must be >= 1 \(one step at least\), got 0$"):
        StepConfig(horizon=0)
    with pytest.raises(ValueError, match=r"^GRPOConfig.group_size must be >= 1, got 0$"):
        GRPOConfig(group_size=0)
    assert StepConfig(plain=-1.0).plain == -1.0


def test_the_cli_refuses_a_plugin_field_in_one_line(tmp_path):
    (tmp_path / "my_algo.py").write_text(
        "import dataclasses\n"
        "from marft_agents import algorithms\n"
        "from marft_agents.algorithms.base import Learner\n"
        "from marft_agents.settings.fields import POSITIVE, ranged\n\n"
        "@dataclasses.dataclass\n"
        "class C:\n"
        '    """Config."""\n\n'
        "    beta: float = ranged(0.1, POSITIVE)\n"
        '    """A weight."""\n\n'
        "class L(Learner):\n"
        '    """Learns nothing."""\n\n'
        "    def update(self, episodes, update, rng):\n"
        "        return {}\n\n"
        "algorithms.register('mine', C, L)\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "marft_agents.cli",
            "train",
            "--import",
            "my_algo",
            "algo=mine",
            "mine.beta=-1",
            f"run_dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "marft train: error: mine.beta must be > 0, got -1.0"
    assert not (tmp_path / "run").exists()


# -- choices travel with their fields too ------------------------------------------------------------

COLOURS = ("red", "green")


@pytest.mark.parametrize(
    ("value", "ok"), [("red", True), ("green", True), (None, True), ("blue", False), ("", False), (True, False), (0, False)]
)
def test_a_choice_accepts_only_its_options(value, ok):
    if ok:
        check_value("x", value, COLOURS)
    else:
        with pytest.raises(ValueError) as err:
            check_value("x", value, COLOURS, "paint")
        assert str(err.value) == f"x must be one of ['red', 'green'] (paint), got {value!r}"


def test_a_choice_field_carries_its_options_and_refuses_a_default_outside_them():
    @dataclasses.dataclass
    class Paint(Ranged):
        """A config with one choice."""

        colour: str = choice("red", COLOURS, "the two we have")
        """The colour."""

    assert rule_of(Paint, "colour") == (COLOURS, "the two we have")
    assert Paint(colour="green").colour == "green"
    with pytest.raises(ValueError, match=r"^Paint.colour must be one of \['red', 'green'\] \(the two we have\), got 'blue'$"):
        Paint(colour="blue")
    with pytest.raises(ValueError, match=r"^choice default 'blue' must be one of the options \['red', 'green'\]$"):
        choice("blue", COLOURS)


def test_a_config_with_a_bogus_choice_fails_where_it_is_built():
    with pytest.raises(ValueError, match=r"^GRPOConfig.grouping must be one of \['problem', 'agent_round', 'tree'\], got 'bogus'$"):
        GRPOConfig(grouping="bogus")
    with pytest.raises(ValueError, match=r"^ChainSettings.logp_reduction must be one of \['sum', 'mean'\], got 'max'$"):
        MARFTConfig(logp_reduction="max")
    with pytest.raises(ValueError, match=r"^SequentialConfig.order must be one of \['random', 'fixed'\], got 'bogus'$"):
        SequentialConfig(order="bogus")
    config = ChainSettings()
    config.sequential.order = "bogus"  # set after construction: the nested section is checked with its parent
    with pytest.raises(ValueError, match=r"^marft.sequential.order must be one of \['random', 'fixed'\], got 'bogus'$"):
        check_ranges(config, "marft.")


FREE_TEXT = {"env", "model", "algo", "run_dir", "distributed.address", "distributed.temp_dir", "log.project", "log.run_name"}
"""String keys that name things (an env id, a path, a host, a W&B project) rather than pick one of a few values."""


@pytest.mark.parametrize("algo", list(algorithms.BUILTIN))
def test_every_shipped_string_key_but_names_and_paths_is_a_choice(algo):
    config = TrainConfig(algo=algo)
    strings = {key for key, default, _ in describe(algo) if isinstance(default, str)}
    unchecked = set()
    for key in strings:
        owner, name = config, key
        while "." in name:
            head, name = name.split(".", 1)
            owner = owner.algo_args if head == algo else getattr(owner, head)
        if not isinstance(rule_of(type(owner), name)[0], (tuple, Spelling)):  # choices, or spellings (device: cuda:N)
            unchecked.add(key)
    assert unchecked == FREE_TEXT & strings


# -- a plugin's subclass that redefines an inherited field keeps the inherited check -----------------


@dataclasses.dataclass
class MyMARFTConfig(MARFTConfig):
    """MARFT's settings with other defaults, the way a plugin might write them."""

    clip_eps: float = 0.3
    """Redefined without a range: MARFT's (> 0) still holds."""
    logp_reduction: str = "mean"
    """Redefined without choices: MARFT's still hold."""
    gamma: float = ranged(0.5, NON_NEGATIVE)
    """Redefined with a rule of its own: it replaces MARFT's [0, 1]."""


class MyMARFT(MARFT):
    """MARFT under another name (inherited-check test)."""


@pytest.fixture
def myalgo():
    algorithms.register("myalgo", MyMARFTConfig, MyMARFT)
    yield "myalgo"
    algorithms._registered.pop("myalgo", None)


def test_a_redefined_field_keeps_the_inherited_check_unless_it_declares_its_own(myalgo):
    assert rule_of(MyMARFTConfig, "clip_eps") == (POSITIVE, None)
    assert rule_of(MyMARFTConfig, "gamma") == (NON_NEGATIVE, None)
    validate(load(overrides=["algo=myalgo", "myalgo.gamma=2", "myalgo.clip_eps=0.1", "myalgo.logp_reduction=sum"]))
    with pytest.raises(ConfigError) as err:
        validate(load(overrides=["algo=myalgo", "myalgo.clip_eps=-1"]))
    assert str(err.value) == "myalgo.clip_eps must be > 0, got -1.0"
    with pytest.raises(ConfigError, match=r"^myalgo.logp_reduction must be one of \['sum', 'mean'\], got 'max'$"):
        validate(load(overrides=["algo=myalgo", "myalgo.logp_reduction=max"]))
    with pytest.raises(ValueError, match=r"^MyMARFTConfig.clip_eps must be > 0, got -1$"):
        MyMARFTConfig(clip_eps=-1)
    assert MyMARFTConfig(gamma=2.0).gamma == 2.0
