"""Code-repair envs: observations, patch formats, scores and their reasons, roles, credit, rounds, the vote."""

import gymnasium
import numpy as np
import pytest
from code_helpers import own_programs_may_run_on_a_weak_tier  # noqa: F401  (autouse fixture)

import marft_envs
from marft_envs.tasks.code import CodeRepairChain, CodeRepairSolo, CodeRepairVote
from marft_envs.tasks.code.patches import definition_source, make_diff
from marft_envs.tasks.code.scripted import oracle_patch, oracle_policy
from marft_envs.tasks.code.tasks import CodeTask
from marft_envs.tasks.code.vote import vote
from marft_envs.testing import check_env

SOLUTION = '''def clamp(x, low, high):
    """x limited to [low, high]."""
    if x < low:
        return low
    if x > high:
        return high
    return x
'''
TASK = CodeTask(
    task_id="test/clamp/0",
    entry_point="clamp",
    buggy=SOLUTION.replace("x > high", "x >= low"),
    tests=("assert clamp(5, 0, 10) == 5", "assert clamp(-3, 0, 10) == 0", "assert clamp(12, 0, 10) == 10", "assert clamp(0, 0, 10) == 0"),
    solution=SOLUTION,
    fail_to_pass=(0, 3),
    pass_to_pass=(1, 2),
    bug_lines=(5,),
    bug="wrong_comparison: line 5",
    source="test",
)


def play_round(env, actions):
    result = None
    while result is None:
        result = env.step({a: actions[a] for a in env.ready_agents()})
    return result


def fixer_env(**kwargs):
    env = CodeRepairSolo(**kwargs)
    env.reset(seed=0, options={"problem": TASK})
    return env


def test_the_task_as_the_agents_see_it():
    env = CodeRepairChain()
    env.reset(seed=0, options={"problem": TASK})
    assert env.possible_agents == ["locator_0", "fixer_0"]
    assert env.observe("locator_0")["text"] == (
        "Fix the bug in `clamp` so that it passes its tests.\n\nProgram:\n"
        '1 | def clamp(x, low, high):\n2 |     """x limited to [low, high]."""\n3 |     if x < low:\n'
        "4 |         return low\n5 |     if x >= low:\n6 |         return high\n7 |     return x\n\n"
        "Some of its tests (3 of 4):\nassert clamp(5, 0, 10) == 5\nassert clamp(0, 0, 10) == 0\n"
        "assert clamp(-3, 0, 10) == 0"
    )
    assert "Lines: 3, 7" in env.observe("locator_0")["instructions"]
    env.step({"locator_0": "Lines: 5"})
    assert env.observe("fixer_0")["text"].endswith("\n\nlocator_0: Lines: 5")
    assert env.infos["fixer_0"]["parents"] == ["locator_0"]


@pytest.mark.parametrize(
    "answer",
    [
        oracle_patch(TASK, "function"),
        oracle_patch(TASK, "diff"),
        SOLUTION,  # a bare definition, no code fence
        f"Here is the fix:\n```python\nimport math\n\n{SOLUTION}```\nDone.",
        f"```diff\n{make_diff(TASK.buggy, SOLUTION).replace('@@ -3', '@@ -30')}```",  # wrong line numbers
    ],
)
def test_patch_forms_that_fix_the_bug_score_one(answer):
    result = fixer_env().step({"fixer_0": answer})
    info = result.infos["fixer_0"]
    assert result.rewards == {"fixer_0": 1.0} and info["solved"] and info["status"] == "ok"
    assert info["reward_components"]["fail_to_pass"] == 1.0 and info["reward_components"]["pass_to_pass"] == 1.0


def test_the_unfixed_program_keeps_its_passing_tests_only():
    result = fixer_env().step({"fixer_0": definition_source(TASK.buggy, "clamp")})
    parts = result.infos["fixer_0"]["reward_components"]
    assert result.rewards["fixer_0"] == 0.5 and not result.infos["fixer_0"]["solved"]
    assert (parts["fail_to_pass"], parts["pass_to_pass"], parts["resolved"]) == (0.0, 1.0, 0.0)
    result = fixer_env(reward="resolved").step({"fixer_0": definition_source(TASK.buggy, "clamp")})
    assert result.rewards["fixer_0"] == 0.0


@pytest.mark.parametrize(
    "answer, status, reason",
    [
        ("def clamp(x, low, high)\n    return x", "syntax_error", "line 1"),
        ("I think the bug is on line 5.", "syntax_error", ""),
        ("```python\ndef other():\n    pass\n```", "no_patch", "does not define 'clamp'"),
        ("```diff\n@@ -1 +1 @@\n-def nope():\n+def clamp():\n```", "no_patch", "hunk 1 does not apply"),
        ("```python\ndef clamp(x, low, high):\n    while True:\n        pass\n```", "timeout", "did not finish"),
        ("```python\nimport os\ndef clamp(x, low, high):\n    os._exit(3)\n```", "crash", "exit status 3"),
        ("```python\nraise SystemExit('bye')\ndef clamp(x, low, high):\n    return x\n```", "import_error", "SystemExit"),
        ("```python\nclass clamp:\n    pass\n```", "ok", ""),
    ],
)
def test_bad_patches_score_zero_with_the_reason(answer, status, reason):
    result = fixer_env(timeout_s=1.0).step({"fixer_0": answer})
    info = result.infos["fixer_0"]
    assert info["status"] == status and reason in info["reason"], info
    assert result.rewards["fixer_0"] == 0.0 and not info["solved"]


def test_every_role_graded_by_the_oracle_scores_one():
    env = CodeRepairChain(roles=["locator", "tester", "fixer", "reviewer"], credit="per_agent")
    env.reset(seed=0, options={"problem": TASK})
    policy = oracle_policy(env)
    result = None
    while env.agents:
        result = env.step({a: policy(a, env.observe(a)) for a in env.ready_agents()}) or result
    assert result.rewards == dict.fromkeys(env.possible_agents, 1.0)
    assert result.infos["locator_0"]["reward_components"]["locate_f1"] == 1.0


def test_own_scores_and_credit_modes():
    actions = {
        "locator_0": "Lines: 3",
        "tester_0": "assert clamp(1, 0, 3) == 2\nassert clamp(20, 0, 10) == 10",
        "fixer_0": oracle_patch(TASK),
        "reviewer_0": "REJECT",
    }
    expected = {
        "team": dict.fromkeys(actions, 1.0),
        "last": {"locator_0": 0.0, "tester_0": 0.0, "fixer_0": 0.0, "reviewer_0": 1.0},
        # the locator named the wrong line, the tester's first assert is wrong and its second
        # does not catch the bug, the reviewer rejected a good patch
        "per_agent": {"locator_0": 0.0, "tester_0": 0.0, "fixer_0": 1.0, "reviewer_0": 0.0},
    }
    for credit, rewards in expected.items():
        env = CodeRepairChain(roles=["locator", "tester", "fixer", "reviewer"], credit=credit)
        env.reset(seed=0, options={"problem": TASK})
        assert play_round(env, actions).rewards == rewards, credit
    env = CodeRepairChain(roles=["tester", "fixer"], credit="per_agent")
    env.reset(seed=0, options={"problem": TASK})
    result = play_round(env, {"tester_0": "```python\nassert clamp(5, 0, 10) == 5\nassert clamp(1, 0, 3) == 2\n```", "fixer_0": "pass"})
    assert result.rewards["tester_0"] == 0.5  # one assert right and catching the bug, one wrong


def test_feedback_rounds_until_fixed():
    env = CodeRepairChain(rounds=3)
    env.reset(seed=0, options={"problem": TASK})
    wrong = definition_source(TASK.buggy, "clamp")
    first = play_round(env, {"locator_0": "Lines: 5", "fixer_0": wrong})
    assert not any(first.terminations.values()) and first.rewards["fixer_0"] == 0.5
    text = env.observe("fixer_0")["text"]
    assert "Attempt 1: the team's patch passed 2 of 4 tests. A shown test failed: assert clamp(5, 0, 10) == 5" in text
    assert "The team's last patch:\n" + wrong in text
    second = play_round(env, {"locator_0": "Lines: 5", "fixer_0": oracle_patch(TASK)})
    assert all(second.terminations.values()) and second.rewards["fixer_0"] == 1.0 and env.agents == []


def test_attempts_run_out_and_a_zero_score_is_explained():
    env = CodeRepairSolo(rounds=2)
    env.reset(seed=0, options={"problem": TASK})
    env.step({"fixer_0": "oops("})
    assert "Attempt 1: the team's patch scored 0: syntax error (line 1:" in env.observe("fixer_0")["text"]
    result = env.step({"fixer_0": "still wrong"})
    assert all(result.terminations.values()) and env.agents == []


def test_vote_by_syntax_tree():
    same_fix_other_format = SOLUTION.replace("    if x > high:", "    # the real fix\n    if (x > high):")
    assert vote([TASK.buggy, SOLUTION, same_fix_other_format, None]) == 1
    assert vote([TASK.buggy, SOLUTION]) == 0  # a tie goes to the earliest
    assert vote([None, "not python("]) is None
    env = CodeRepairVote(n_agents=3, credit="per_agent")
    env.reset(seed=0, options={"problem": TASK})
    assert env.ready_agents() == ["fixer_0", "fixer_1", "fixer_2"] and env.graph.is_empty()
    result = env.step({"fixer_0": definition_source(TASK.buggy, "clamp"), "fixer_1": SOLUTION, "fixer_2": same_fix_other_format})
    assert result.rewards == {"fixer_0": 0.5, "fixer_1": 1.0, "fixer_2": 1.0}
    assert all(info["solved"] for info in result.infos.values())


def test_vote_shows_the_other_patches_next_round():
    env = CodeRepairVote(n_agents=2, rounds=2)
    env.reset(seed=0, options={"problem": TASK})
    env.step({"fixer_0": "first try", "fixer_1": "second try"})
    text = env.observe("fixer_0")["text"]
    assert "The other fixers' previous patches:\nfixer_1: second try" in text and "fixer_0: first" not in text


def test_gymnasium_view_of_the_solo_env():
    env = gymnasium.make("marft/CodeRepairSolo-v0")
    obs, info = env.reset(seed=0, options={"problem": TASK})
    assert obs["text"].startswith("Fix the bug in `clamp`") and info["parents"] == []
    obs, reward, terminated, truncated, info = env.step(oracle_patch(TASK, "diff"))
    assert reward == 1.0 and terminated is True and truncated is False and info["solved"]


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("marft/CodeRepair-v0", {"rounds": 2}),
        ("marft/CodeRepair-v0", {"roles": ["locator", "tester", "fixer", "reviewer"]}),
        ("marft/CodeRepairVote-v0", {"rounds": 2}),
        ("marft/CodeRepairSolo-v0", {"rounds": 2}),
    ],
)
def test_checkers_pass_with_the_oracle_policy(env_id, kwargs):
    # check_env plays many env instances; the oracle finds each one's task from the program it shows.
    report = check_env(
        lambda: marft_envs.make(env_id, **kwargs),
        seeds=range(4),
        num_cycles=20,
        policy=lambda agent, obs, rng: _oracle_for(obs)(agent, obs, rng),
    )
    assert "marft.determinism" in report.passed


_ORACLES = {}


def _oracle_for(observation):
    from marft_envs.tasks.code.tasks import corpus_tasks

    if not _ORACLES:
        for task in corpus_tasks("all").tasks:
            _ORACLES.setdefault(task.buggy, task)
    numbered = observation["text"].split("Program:\n", 1)[1].split("\n\n", 1)[0]
    buggy = "\n".join(line.split(" | ", 1)[1] if " | " in line else "" for line in numbered.splitlines()) + "\n"
    task = _ORACLES[buggy]

    class _Env:
        problem = task

    return oracle_policy(_Env, slip=0.5, patch_format="mixed")


def test_heldout_tasks_are_deterministic_and_from_unseen_programs():
    test_env = marft_envs.make("marft/CodeRepair-v0", split="test")
    train_env = marft_envs.make("marft/CodeRepair-v0")
    heldout = test_env.problems.heldout(20, seed=0)
    assert [t.task_id for t in heldout] == [t.task_id for t in test_env.problems.heldout(20, seed=0)]
    assert len({t.task_id for t in heldout}) == len(heldout) > 0
    train_programs = {t.program_id for t in train_env.problems.tasks}
    assert not train_programs & {t.program_id for t in test_env.problems.tasks}


def test_reset_is_seeded():
    env = marft_envs.make("marft/CodeRepair-v0")
    ids = []
    for _ in range(2):
        env.reset(seed=7)
        ids.append(env.problem.task_id)
    assert ids[0] == ids[1]
    assert len({(env.reset(seed=s), env.problem.task_id)[1] for s in range(20)}) > 5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: CodeRepairChain(roles=["locator"]), "have no 'fixer'"),
        (lambda: CodeRepairChain(roles=["reviewer", "fixer"]), "a reviewer must come after a fixer"),
        (lambda: CodeRepairChain(roles=["fixer", "poet"]), "unknown roles ['poet']"),
        (lambda: CodeRepairChain(rounds=0), "rounds must be at least 1"),
        (lambda: CodeRepairChain(credit="all"), "unknown credit mode 'all'"),
        (lambda: CodeRepairChain(reward="binary"), "unknown reward mode 'binary'"),
        (lambda: CodeRepairChain(visible_tests=-1), "visible_tests must be at least 0"),
        (lambda: CodeRepairChain(tasks="/no/such/tasks.jsonl"), "no such task file"),
        (lambda: CodeRepairChain(split="dev"), "unknown split 'dev'"),
        (lambda: CodeRepairVote(n_agents=0), "n_agents must be at least 1"),
        (lambda: CodeRepairVote(n_agents=10**6), "n_agents must be at least 1 and at most 64, got 1000000"),
        (lambda: CodeRepairVote(n_agents=2.5), "n_agents must be at least 1 and at most 64, got 2.5"),
        (lambda: CodeRepairSolo(profile={"roles": {"locator": "x"}}), "no prompt for roles ['fixer']"),
        (lambda: CodeRepairChain().reset(options={"problem": "task"}), "must be a CodeTask"),
    ],
)
def test_bad_options_give_one_clear_line(make, message):
    with pytest.raises((ValueError, TypeError, FileNotFoundError)) as err:
        make()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_scripted_oracle_is_seeded_and_slips():
    env = fixer_env()
    policy = oracle_policy(env, slip=1.0)
    assert policy("fixer_0", env.observe("fixer_0"), np.random.default_rng(0)).startswith("```python\ndef clamp")
    with pytest.raises(ValueError, match="unknown patch_format"):
        oracle_policy(env, patch_format="zip")
