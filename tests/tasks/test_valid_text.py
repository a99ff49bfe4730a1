"""Any string is a valid action and every observation is valid UTF-8 text, in the MATH and code-repair envs.

A lone surrogate (``"\\ud800"``) is a Python ``str`` that no UTF-8 encoder accepts. The booking
envs' case (a JSON escape decoded inside the env) is in ``test_booking_contract.py``.
"""

import pytest
from code_helpers import own_programs_may_run_on_a_weak_tier  # noqa: F401  (autouse fixture)
from test_code_envs import SOLUTION, TASK

import marft_envs
from marft_envs.tasks.code import CodeRepairChain, CodeRepairSolo
from marft_envs.tasks.math import MathChain, MathDebate
from marft_envs.tasks.math.problems import Problem

P = Problem(question="Ana has 3 apples and buys 4 more. How many apples does she have?", answer="7", solution="3+4=7", source="test")


def all_observations_encode(env):
    for agent in env.possible_agents:
        for text in env.observe(agent).values():
            text.encode("utf-8")


def test_a_reasoners_lone_surrogate_never_reaches_the_actor():
    env = MathChain()
    env.reset(seed=0, options={"problem": P})
    env.step({"reasoner_0": "3+4=7 \ud800"})
    assert env.observe("actor_0")["text"].endswith("reasoner_0: 3+4=7 \ufffd")
    all_observations_encode(env)
    result = env.step({"actor_0": "\\boxed{7}\udfff"})
    assert result.rewards == {"reasoner_0": 1.0, "actor_0": 1.0}


def test_debate_solvers_see_each_others_answers_as_valid_text():
    env = MathDebate(n_agents=2, rounds=2)
    env.reset(seed=0, options={"problem": P})
    env.step({"solver_0": "\\boxed{7} \ud800", "solver_1": "\udc00"})
    all_observations_encode(env)
    env.state().encode("utf-8")
    assert "solver_1: \ufffd" in env.observe("solver_0")["text"]


def test_a_patch_with_a_lone_surrogate_is_graded_not_raised():
    env = CodeRepairSolo(rounds=2)
    env.reset(seed=0, options={"problem": TASK})
    patch = "```python\n" + SOLUTION.replace('"""x limited to [low, high]."""', '"""x limited \ud800."""') + "```"
    result = env.step({"fixer_0": patch})  # raised UnicodeEncodeError from ast.parse
    assert result.infos["fixer_0"]["status"] == "ok"
    assert result.rewards["fixer_0"] == 1.0


def test_a_broken_patch_with_a_lone_surrogate_scores_zero_and_is_fed_back_as_valid_text():
    env = CodeRepairChain(rounds=2)
    env.reset(seed=0, options={"problem": TASK})
    env.step({"locator_0": "Lines: \ud800 5"})
    all_observations_encode(env)
    result = env.step({"fixer_0": "```python\ndef clamp(x, low, high):\n    return '\udc00\n```"})
    assert result.infos["fixer_0"]["status"] == "syntax_error" and result.rewards["fixer_0"] == 0.0
    assert env.agents
    all_observations_encode(env)
    assert "\ufffd" in env.observe("fixer_0")["text"]


@pytest.mark.parametrize("env_id", ["marft/MathSolo-v0", "marft/CodeRepairSolo-v0"])
def test_the_gymnasium_view_takes_any_string(env_id):
    import gymnasium

    env = gymnasium.make(env_id)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("\ud800 \\boxed{1}")
    for text in observation.values():
        text.encode("utf-8")
    assert terminated or truncated
    assert marft_envs.spec(env_id).gym
