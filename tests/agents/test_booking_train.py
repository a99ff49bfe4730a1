"""The trainer runs end to end on the booking envs with a tiny random model (garbage actions included)."""

import json

import pytest

from marft_agents.config import TrainConfig
from marft_agents.trainer import train


@pytest.mark.parametrize("env_id", [
    "marft/Booking-v0",  # the coordinator-driven graph: the one that exercises the most of the trainer
    pytest.param("marft/BookingFixed-v0", marks=pytest.mark.slow),
    pytest.param("marft/BookingDecPOMDP-v0", marks=pytest.mark.slow),
])
def test_marft_trains_on_a_booking_env(env_id, tiny_model_dir, tmp_path):
    # Two rounds per episode keep the tiny run short; the untrained model emits text that is not a tool
    # call, which the env must turn into error observations (never an exception) until the episode ends.
    config = TrainConfig(env=env_id, env_kwargs={"max_rounds": 2}, model=str(tiny_model_dir), run_dir=str(tmp_path),
                         updates=2, episodes_per_update=2, eval_episodes=2, eval_rounds=0, max_new_tokens=6,
                         checkpoint_every=0, threads=1, seed=0)
    config.marft.minibatch_size = 8
    summary = train(config, progress=False, quiet=True)
    assert summary["env"] == env_id and summary["updates"] == 2
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2 and all(0.0 <= m["train/solved"] <= 1.0 for m in metrics)
    assert 0.0 <= summary["eval_after"]["accuracy"] <= 1.0
