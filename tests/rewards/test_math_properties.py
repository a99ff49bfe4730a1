"""Property tests of the grader with the kit's strategies: equivalent forms pass, near misses fail."""

from hypothesis import given, settings
from hypothesis import strategies as st

from marft_envs.rewards.math import answers_match, grade
from marft_envs.testing.strategies import canonical, equivalent_forms, near_misses, numbers


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_equivalent_forms_match(data):
    value = data.draw(numbers())
    form = data.draw(equivalent_forms(value))
    assert answers_match(form, canonical(value)), form


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_near_misses_do_not_match(data):
    value = data.draw(numbers())
    miss = data.draw(near_misses(value))
    assert not answers_match(miss, canonical(value)), miss


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(["The answer is {}", "\\boxed{{{}}}", "so we get\n#### {}", "Answer: {}"]))
def test_extraction_keeps_equivalent_forms(data, wrapper):
    value = data.draw(numbers())
    form = data.draw(equivalent_forms(value)).strip()
    if wrapper.startswith("\\boxed") or "$" not in form:
        assert grade(wrapper.format(form), canonical(value)), wrapper.format(form)
