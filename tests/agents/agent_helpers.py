"""Helpers shared by the agent tests: hand-made episodes and a short end-to-end training run."""

import json
from pathlib import Path

import torch

from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.training.config import TrainConfig
from marft_agents.training.trainer import train
from marft_envs.outcomes import SHARED_REWARD


def base_args(model_dir, run_dir) -> list[str]:
    """The ``marft train`` arguments of a short run on ``model_dir`` (2 updates, a checkpoint each), into ``run_dir``."""
    return [
        f"model={model_dir}",
        f"run_dir={run_dir}",
        "updates=2",
        "episodes_per_update=4",
        "eval_episodes=2",
        "eval_rounds=0",
        "eval_every=0",
        "checkpoint_every=1",
        "max_new_tokens=4",
        "marft.minibatch_size=4",
        "threads=1",
    ]


def one_line(capsys) -> str:
    """What the command printed to stderr, checked to be one line with no traceback."""
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def episode(index: int, rounds: list[list[tuple[str, float]]]) -> Episode:
    """An episode from ``rounds`` of ``(agent, reward)`` in acting order (no tokens needed for the maths)."""
    steps = []
    for t, acts in enumerate(rounds):
        for k, (agent, r) in enumerate(acts):
            steps.append(
                AgentStep(
                    episode=index,
                    round=t,
                    agent=agent,
                    prompt=[],
                    response=[],
                    token_logps=torch.zeros(0),
                    text="",
                    reward=r,
                    round_end=k == len(acts) - 1,
                )
            )
    steps[-1].done = True
    return Episode(index=index, steps=steps, solved=False)


def plant_rewards(episodes: list[Episode]) -> list[Episode]:
    """Pay every other episode's last round the team reward 1 (each agent, as shared credit), in place.

    A random tiny model earns nothing, and an update whose returns are all equal takes no policy step;
    the update's mechanics are tested on a batch whose returns differ.
    """
    for k, e in enumerate(episodes):
        if k % 2:
            last = e.steps[-1].round
            for s in e.steps:
                if s.round == last:
                    s.reward, s.info = 1.0, {**s.info, SHARED_REWARD: 1.0}
    return episodes


def train_two_updates(env_id: str, env_kwargs: dict, model_dir: Path, run_dir: Path, *, episodes_per_update: int, eval_rounds: int) -> dict:
    """Two MARFT updates of a tiny model on ``env_id``; checks the summary and metrics, returns the summary."""
    config = TrainConfig(
        env=env_id,
        env_kwargs=env_kwargs,
        model=str(model_dir),
        run_dir=str(run_dir),
        updates=2,
        episodes_per_update=episodes_per_update,
        eval_episodes=2,
        eval_rounds=eval_rounds,
        max_new_tokens=6,
        checkpoint_every=0,
        threads=1,
        seed=0,
    )
    config.algo_args.minibatch_size = 8
    summary = train(config, progress=False, quiet=True)
    assert summary["env"] == env_id and summary["updates"] == 2
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2 and all(0.0 <= m["train/solved"] <= 1.0 for m in metrics)
    assert 0.0 <= summary["eval_after"]["accuracy"] <= 1.0
    return summary
