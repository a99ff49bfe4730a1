"""``env_kwargs`` checked against the env's constructor: what each option takes, and the one line when it does not."""

from __future__ import annotations

import pytest

from marft_agents.training.config import ConfigError
from marft_agents.training.env_options import check_env_kwargs

JIGSAW, CHAIN = "marft/MathJigsaw-v0", "marft/MathChain-v0"

ACCEPTED = [
    # levels: int | tuple[int, ...] = (1, 2, 3): one level, or several as a tuple or as JSON/TOML's list
    (JIGSAW, {"levels": 1}),
    (JIGSAW, {"levels": (1, 2)}),
    (JIGSAW, {"levels": [1, 2]}),
    (JIGSAW, {"levels": None}),  # null: the env's default
    (CHAIN, {"rounds": 3}),
    (CHAIN, {"format_reward": 1}),  # a float option takes an int
    (CHAIN, {"format_reward": 0.1}),
]

REFUSED = [
    (JIGSAW, {"levels": "1"}, "env_kwargs.levels must be of type tuple or int (its default is (1, 2, 3)), got '1'"),
    (JIGSAW, {"levels": True}, "env_kwargs.levels must be of type tuple or int"),  # a bool is not a level
    (JIGSAW, {"levels": 1.0}, "env_kwargs.levels must be of type tuple or int"),
    (CHAIN, {"rounds": "abc"}, "env_kwargs.rounds must be of type int (its default is 1), got 'abc'"),
    (CHAIN, {"rounds": [3]}, "env_kwargs.rounds must be of type int"),
    (CHAIN, {"format_reward": "0.1"}, "env_kwargs.format_reward must be a number"),
    (CHAIN, {"rouns": 3}, "did you mean 'rounds'?"),
]


@pytest.mark.parametrize("env_id, kwargs", ACCEPTED, ids=[str(k) for _, k in ACCEPTED])
def test_an_option_of_a_type_the_env_takes_is_accepted(env_id, kwargs):
    check_env_kwargs(env_id, kwargs)


@pytest.mark.parametrize("env_id, kwargs, message", REFUSED, ids=[str(k) for _, k, _ in REFUSED])
def test_an_option_of_another_type_is_one_line_naming_it(env_id, kwargs, message):
    with pytest.raises(ConfigError) as caught:
        check_env_kwargs(env_id, kwargs)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_levels_the_docs_pass_make_the_env_they_name():
    """``env_kwargs.levels=1`` (docs/envs/jigsaw.md) is accepted and plays level 1 only."""
    import marft_envs

    check_env_kwargs(JIGSAW, {"levels": 1})
    env = marft_envs.make(JIGSAW, levels=1)
    assert env.difficulties() == (1,)
