"""Config fields carry their range (``marft_agents/settings/fields.py``): shipped and plugin configs are checked alike."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from marft_agents import algorithms
from marft_agents.algorithms.base import Learner
from marft_agents.algorithms.grpo import GRPOConfig
from marft_agents.settings.fields import AT_LEAST_ONE, LR, NON_NEGATIVE, POSITIVE, SEED, TEMPERATURE, UNIT, Ranged, check_value, ranged
from marft_agents.training.config import ConfigError, load, validate

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
