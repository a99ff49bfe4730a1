"""A non-finite loss stops the update before any weight changes; nothing of it is saved."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from agent_helpers import base_args, plant_rewards

import marft_envs
from marft_agents.algorithms.losses import NonFiniteLossError
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.cli import main as cli
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs import checkpoint as ckpt


def nan_scores(policy):
    """Make every score NaN, as a diverged model's would be."""
    score = policy.score

    def nan_score(*args, **kwargs):
        logp, entropy, mask = score(*args, **kwargs)
        return logp * float("nan"), entropy, mask

    policy.score = nan_score


def test_a_nan_loss_raises_naming_the_metric_and_changes_no_weight(tiny_model_dir):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = MARFT(policy, MARFTConfig(minibatch_size=4), temperature=1.0)
    episodes = plant_rewards(RolloutEngine(policy, Sampling(1.0, 4)).collect(envs, range(4)))  # returns that differ: a step
    before = {n: p.detach().clone() for n, p in policy.base.named_parameters()}
    nan_scores(policy)
    with pytest.raises(NonFiniteLossError, match=r"reasoner_0/loss is nan: the update stopped"):
        algo.update(episodes, 0, np.random.default_rng(0))
    assert all(torch.equal(before[n], p) for n, p in policy.base.named_parameters())


def test_a_run_whose_loss_turns_nan_exits_1_with_one_line_and_keeps_its_last_checkpoint(tiny_model_dir, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    # tests/agents/signal_env.py: returns differ, so the update takes a step; the updates= given below win
    args = ["env=signal_env:ParityChain", *base_args(tiny_model_dir, run)]
    assert cli(["train", "--no-progress", *args, "updates=1"]) == 0
    saved = ckpt.load_checkpoint(ckpt.latest_checkpoint(run / "checkpoints"))
    capsys.readouterr()  # the first run's output (its zero-reward warning)

    original = LaMASPolicy.score

    def nan_score(self, *a, **kw):
        logp, entropy, mask = original(self, *a, **kw)
        return logp * float("nan"), entropy, mask

    monkeypatch.setattr(LaMASPolicy, "score", nan_score)
    assert cli(["train", "--resume", "--no-progress", *args, "updates=2"]) == 1
    err = capsys.readouterr().err.strip()
    assert "loss is nan" in err and "the last checkpoint is intact" in err and "\n" not in err
    latest = ckpt.latest_checkpoint(run / "checkpoints")
    assert latest.name == "update_000001.pt"
    for adapter, weights in ckpt.load_checkpoint(latest)["algo"]["adapters"].items():
        assert all(torch.equal(w, saved["algo"]["adapters"][adapter][k]) for k, w in weights.items())
