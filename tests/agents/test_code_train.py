"""The trainer runs end to end on the code-repair envs with a tiny random model.

The untrained model's answers are not Python, so the envs score them 0 with a reason, without a
sandbox run; the eval's held-out tasks come from the test split.
"""

import json

import pytest

from marft_agents.config import TrainConfig
from marft_agents.trainer import train


@pytest.mark.parametrize("env_id, env_kwargs", [
    ("marft/CodeRepair-v0", {}),  # locator -> fixer: a dependency graph, the MARFT setting
    pytest.param("marft/CodeRepairVote-v0", {"n_agents": 2}, marks=pytest.mark.slow),
    pytest.param("marft/CodeRepairSolo-v0", {}, marks=pytest.mark.slow),
])
def test_marft_trains_on_a_code_repair_env(env_id, env_kwargs, tiny_model_dir, tmp_path):
    config = TrainConfig(env=env_id, env_kwargs=env_kwargs, model=str(tiny_model_dir), run_dir=str(tmp_path),
                         updates=2, episodes_per_update=3, eval_episodes=2, eval_rounds=2, max_new_tokens=6,
                         checkpoint_every=0, threads=1, seed=0)
    config.marft.minibatch_size = 8
    summary = train(config, progress=False, quiet=True)
    assert summary["env"] == env_id and summary["updates"] == 2
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2 and all(0.0 <= m["train/solved"] <= 1.0 for m in metrics)
    assert 0.0 <= summary["eval_after"]["accuracy"] <= 1.0
    assert "solved_within_2_attempts_with_feedback" in summary["eval_after"]
