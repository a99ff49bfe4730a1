"""marft/MathJigsaw-v0: the answer needs every agent's share; rewards, graphs, splits, determinism, scripted teams."""

from collections import Counter, defaultdict

import numpy as np
import pytest

import marft_envs
from marft_envs.outcomes import OWN_CORRECT, REWARD_COMPONENTS, SOLVED
from marft_envs.tasks.math import MathJigsaw
from marft_envs.tasks.math.jigsaw import passes_on
from marft_envs.tasks.math.jigsaw_problems import LEVELS, JigsawMath, JigsawProblem, read_facts
from marft_envs.tasks.math.problems import Problem
from marft_envs.tasks.math.scripted import jigsaw_policy, shown_parts
from marft_envs.testing import Case, cases, check_env, check_table

TOM = JigsawProblem(
    question="Tom has 17 apples. Tom buys 25 more apples. How many apples does Tom have now?",
    answer="42",
    solution="17+25=42",
    source="test",
    shares=("Tom has 17 apples.", "Tom buys 25 more apples. How many apples does Tom have now?"),
    quantities=((17,), (25,)),
)


def one_round(sharer: str, answerer: str, credit: str = "team", format_reward: float = 0.0):
    """Rewards of one round on TOM: sharer_0 says ``sharer``, answerer_0 says ``answerer``."""
    env = MathJigsaw(credit=credit, format_reward=format_reward)
    env.reset(seed=0, options={"problem": TOM})
    assert env.step({"sharer_0": sharer}) is None
    return env.step({"answerer_0": answerer})


def rewards(sharer: str, answerer: str, credit: str = "team", format_reward: float = 0.0) -> dict[str, float]:
    return one_round(sharer, answerer, credit, format_reward).rewards


PASSED = "Tom has 17 apples."
REWARDS = [
    Case((PASSED, "17+25=42. \\boxed{42}"), {"sharer_0": 1.0, "answerer_0": 1.0}, id="right"),
    Case((PASSED, "\\boxed{41}"), {"sharer_0": 0.0, "answerer_0": 0.0}, id="wrong"),
    Case((PASSED, "\\boxed{25}"), {"sharer_0": 0.0, "answerer_0": 0.0}, id="own share only"),
    Case((PASSED, "\\boxed{17}"), {"sharer_0": 0.0, "answerer_0": 0.0}, id="the sharer's number only"),
    Case((PASSED, "I need to know how many Tom had."), {"sharer_0": 0.0, "answerer_0": 0.0}, id="no box, no number"),
    Case((PASSED, "42"), {"sharer_0": 1.0, "answerer_0": 1.0}, id="no box, a bare number: the grader's fallback reads it"),
    Case((PASSED, "\\boxed{42.0}"), {"sharer_0": 1.0, "answerer_0": 1.0}, id="equivalent form"),
    # Only the team's answer counts: a sharer that "knows" the answer earns nothing unless the answerer gives it.
    Case(("\\boxed{42}", "\\boxed{17}"), {"sharer_0": 0.0, "answerer_0": 0.0}, id="the sharer answers right, the answerer wrong"),
    Case(("no idea", "\\boxed{42}"), {"sharer_0": 1.0, "answerer_0": 1.0}, id="the answerer right whatever the sharer said"),
    Case((PASSED, "\\boxed{42}"), {"sharer_0": 0.0, "answerer_0": 1.0}, id="last", kwargs={"credit": "last"}),
    Case((PASSED, "\\boxed{42}"), {"sharer_0": 1.0, "answerer_0": 1.0}, id="per_agent, both right", kwargs={"credit": "per_agent"}),
    Case(
        ("Tom has 71 apples.", "\\boxed{42}"),
        {"sharer_0": 0.0, "answerer_0": 1.0},
        id="per_agent, a wrong number",
        kwargs={"credit": "per_agent"},
    ),
    Case(
        ("Tom has 17 apples, or 18.", "\\boxed{96}"),
        {"sharer_0": 0.0, "answerer_0": 0.0},
        id="per_agent, padded",
        kwargs={"credit": "per_agent"},
    ),
    Case(
        ("17", "\\boxed{96}"), {"sharer_0": 1.0, "answerer_0": 0.0}, id="per_agent, the bare number passes", kwargs={"credit": "per_agent"}
    ),
    Case((PASSED, "\\boxed{42}"), {"sharer_0": 1.0, "answerer_0": 1.5}, id="format bonus", kwargs={"format_reward": 0.5}),
]


@cases(REWARDS)
def test_reward_table(case):
    check_table(rewards, [case])


def test_infos_carry_the_outcome_keys():
    result = one_round(PASSED, "\\boxed{42}")
    sharer, answerer = result.infos["sharer_0"], result.infos["answerer_0"]
    assert sharer[SOLVED] is answerer[SOLVED] is True
    assert sharer[REWARD_COMPONENTS] == {"team": 1.0, OWN_CORRECT: 1.0} == answerer[REWARD_COMPONENTS]
    assert answerer["answer"] == "42" and answerer["team_answer"] == "42"
    assert "answer" not in sharer  # a sharer is graded on what it passes on, not on an answer
    wrong = one_round("Tom has 71 apples.", "so many")
    assert wrong.infos["answerer_0"]["parse"].startswith("no final answer") and "parse" not in wrong.infos["sharer_0"]
    assert wrong.infos["sharer_0"][REWARD_COMPONENTS][OWN_CORRECT] == 0.0 and wrong.infos["sharer_0"][SOLVED] is False


def test_passes_on_is_an_exact_multiset():
    check_table(
        passes_on,
        [
            Case(("Tom has 17 apples. Tom sells 3.", [17, 3]), True),
            Case(("3 then 17", [17, 3]), True),
            Case(("Tom has 17 apples.", [17, 3]), False),
            Case(("17 17 3", [17, 3]), False),
            Case(("170 and 3", [17, 3]), False),
            Case(("", []), True),
        ],
    )


def test_read_facts_reads_every_wording_and_nothing_else():
    check_table(
        read_facts,
        [
            Case(("Tom has 17 apples. Tom buys 25 more apples. How many apples does Tom have now?",), [17, 25]),
            Case(("Ana gives Tom 4 loaves of bread. Tom finds 6 more pears.",), [4, 6]),
            Case(("Tom gives 3 pens to Ana. Tom loses 2 pens. Tom sells 9 pens.",), [-3, -2, -9]),
            Case(("Tom has about 17 apples. 17 apples.",), []),
        ],
    )


def test_no_single_agent_sees_every_quantity():
    for n, graph, levels in [(2, "chain", 1), (3, "chain", 3), (4, "star", 2), (5, "chain", (1, 2, 3))]:
        env = MathJigsaw(n_agents=n, graph=graph, levels=levels)
        for seed in range(20):
            env.reset(seed=seed)
            gold = int(env.problem.answer)
            for k, agent in enumerate(env.possible_agents):
                text = env.observe(agent)["text"]  # before anyone acted: its own share only
                others = [s for j, s in enumerate(env.problem.shares) if j != k]
                assert not any(s in text for s in others), (agent, text)
                seen = read_facts(" ".join(shown_parts(text)))
                assert seen == read_facts(env.problem.shares[k]) and len(seen) == LEVELS[env.problem.level].facts_per_share
                assert sum(seen) != gold  # its own share alone is always wrong
                assert sum(read_facts(" ".join(others))) != gold  # and so is everything but its share


def test_a_single_agent_can_only_guess():
    # The best any one agent can do is answer the commonest gold answer given what its share says
    # (read as arithmetic; names and things are decoration). At level 1 that is right at most one time
    # in 19 for the sharer (a hidden change of 2-20, either way) and one in 31 for the answerer (a hidden
    # start of 10-50); estimated from 20,000 problems (biased up by the sample): 5.4 % and 4.9 %.
    source, rng = JigsawMath(2, levels=1), np.random.default_rng(0)
    seen_by: list[dict[tuple, Counter]] = [defaultdict(Counter), defaultdict(Counter)]
    n = 20_000
    for _ in range(n):
        problem = source.sample(rng)
        for k, share in enumerate(problem.shares):
            seen_by[k][tuple(read_facts(share))][problem.answer] += 1
    for k in range(2):
        best = sum(c.most_common(1)[0][1] for c in seen_by[k].values()) / n
        assert best < 0.06, (k, best)


@pytest.mark.parametrize("graph, parents", [("chain", ["sharer_2"]), ("star", ["sharer_0", "sharer_1", "sharer_2"])])
def test_the_graph_says_who_hears_whom(graph, parents):
    env = MathJigsaw(n_agents=4, graph=graph)
    env.reset(seed=0)
    assert env.infos["answerer_0"]["parents"] == parents
    assert env.ready_agents() == (["sharer_0"] if graph == "chain" else ["sharer_0", "sharer_1", "sharer_2"])
    while "answerer_0" not in env.ready_agents():
        env.step({a: f"message of {a}" for a in env.ready_agents()})
    text = env.observe("answerer_0")["text"]
    assert text.splitlines()[1:] == [f"Message from {p}: message of {p}" for p in parents]


def test_a_chain_sharer_must_pass_on_what_it_heard():
    env = MathJigsaw(n_agents=3, levels=1, credit="per_agent")
    env.reset(seed=3)
    q = [v for (v,) in env.problem.quantities]
    assert env.must_pass_on("sharer_0") == q[:1] and env.must_pass_on("sharer_1") == q[:2]
    env.step({"sharer_0": f"I have {q[0]}."})
    assert env.observe("sharer_1")["text"].endswith(f"Message from sharer_0: I have {q[0]}.")
    env.step({"sharer_1": f"{q[1]} only"})  # forgot its predecessor's quantity
    result = env.step({"answerer_0": "\\boxed{0}"})
    assert result.rewards == {"sharer_0": 1.0, "sharer_1": 0.0, "answerer_0": 0.0}
    star = MathJigsaw(n_agents=3, levels=1, graph="star")
    star.reset(seed=3)
    assert star.must_pass_on("sharer_1") == q[1:2]


@pytest.mark.parametrize("kwargs", [{}, {"n_agents": 3}, {"n_agents": 4, "graph": "star"}, {"n_agents": 3, "levels": 3}])
def test_scripted_sharers_that_pass_their_quantities_solve_it(kwargs):
    from marft_envs.demo import run_episodes

    env = MathJigsaw(**kwargs)
    assert run_episodes(env, jigsaw_policy(env, slip=0.0), episodes=60, seed=0)["accuracy"] == 1.0
    deaf = jigsaw_policy(env, slip=0.0)  # the same answerer, shown its own share only, never solves

    def alone(agent, observation, rng):
        return deaf(agent, {**observation, "text": observation["text"].splitlines()[0]}, rng)

    assert run_episodes(env, alone, episodes=60, seed=0)["accuracy"] == 0.0


def test_feedback_rounds_and_state():
    env = MathJigsaw(rounds=2)
    env.reset(seed=0, options={"problem": TOM})
    env.step({"sharer_0": PASSED})
    first = env.step({"answerer_0": "\\boxed{40}"})
    assert not any(first.terminations.values())
    assert (
        env.observe("sharer_0")["text"]
        == f"Your part of the problem: {TOM.shares[0]}\nAttempt 1: the team answered 40, which is wrong. Try again."
    )
    assert env.state() == f"Problem: {TOM.question}\nattempt 1: 40 (wrong)"  # the centralised critic sees the whole story
    env.step({"sharer_0": PASSED})
    assert all(env.step({"answerer_0": "\\boxed{42}"}).terminations.values())


def test_deterministic_with_a_seed():
    a, b = MathJigsaw(n_agents=3), MathJigsaw(n_agents=3)
    for seed in range(10):
        a.reset(seed=seed)
        b.reset(seed=seed)
        assert a.problem == b.problem
        assert [a.observe(x) for x in a.possible_agents] == [b.observe(x) for x in b.possible_agents]
    a.reset(seed=1)
    first = a.problem
    a.reset(seed=2)
    assert a.problem != first


def test_the_heldout_split_is_disjoint_from_train():
    for n, levels in [(2, 1), (2, (1, 2, 3)), (3, 2)]:
        train, test = JigsawMath(n, levels, "train"), JigsawMath(n, levels, "test")
        rng = np.random.default_rng(0)
        train_uids = {train.sample(rng).uid for _ in range(2000)}
        heldout = test.heldout(100, seed=0)
        assert len({p.uid for p in heldout}) == 100 and not train_uids & {p.uid for p in heldout}
        assert heldout == test.heldout(100, seed=0)
    env = MathJigsaw(split="test")
    options = env.heldout_options(5, seed=1)
    env.reset(seed=0, options=options[0])
    assert env.problem is options[0]["problem"] and env.problem.uid.startswith("jigsaw:")


def test_difficulties_are_the_levels():
    env = MathJigsaw(levels=(1, 3))
    assert env.difficulties() == (1, 3)
    env.reset(seed=0, options={"difficulty": 3})
    assert env.problem.level == 3 and all(len(q) == 2 for q in env.problem.quantities)
    assert MathJigsaw().difficulties() == (1, 2, 3)


def test_passes_check_env():
    report = check_env(lambda: MathJigsaw(n_agents=3, rounds=2), seeds=range(4))
    assert {"pettingzoo.api_test", "marft.determinism", "marft.pure_queries", "marft.branching"} <= set(report.passed)
    scripted = MathJigsaw(n_agents=3, rounds=2)
    check_env(lambda: MathJigsaw(n_agents=3, rounds=2), seeds=range(4), policy=jigsaw_policy(scripted, slip=0.5))


def test_registered_with_a_heldout_split_and_attempts():
    assert "marft/MathJigsaw-v0" in marft_envs.list_envs("aec") and "marft/MathJigsaw-v0" not in marft_envs.list_envs("parallel")
    entry = marft_envs.spec("marft/MathJigsaw-v0")
    assert (entry.eval_kwargs, entry.attempts_option) == ({"split": "test"}, "rounds")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_agents": 1}, "n_agents must be at least 2 (sharers and one answerer) and at most 64, got 1"),
        ({"n_agents": True}, "n_agents must be at least 2"),
        ({"graph": "ring"}, "graph must be one of ['chain', 'star'], got 'ring'"),
        ({"levels": 4}, "jigsaw levels must be one or more of [1, 2, 3]"),
        ({"levels": []}, "jigsaw levels must be one or more of [1, 2, 3]"),
        ({"split": "dev"}, "jigsaw split must be 'train', 'validation' or 'test', got 'dev'"),
        ({"profile": "general-v0"}, "the profile has no prompt for roles ['answerer', 'sharer']"),
        ({"credit": "everyone"}, "unknown credit mode 'everyone'"),
    ],
)
def test_bad_options_give_one_clear_line(kwargs, message):
    with pytest.raises(ValueError) as err:
        MathJigsaw(**kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_problem_must_fit_the_team():
    env = MathJigsaw(n_agents=3)
    with pytest.raises(ValueError, match="has 2 shares but the env has 3 agents"):
        env.reset(seed=0, options={"problem": TOM})
    with pytest.raises(TypeError, match="must be a JigsawProblem, got Problem"):
        env.reset(seed=0, options={"problem": Problem(question="1+1?", answer="2")})


def test_the_profile_is_for_general_instruct_models():
    env = MathJigsaw()
    env.reset(seed=0)
    sharer, answerer = (env.observe(a)["instructions"] for a in env.possible_agents)
    assert "Pass on your part exactly" in sharer and "Example. Your part of the problem:" in sharer and "\\boxed" not in sharer
    assert "give only the final number, written as \\boxed{answer}" in answerer
    assert "\nMessage from sharer_0: Ana has 12 pencils." in answerer  # the example labels the teammate as the observation does
