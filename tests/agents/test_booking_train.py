"""The trainer runs end to end on the booking envs with a tiny random model (garbage actions included)."""

import pytest
from agent_helpers import train_two_updates


@pytest.mark.parametrize(
    "env_id",
    [
        "marft/Booking-v0",  # the coordinator-driven graph: the one that exercises the most of the trainer
        pytest.param("marft/BookingFixed-v0", marks=pytest.mark.slow),
        pytest.param("marft/BookingDecPOMDP-v0", marks=pytest.mark.slow),
    ],
)
def test_marft_trains_on_a_booking_env(env_id, tiny_model_dir, tmp_path):
    # Two rounds per episode keep the tiny run short; the untrained model emits text that is not a tool
    # call, which the env must turn into error observations (never an exception) until the episode ends.
    train_two_updates(env_id, {"max_rounds": 2}, tiny_model_dir, tmp_path, episodes_per_update=2, eval_rounds=0)
