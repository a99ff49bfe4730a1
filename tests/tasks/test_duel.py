"""marft/NumberDuel-v0: the number a player named, the zero-sum rewards, and one played round."""

import pytest

import marft_envs
from marft_envs.outcomes import ANSWER, SOLVED, reward_structure
from marft_envs.tasks.games.duel import duel_rewards, named_number


@pytest.mark.parametrize(
    "text, number",
    [
        ("\\boxed{42}", 42),
        ("I pick 7, no, 9", 9),
        ("3 + 4 = 7 so \\boxed{12} not 15", 12),  # the boxed one wins over a later number
        ("\\boxed{ 5 }", 5),
        ("nothing", None),
        ("", None),
        ("-3", -3),
        ("1" * 13, None),  # too long to be a number a player names
    ],
)
def test_named_number(text, number):
    assert named_number(text) == number


@pytest.mark.parametrize(
    "a, b, cap, rewards",
    [
        (50, 40, 50, (1.0, -1.0)),  # the cap itself is valid and wins
        (40, 50, 50, (-1.0, 1.0)),
        (51, 3, 50, (-1.0, 1.0)),  # over the cap loses to any valid number
        (3, None, 50, (1.0, -1.0)),  # a valid number beats no number
        (None, None, 50, (0.0, 0.0)),
        (60, 70, 50, (0.0, 0.0)),  # both invalid: a tie
        (7, 7, 50, (0.0, 0.0)),
        (0, 1, 50, (-1.0, 1.0)),  # 0 is not from 1 to the cap
        (-5, 2, 50, (-1.0, 1.0)),
    ],
)
def test_duel_rewards(a, b, cap, rewards):
    assert duel_rewards(a, b, cap) == rewards
    assert sum(duel_rewards(a, b, cap)) == 0.0  # zero-sum in every case


def test_a_round_pays_opponents_plus_and_minus_one_and_says_who_won():
    env = marft_envs.make("marft/NumberDuel-v0")
    env.reset(seed=0)
    assert reward_structure(env) == "zero_sum" and env.ready_agents() == ["player_0", "player_1"]
    cap = env.cap
    assert f"from 1 to {cap}" in env.observe("player_0")["text"]
    result = env.step({"player_0": f"\\boxed{{{cap}}}", "player_1": "\\boxed{1}"})
    assert result.rewards == {"player_0": 1.0, "player_1": -1.0} and not env.agents
    assert result.infos["player_0"][SOLVED] and result.infos["player_0"][ANSWER] == cap and result.infos["player_1"][ANSWER] == 1


@pytest.mark.parametrize("kwargs", [{"cap_low": 0}, {"cap_low": 20, "cap_high": 10}, {"max_cycles": 0}, {"rounds": 2.5}])
def test_bad_options_are_one_clear_error(kwargs):
    with pytest.raises(ValueError, match="NumberDuel needs|must be a positive integer"):
        marft_envs.make("marft/NumberDuel-v0", **kwargs)


def test_later_rounds_show_what_was_named_and_draw_a_fresh_cap():
    env = marft_envs.make("marft/NumberDuel-v0", rounds=2)
    env.reset(seed=3)
    env.step({"player_0": "\\boxed{4}", "player_1": "no idea"})
    assert env.agents == ["player_0", "player_1"]
    assert "Round 1: you named 4, your opponent None." in env.observe("player_0")["text"]
    assert "Round 1: you named None, your opponent 4." in env.observe("player_1")["text"]
    result = env.step({"player_0": "1", "player_1": "2"})
    assert result.rewards == {"player_0": -1.0, "player_1": 1.0} and not env.agents
