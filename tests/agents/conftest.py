"""A tiny random model on disk, shared by the agent tests (built in a second, never downloaded)."""

import json
from importlib import resources

import numpy as np
import pytest
import torch

from marft_envs.tasks.math.synthetic import SyntheticMath


def corpus(n: int = 200) -> list[str]:
    rng = np.random.default_rng(0)
    source = SyntheticMath()
    texts = []
    for _ in range(n):
        p = source.sample(rng)
        texts += [p.question, p.solution, f"\\boxed{{{p.answer}}}"]
    profile = json.loads(resources.files("marft_envs.tasks.math").joinpath("profiles/default.json").read_text())
    return texts + list(profile["roles"].values())


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A randomly initialised ~50k-parameter Llama with the project's tokenizer, saved to disk."""
    from marft_agents.models.tiny import build_model, build_tokenizer

    torch.manual_seed(0)
    tokenizer = build_tokenizer(corpus(), vocab_size=400)
    model = build_model(tokenizer, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    out = tmp_path_factory.mktemp("tiny-random")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir, tmp_path_factory):
    """A finished short ``marft train`` run of the tiny model (agent_helpers.base_args), one per test module."""
    from agent_helpers import base_args

    from marft_agents.cli import main as cli

    run = tmp_path_factory.mktemp("finished") / "run"
    assert cli(["train", "--no-progress", *base_args(tiny_model_dir, run)]) == 0
    return run


@pytest.fixture
def run_copy(finished_run, tmp_path):
    """A copy of :func:`finished_run` that a test may change."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy
