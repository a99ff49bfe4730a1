"""A corpus entry: a correct :class:`Program` and its tests, and :func:`program`, which the category modules use."""

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
