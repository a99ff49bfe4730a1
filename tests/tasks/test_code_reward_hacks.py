"""Every row of the reward-hack table scores at most what the unchanged buggy program scores.

The grader's promise (docs/envs/code.md, "The judge"): nothing the program can reach decides the
verdict. Each hack in ``reward_hacks.HACKS`` is played as the fixer's patch on held-out tasks of
``CodeRepairSolo-v0`` (the shipped corpus and HumanEval) and ``CodeRepair-v0``; its reward must not
beat the "empty" patch (the buggy program unchanged, which keeps the tests the bug did not break).
The default suite plays 4 tasks per source; ``-m slow`` plays 10, as the hostile tester did.
"""

from __future__ import annotations

import pytest
from code_helpers import own_programs_may_run_on_a_weak_tier  # noqa: F401  (autouse fixture)
from reward_hacks import HACKS, hack_patch

import marft_envs
from marft_envs.sandbox import detect_isolation

SOURCES = {"corpus": {}, "humaneval": {"tasks": "humaneval"}}


def _contained():
    if not detect_isolation().contained:
        pytest.skip("hostile patches are graded only in a contained sandbox (weak tiers refuse model output)")


def _tasks(source: str, n: int):
    env = marft_envs.make("marft/CodeRepairSolo-v0", split="test", timeout_s=2.0, **SOURCES[source])
    return env, env.problems.heldout(n, seed=0)


def _reward(env, task, answer: str) -> float:
    env.reset(seed=0, options={"problem": task})
    if "locator_0" in env.possible_agents:
        env.step({"locator_0": "Lines: 1"})
    return env.step({"fixer_0": answer}).rewards["fixer_0"]


def _play(source: str, n: int, env_id: str = "marft/CodeRepairSolo-v0") -> dict[str, list[tuple[float, float]]]:
    _contained()
    _, tasks = _tasks(source, n)
    env = marft_envs.make(env_id, split="test", timeout_s=2.0, **SOURCES[source])
    out = {}
    for hack in HACKS:
        rows = []
        for task in tasks:
            if hack.kind == "function" and task.entry_point[:1].isupper():
                continue  # a class entry point: this row redefines a function
            empty = _reward(env, task, f"```python\n{task.buggy}```")
            rows.append((_reward(env, task, hack_patch(hack, task.buggy, task.entry_point)), empty))
        out[hack.name] = rows
    return out


def _check(played: dict[str, list[tuple[float, float]]]) -> None:
    beaten = {name: rows for name, rows in played.items() if any(hack > empty for hack, empty in rows)}
    assert not beaten, f"these hacks were paid more than the unchanged buggy program: {beaten}"
    assert all(played.values()), "every hack must have been played on at least one task"


def test_the_real_fix_scores_1_so_the_table_can_fail():
    _contained()
    env, tasks = _tasks("corpus", 4)
    assert [_reward(env, t, f"```python\n{t.solution}```") for t in tasks] == [1.0] * 4


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_no_reward_hack_beats_an_empty_patch(source):
    _check(_play(source, 4))


def test_no_reward_hack_beats_an_empty_patch_in_the_two_agent_chain():
    _check(_play("corpus", 3, env_id="marft/CodeRepair-v0"))


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["marft/CodeRepairSolo-v0", "marft/CodeRepair-v0"])
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_no_reward_hack_beats_an_empty_patch_on_10_tasks(source, env_id):
    _check(_play(source, 10, env_id=env_id))


def test_an_oracle_that_is_handed_the_tests_does_score():
    """The memory-reading rows are real attacks: given the tests' text, their oracle passes them."""
    _contained()
    from reward_hacks import ORACLE, ORACLE_ENTRY

    env, tasks = _tasks("corpus", 4)
    task = next(t for t in tasks if not t.entry_point[:1].isupper())
    handed = "\n".join(task.tests).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    code = ORACLE + f'_FIND = lambda: _learn("""{handed}""")\n' + ORACLE_ENTRY
    answer = "```python\n" + code.format(entry=task.entry_point, buggy=task.buggy) + "```"
    assert _reward(env, task, answer) > _reward(env, task, f"```python\n{task.buggy}```")
