"""What a MATH-family env draws: a :class:`Problem`, from a :class:`ProblemSource`.

The sources themselves (the synthetic generator, files, Hub datasets) are in
:mod:`marft_envs.tasks.math.synthetic` and :mod:`marft_envs.tasks.math.problems`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from marft_envs.validation import MAX_HELDOUT


@dataclass(frozen=True)
class Problem:
    """One problem: the question shown to the agents and its gold final answer."""

    question: str
    answer: str  # gold final answer, LaTeX-style ("38", "-5", "\\frac{7}{3}")
    solution: str = ""  # worked solution; for synthetic ones, one "expression=value" step per line
    level: int | None = None
    source: str = ""  # "synthetic", "math", "gsm8k", or a file/dataset name
    uid: str = ""  # stable id


class ProblemSource(ABC):
    """Where MATH-family envs get their problems."""

    name: str = ""
    levels: tuple[int, ...] = ()
    """The difficulty levels :meth:`sample_at` can draw from, easiest first; empty (the default): none."""
    max_heldout: int = MAX_HELDOUT
    """The largest ``n`` :meth:`heldout` takes (a larger one is refused at once, in one line)."""

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Problem:
        """One problem; all randomness from ``rng`` (the env's ``self.np_random``)."""

    @abstractmethod
    def heldout(self, n: int, seed: int = 0) -> list[Problem]:
        """A deterministic evaluation set of (up to) ``n`` distinct problems; ``n`` in [0, :attr:`max_heldout`]."""

    def sample_at(self, rng: np.random.Generator, level: int) -> Problem:
        """One problem of difficulty ``level`` (one of :attr:`levels`); all randomness from ``rng``."""
        raise ValueError(
            f"{self.name or type(self).__name__} has no difficulty levels; "
            "use a source that has (e.g. 'synthetic' or a MATH file with a level column)"
        )
