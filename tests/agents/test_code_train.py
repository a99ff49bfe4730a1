"""The trainer runs end to end on the code-repair envs with a tiny random model.

The untrained model's answers are not Python, so the envs score them 0 with a reason, without a
sandbox run; the eval's held-out tasks come from the test split.
"""

import pytest
from agent_helpers import train_two_updates


@pytest.mark.parametrize(
    "env_id, env_kwargs",
    [
        ("marft/CodeRepair-v0", {}),  # locator -> fixer: a dependency graph, the MARFT setting
        pytest.param("marft/CodeRepairVote-v0", {"n_agents": 2}, marks=pytest.mark.slow),
        pytest.param("marft/CodeRepairSolo-v0", {}, marks=pytest.mark.slow),
    ],
)
def test_marft_trains_on_a_code_repair_env(env_id, env_kwargs, tiny_model_dir, tmp_path):
    summary = train_two_updates(env_id, env_kwargs, tiny_model_dir, tmp_path, episodes_per_update=3, eval_rounds=2)
    assert "solved_within_2_attempts_with_feedback" in summary["eval_after"]
