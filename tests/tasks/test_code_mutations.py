"""Bug operators: each makes the intended one-place change, keeps the rest of the text, and is seeded."""

import ast

import pytest

from marft_envs.tasks.code.corpus import load_corpus
from marft_envs.tasks.code.mutations import OPERATORS, candidate_mutants, changed_lines, seeded_mutants

FACTORIAL = '''def factorial(n):
    """n! for n >= 0."""
    if n == 0:
        return 1
    return n * factorial(n - 1)
'''


def by_operator(source, name):
    out = {}
    for m in candidate_mutants(source, name):
        out.setdefault(m.operator, []).append(m)
    return out


def test_every_operator_fires_somewhere_in_the_corpus():
    seen = set()
    for program in load_corpus():
        seen |= {m.operator for m in candidate_mutants(program.source, program.entry_point)}
    assert seen == set(OPERATORS)


def test_factorial_mutants_are_one_place_changes():
    muts = by_operator(FACTORIAL, "factorial")
    sources = {op: {m.source for m in ms} for op, ms in muts.items()}
    assert FACTORIAL.replace("if n == 0:", "if n != 0:") in sources["wrong_comparison"]
    assert FACTORIAL.replace("n - 1)", "n - 2)") in sources["off_by_one"]
    assert FACTORIAL.replace("n * factorial", "n + factorial") in sources["wrong_operator"]
    assert FACTORIAL.replace("(n - 1)", "(1 - n)") in sources["swapped_arguments"]
    assert FACTORIAL.replace("if n == 0:", "if not n == 0:") in sources["negated_condition"]
    (base_case,) = muts["missing_base_case"]
    assert base_case.source == FACTORIAL.replace("    if n == 0:\n        return 1\n", "")
    assert base_case.lines == (3,)  # the line that now follows the gap
    assert FACTORIAL.replace("        return 1\n", "        pass\n") in sources["dropped_statement"]


def test_the_docstring_is_never_mutated():
    for m in candidate_mutants(FACTORIAL, "factorial"):
        assert '"""n! for n >= 0."""' in m.source


def test_mutants_parse_and_differ_from_the_original_only_on_their_lines():
    for program in load_corpus()[::5]:
        for m in candidate_mutants(program.source, program.entry_point):
            ast.parse(m.source)
            assert m.source != program.source and m.lines
            original, buggy = program.source.splitlines(), m.source.splitlines()
            if len(original) == len(buggy):  # no line deleted: exactly the listed lines differ
                assert [k + 1 for k, (a, b) in enumerate(zip(original, buggy)) if a != b] == list(m.lines)


def test_seeded_order_is_reproducible_and_alternates_operators():
    program = next(p for p in load_corpus() if p.name == "binary_search")
    a = seeded_mutants(program.source, program.entry_point, seed=0)
    assert [m.source for m in a] == [m.source for m in seeded_mutants(program.source, program.entry_point, seed=0)]
    assert [m.source for m in a] != [m.source for m in seeded_mutants(program.source, program.entry_point, seed=1)]
    assert len({m.operator for m in a[:5]}) == 5


def test_methods_of_a_class_are_mutated_too():
    program = next(p for p in load_corpus() if p.name == "Stack")
    muts = candidate_mutants(program.source, "Stack")
    assert any("self.items[-2]" in m.source or "self.items[-0]" in m.source for m in muts)


@pytest.mark.parametrize(
    "fixed, buggy, lines",
    [("a\nb\nc\n", "a\nB\nc\n", (2,)), ("a\nb\nc\n", "a\nc\n", (2,)), ("a\nb\n", "a\n", (1,)), ("a\nb\nc\n", "a\nb\nc\n", ())],
)
def test_changed_lines(fixed, buggy, lines):
    assert changed_lines(fixed, buggy) == lines


def test_unknown_entry_point_is_a_clear_error():
    with pytest.raises(ValueError, match="no top-level function or class named 'nope'"):
        candidate_mutants(FACTORIAL, "nope")
