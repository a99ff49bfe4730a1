"""A private copy of the process's global random state, for libraries that seed ``random`` themselves.

TextArena and GEM seed Python's ``random`` (GEM also NumPy's legacy global generator) in ``reset``
and draw from them in ``step``. Many envs stepped in turn, as a trainer does, would then share one
stream and each reset would reseed everyone's. :class:`IsolatedRandom` keeps one env's own state and
swaps it in around each call into the library, leaving the process's state as it was.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


class IsolatedRandom:
    """One env's own ``random`` (and optionally NumPy legacy) global state, swapped in around library calls."""

    def __init__(self, numpy_too: bool = False):
        self.numpy_too = numpy_too
        self._python: object | None = None
        self._numpy: dict[str, Any] | None = None

    def forget(self) -> None:
        """Start from the process's state at the next call (before a library reset that seeds it anyway)."""
        self._python, self._numpy = None, None

    def run(self, call: Callable[[], T]) -> T:
        """``call()`` on this env's state; the process's state is restored afterwards, even on error."""
        outside_python = random.getstate()
        outside_numpy = np.random.get_state(legacy=False) if self.numpy_too else None
        if self._python is not None:
            random.setstate(self._python)
        if self._numpy is not None:
            np.random.set_state(self._numpy)
        try:
            return call()
        finally:
            self._python = random.getstate()
            random.setstate(outside_python)
            if outside_numpy is not None:
                self._numpy = np.random.get_state(legacy=False)
                np.random.set_state(outside_numpy)
