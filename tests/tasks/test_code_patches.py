"""Patches: finding them in a fixer's answer and applying them (whole definitions or unified diffs)."""

import pytest

from marft_envs.tasks.code.patches import (
    Patch,
    PatchError,
    apply_patch,
    apply_unified_diff,
    definition_source,
    extract_patch,
    make_diff,
    splice_definitions,
)

BUGGY = '''import math


def helper(x):
    return x + 1


def area(r):
    """Area of a circle."""
    return math.pi * r * 2


print("module loaded")
'''
FIXED_AREA = '''def area(r):
    """Area of a circle."""
    return math.pi * r ** 2
'''


@pytest.mark.parametrize(
    "answer, kind, text",
    [
        ("```python\ndef f():\n    pass\n```", "code", "def f():\n    pass\n"),
        ("Here:\n```py\nx = 1\n```\nthen\n```python\ny = 2\n```", "code", "y = 2\n"),
        ("```diff\n@@ -1 +1 @@\n-a\n+b\n```", "diff", "@@ -1 +1 @@\n-a\n+b\n"),
        ("```\n--- a/p.py\n+++ b/p.py\n@@ -1 +1 @@\n-a\n+b\n```", "diff", "--- a/p.py\n+++ b/p.py\n@@ -1 +1 @@\n-a\n+b\n"),
        ("@@ -1 +1 @@\n-a\n+b", "diff", "@@ -1 +1 @@\n-a\n+b"),
        ("def f():\n    return 1", "code", "def f():\n    return 1"),
    ],
)
def test_extract_patch(answer, kind, text):
    assert extract_patch(answer) == Patch(kind, text)


def test_a_whole_function_replaces_only_its_definition():
    program = splice_definitions(BUGGY, FIXED_AREA, "area")
    assert program == BUGGY.replace("r * 2", "r ** 2")


def test_new_imports_and_helpers_go_before_the_replaced_definition():
    code = "import functools\n\ndef area(r):\n    return helper(r) ** 2\n"
    program = splice_definitions(BUGGY, code, "area")
    assert program.index("import functools") < program.index("def area") and "def helper" in program
    assert program.count("def area") == 1 and 'print("module loaded")' in program


def test_redefining_a_helper_replaces_it_too():
    program = splice_definitions(BUGGY, "def helper(x):\n    return x + 2\n\n" + FIXED_AREA, "area")
    assert "return x + 2" in program and "return x + 1" not in program and program.count("def helper") == 1


def test_a_patch_must_define_the_entry_point():
    with pytest.raises(PatchError, match="does not define 'area'"):
        splice_definitions(BUGGY, "def other():\n    pass\n", "area")
    with pytest.raises(PatchError, match="no code"):
        splice_definitions(BUGGY, "   \n", "area")
    with pytest.raises(SyntaxError):
        splice_definitions(BUGGY, "def area(:\n", "area")


def test_diff_round_trip():
    fixed = BUGGY.replace("r * 2", "r ** 2")
    assert apply_unified_diff(BUGGY, make_diff(BUGGY, fixed)) == fixed


def test_diff_with_wrong_line_numbers_still_finds_its_context():
    diff = '@@ -40,3 +40,3 @@\n     """Area of a circle."""\n-    return math.pi * r * 2\n+    return math.pi * r ** 2\n'
    assert apply_unified_diff(BUGGY, diff) == BUGGY.replace("r * 2", "r ** 2")


def test_diff_that_does_not_match_is_rejected():
    with pytest.raises(PatchError, match="hunk 1 does not apply"):
        apply_unified_diff(BUGGY, "@@ -1,1 +1,1 @@\n-import numpy\n+import math\n")
    with pytest.raises(PatchError, match="no hunks"):
        apply_unified_diff(BUGGY, "--- a\n+++ b\n")


def test_apply_patch_dispatches_on_kind():
    fixed = BUGGY.replace("r * 2", "r ** 2")
    assert apply_patch(BUGGY, Patch("diff", make_diff(BUGGY, fixed)), "area") == fixed
    assert apply_patch(BUGGY, Patch("code", FIXED_AREA), "area") == fixed


def test_definition_source_includes_decorators():
    program = "import functools\n\n@functools.lru_cache\ndef f(n):\n    return n\n"
    assert definition_source(program, "f") == "@functools.lru_cache\ndef f(n):\n    return n\n"
    with pytest.raises(ValueError, match="no top-level definition of 'g'"):
        definition_source(program, "g")
