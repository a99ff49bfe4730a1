"""Spaces for text environments: observations and actions are strings.

Importing this module (``import marft_envs`` does) also teaches Gymnasium's vector utilities to
iterate over a batch of :class:`TextSpace` values, which Gymnasium has for no text space; batching,
concatenating and empty batches of text it already has (tuples of strings). The registration is on
our own class only: Gymnasium's ``Text`` is left as it is. This is what lets SuperSuit's
``pettingzoo_env_to_vec_env_v1`` and ``concat_vec_envs_v1(..., num_cpus=0)`` carry text.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Iterator
from typing import Any

from gymnasium import spaces
from gymnasium.vector.utils import iterate

# What `sample()` draws from: printable ASCII. Membership accepts any character (see TextSpace).
PRINTABLE = string.printable


class TextSpace(spaces.Text):
    """Any Unicode string up to ``max_length`` characters; samples are short printable-ASCII strings.

    Gymnasium's ``Text`` only contains strings over its charset, but an LLM may emit any character
    and a MATH problem may contain any symbol, so membership accepts every character. Sampling keeps
    to printable ASCII and caps the length at ``sample_max_length`` so that checkers stepping with
    random actions stay fast.
    """

    def __init__(self, max_length: int = 1 << 20, *, sample_max_length: int = 64, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=0, charset=PRINTABLE, seed=seed)
        self.sample_max_length = min(sample_max_length, max_length)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is None and probability is None:
            length = int(self.np_random.integers(0, self.sample_max_length + 1))
            return super().sample(mask=(length, None))
        return super().sample(mask=mask, probability=probability)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"


def observation_space() -> spaces.Dict:
    """An agent's observation: its standing ``instructions`` (role prompt) and the ``text`` it sees now.

    A ``Dict`` rather than a bare ``Text``: PettingZoo's ``api_test`` cannot handle a bare text
    observation, and the split lets a policy put instructions in a system message.
    """
    return spaces.Dict({"instructions": TextSpace(), "text": TextSpace()})


def action_space() -> TextSpace:
    """An agent's action: any string (a whole generated response)."""
    return TextSpace()


@iterate.register(TextSpace)
def _iterate_text(space: TextSpace, items: Iterable[str]) -> Iterator[str]:
    """The strings of a batch of text (a tuple or list of strings, as ``concatenate`` makes)."""
    if isinstance(items, str):  # iterating a str would yield its characters as a batch of one-char texts
        raise TypeError(f"a batch of {space!r} values is a sequence of strings, got a single str: wrap it in a list")
    return iter(items)
