"""The project's corpus of correct Python programs with unit tests, the raw material of repair tasks.

Each :class:`Program` is a small module (one function, or one small class) and the asserts it must
pass. Seeded bug operators (:mod:`marft_envs.tasks.code.mutations`) turn them into buggy programs;
only mutants that fail at least one test while the original passes all are kept.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Program:
    """A correct program and its tests."""

    name: str
    """Unique name; also the default entry point."""
    source: str
    """The module's source: the function or class, plus any imports it needs."""
    tests: tuple[str, ...]
    """Test snippets; each passes when it runs without raising (usually one ``assert``)."""
    category: str = ""
    """strings, lists, dicts, numbers, recursion or classes."""
    entry_point: str = ""
    """The function or class under repair (default: ``name``)."""
    setup: str = ""
    """Code run before each test (imports, helpers)."""

    def __post_init__(self):
        if not self.entry_point:
            object.__setattr__(self, "entry_point", self.name)
        object.__setattr__(self, "source", self.source.strip("\n") + "\n")


def program(name: str, source: str, tests: list[str], category: str) -> Program:
    """A corpus entry (dedents the source)."""
    import textwrap

    return Program(name=name, source=textwrap.dedent(source), tests=tuple(tests), category=category)


def load_corpus() -> list[Program]:
    """Every program of the corpus, in a fixed order."""
    from marft_envs.tasks.code.corpus import classes, dicts, lists, numbers, recursion, strings

    programs = [*strings.PROGRAMS, *lists.PROGRAMS, *dicts.PROGRAMS, *numbers.PROGRAMS, *recursion.PROGRAMS,
                *classes.PROGRAMS]
    names = [p.name for p in programs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate corpus program names: {duplicates}")
    return programs
