"""Majority vote (self-consistency): the plurality rule and its ties by hand, k from a token budget, and the whole
protocol on the tiny model."""

import pytest
import torch

import marft_envs
from marft_agents.engines.config import EvalSampling
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.rollout.majority import Vote, evaluate_majority, k_for_tokens, majority_result, plurality
from marft_envs.tasks.math.problem import Problem

PLURALITY = [  # answers in sampling order, the env's grading of each sample, the vote
    (["5", "6", "5"], [True, False, True], Vote("5", 2, 2, True)),
    (["6", "5", "5"], [False, True, True], Vote("5", 2, 2, True)),
    (["7", "5"], [False, True], Vote("7", 1, 2, False)),  # a tie: the answer sampled first wins, right or wrong
    (["5", "6", None, "6", "5"], [True, False, None, False, True], Vote("5", 2, 2, True)),  # 2-2: "5" voted first
    ([None, "9", None], [None, False, None], Vote("9", 1, 1, False)),  # no answer, no vote
    ([None, None], [None, None], Vote(None, 0, 0, False)),  # no vote at all: wrong
    (["0.5", "1", "\\frac{1}{2}"], [True, False, True], Vote("0.5", 2, 2, True)),  # grouped as the grader reads them
]


@pytest.mark.parametrize(("answers", "solved", "vote"), PLURALITY)
def test_plurality_by_hand(answers, solved, vote):
    assert plurality(answers, solved) == vote


TOKENS = [  # cumulative mean tokens per problem after 1, 2, ... samples, the budget, k
    ([30.0, 60.0, 90.0], 46.0, 2),  # |60 - 46| = 14 < |30 - 46| = 16
    ([30.0, 60.0, 90.0], 45.0, 1),  # 15 and 15: a tie goes to the fewer samples
    ([30.0, 60.0, 90.0], 500.0, 3),  # the budget out of reach: every sample drawn
    ([30.0, 60.0, 90.0], 0.0, 1),  # at least one
    ([12.5], 46.0, 1),
]


@pytest.mark.parametrize(("cumulative", "budget", "k"), TOKENS)
def test_k_for_tokens_is_the_nearest_cumulative_mean(cumulative, budget, k):
    assert k_for_tokens(cumulative, budget) == k


def _sample(index: int, answer: str | None, solved: bool, tokens: int) -> Episode:
    step = AgentStep(index, 0, "solver_0", [1], [5] * tokens, torch.zeros(tokens), "x", done=True, info={"team_answer": answer})
    return Episode(index=index, steps=[step], solved=solved)


def test_majority_result_by_hand():
    options = [{"problem": Problem("2+3?", "5", uid="p:2,3")}, {"problem": Problem("4-1?", "3", uid="p:4,1")}]
    rounds = [  # each round: one sample per problem, in problem order
        [_sample(0, "5", True, 10), _sample(1, "2", False, 20)],
        [_sample(2, "6", False, 12), _sample(3, "3", True, 8)],
        [_sample(4, "5", True, 6), _sample(5, "3", True, 4)],
    ]
    result = majority_result(rounds, options, outcomes=True)
    assert (result["k"], result["protocol"], result["episodes"]) == (3, "majority@3", 2)
    assert result["accuracy"] == 1.0 and result["sample_accuracy"] == 4 / 6 and result["any_correct"] == 1.0
    assert result["mean_tokens"] == (10 + 12 + 6 + 20 + 8 + 4) / 2
    first, second = result["outcomes"]
    assert first["uid"] == "p:2,3" and first["answer"] == "5" and first["team_answer"] == "5" and first["votes"] == 2
    assert [s["answer"] for s in second["samples"]] == ["2", "3", "3"] and second["correct"] is True
    two = majority_result(rounds[:2], options)  # 1-1 on both: the first sample's answer, right on problem 0 only
    assert two["accuracy"] == 0.5 and "outcomes" not in two


def _policy(tiny_model_dir, env_id):
    from marft_agents.models.policy import LaMASPolicy, load_base

    model, tokenizer = load_base(str(tiny_model_dir))
    return LaMASPolicy(model, tokenizer, marft_envs.make(env_id).possible_agents)


def test_majority_on_the_tiny_model_draws_k_rounds_and_matches_a_budget(tiny_model_dir):
    env, kwargs = "marft/MathSolo-v1", {"problems": "synthetic:1"}
    policy = _policy(tiny_model_dir, env)
    draw = EvalSampling(temperature=1.0, seed=3)
    with torch.no_grad():
        two = evaluate_majority(policy, env, kwargs, 3, sampling=draw, k=2, max_new_tokens=4, split="validation", outcomes=True)
        one = evaluate_majority(policy, env, kwargs, 3, sampling=draw, k=1, max_new_tokens=4, split="validation", outcomes=True)
        budget = 1.6 * two["tokens_by_k"][0]
        matched = evaluate_majority(policy, env, kwargs, 3, sampling=draw, tokens=budget, max_k=5, max_new_tokens=4, split="validation")
    assert two["k"] == 2 and two["split"] == "validation" and len(two["tokens_by_k"]) == 2
    assert all(len(o["samples"]) == 2 for o in two["outcomes"]) and [o["episode"] for o in two["outcomes"]] == [0, 1, 2]
    # each sample draws from its own generator: a problem's first sample is the same whatever else is drawn
    assert [o["samples"][0] for o in one["outcomes"]] == [o["samples"][0] for o in two["outcomes"]]
    assert one["tokens_by_k"] == two["tokens_by_k"][:1]
    # rounds are drawn until the budget is reached, and k is the nearest
    by_k = matched["tokens_by_k"]
    assert by_k[:2] == two["tokens_by_k"] and (by_k[-1] >= budget or len(by_k) == 5) and all(x < budget for x in by_k[:-1])
    assert matched["k"] == k_for_tokens(by_k, budget) and matched["mean_tokens"] == by_k[matched["k"] - 1]


def test_majority_refuses_what_it_cannot_do(tiny_model_dir):
    policy = _policy(tiny_model_dir, "marft/MathSolo-v1")
    sampled = EvalSampling(temperature=0.7)
    with pytest.raises(ValueError, match="pass k .* or tokens"):
        evaluate_majority(policy, "marft/MathSolo-v1", {}, 2, sampling=sampled)
    with pytest.raises(ValueError, match="not greedy"):
        evaluate_majority(policy, "marft/MathSolo-v1", {}, 2, sampling=EvalSampling(), k=3)
    with pytest.raises(ValueError, match="k must be an integer from 1 to max_k=4"):
        evaluate_majority(policy, "marft/MathSolo-v1", {}, 2, sampling=sampled, k=5, max_k=4)
