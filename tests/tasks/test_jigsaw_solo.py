"""marft/MathJigsawSolo-v0: one solver sees the whole MathJigsaw story, the team's own held-out stories."""

import gymnasium
import pytest

import marft_envs
from marft_envs.tasks.math import MathJigsaw, MathJigsawSolo
from marft_envs.tasks.math.jigsaw_problems import read_facts
from marft_envs.testing import check_env

ID = "marft/MathJigsawSolo-v0"


def test_registered_with_every_view_and_a_heldout_split():
    for kind in ("aec", "parallel", "gym"):
        assert ID in marft_envs.list_envs(kind)
    entry = marft_envs.spec(ID)
    assert (entry.eval_kwargs, entry.attempts_option) == ({"split": "test"}, "rounds")
    assert type(marft_envs.make(ID)) is MathJigsawSolo and MathJigsawSolo.metadata["name"] == ID


def test_passes_check_env():
    report = check_env(ID, seeds=range(6), num_cycles=50)
    expected = {"pettingzoo.api_test", "pettingzoo.parallel_api_test", "gymnasium.check_env", "marft.determinism"}
    assert expected | {"marft.dec_pomdp_equivalence", "marft.branching"} <= set(report.passed)
    assert "pettingzoo.api_test" in check_env(lambda: MathJigsawSolo(n_shares=3, levels=3, rounds=2), seeds=range(4)).passed


@pytest.mark.parametrize(("n_shares", "levels", "split"), [(2, 1, "test"), (2, 1, "validation"), (3, (1, 2), "test"), (2, 3, "validation")])
def test_heldout_stories_are_the_teams_own(n_shares, levels, split):
    team = MathJigsaw(n_agents=n_shares, levels=levels, split=split)
    solo = MathJigsawSolo(n_shares=n_shares, levels=levels, split=split)
    problems = [o["problem"] for o in solo.heldout_options(40, seed=20_251_130)]
    assert [p.uid for p in problems] == [o["problem"].uid for o in team.heldout_options(40, seed=20_251_130)]
    assert [p.question for p in problems] == [o["problem"].question for o in team.heldout_options(40, seed=20_251_130)]


def test_the_solver_sees_every_share_and_can_answer_alone():
    env = MathJigsawSolo(levels=(1, 2, 3), split="test")
    for options in env.heldout_options(30, seed=0):
        env.reset(seed=0, options=options)
        text = env.observe("solver_0")["text"]
        assert text == f"Problem: {env.problem.question}" and all(share in text for share in env.problem.shares)
        answer = sum(read_facts(text.removeprefix("Problem: ")))  # adding up the story's facts: what no team member can
        assert str(answer) == env.problem.answer
        assert env.step({"solver_0": f"\\boxed{{{answer}}}"}).rewards == {"solver_0": 1.0}


def test_general_v0_solver_prompt_and_a_gymnasium_view():
    env = MathJigsawSolo()
    env.reset(seed=1)
    assert env.observe("solver_0")["instructions"].startswith("You are a solver.")
    gym_env = gymnasium.make(ID, levels=1)
    obs, info = gym_env.reset(seed=0)
    assert obs["text"].startswith("Problem: ") and "How many" in obs["text"] and info["parents"] == []


@pytest.mark.parametrize("n_shares", [1, 65, 2.0, True])
def test_refuses_a_team_it_cannot_bound(n_shares):
    with pytest.raises(ValueError, match="n_shares .* must be 2 to 64"):
        MathJigsawSolo(n_shares=n_shares)
