"""The gold-free format reward: a table of responses and whether they box a readable final answer."""

from marft_envs.rewards.format import MAX_ANSWER_CHARS, boxed_format
from marft_envs.testing import Case, cases, check_table

TABLE = [
    Case(("so it is \\boxed{38}",), 1.0, id="boxed integer"),
    Case(("\\boxed{\\frac{7}{3}}",), 1.0, id="nested braces"),
    Case(("\\fbox{4}",), 1.0, id="fbox"),
    Case(("\\boxed 5",), 1.0, id="unbraced box"),
    Case(("\\boxed{5} then \\boxed{6}",), 1.0, id="a later box is a revision"),
    Case(("wrong but boxed: \\boxed{-12}",), 1.0, id="right or wrong does not matter"),
    Case(("The answer is 38.",), 0.0, id="answer phrase is not a box"),
    Case(("#### 38",), 0.0, id="gsm8k hashes are not a box"),
    Case(("38",), 0.0, id="bare number"),
    Case(("",), 0.0, id="empty"),
    Case(("\\boxed{}",), 0.0, id="empty box"),
    Case(("\\boxed{   }",), 0.0, id="blank box"),
    Case(("\\boxed{\\frac{1}{2}",), 0.0, id="unfinished box"),
    Case(("\\boxed{" + "1" * MAX_ANSWER_CHARS + "}",), 1.0, id="longest answer"),
    Case(("\\boxed{" + "1" * (MAX_ANSWER_CHARS + 1) + "}",), 0.0, id="a boxed essay"),
    Case(("\\boxed{12345}",), 0.0, id="limit as an argument", kwargs={"max_chars": 4}),
    Case(("\\boxedx{5}",), 0.0, id="another command"),
]


@cases(TABLE)
def test_boxed_format(case):
    check_table(boxed_format, [case])


def test_not_a_string_is_no_format():
    assert boxed_format(None) == 0.0  # never raises on what a model or a caller hands it
