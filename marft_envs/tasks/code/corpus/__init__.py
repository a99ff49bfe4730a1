"""The project's corpus of correct Python programs with unit tests, the raw material of repair tasks.

Each :class:`Program` is a small module (one function, or one small class) and the asserts it must
pass. Seeded bug operators (:mod:`marft_envs.tasks.code.mutations`) turn them into buggy programs;
only mutants that fail at least one test while the original passes all are kept.
"""

from __future__ import annotations

from marft_envs.tasks.code.corpus.program import Program, program

__all__ = ["Program", "load_corpus", "program"]


def load_corpus() -> list[Program]:
    """Every program of the corpus, in a fixed order."""
    from marft_envs.tasks.code.corpus import classes, dicts, lists, numbers, recursion, strings

    programs = [*strings.PROGRAMS, *lists.PROGRAMS, *dicts.PROGRAMS, *numbers.PROGRAMS, *recursion.PROGRAMS, *classes.PROGRAMS]
    names = [p.name for p in programs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate corpus program names: {duplicates}")
    return programs
