"""Self-consistency: k sampled answers per held-out problem, the plurality answer graded.

The baseline of Wang et al. 2023 ("Self-Consistency Improves Chain of Thought Reasoning in Language
Models"): sample several answers to a problem and answer with the most frequent one. Set against a team at
the same compute, it asks whether the team does better than one model voting with the tokens the team
spends. :func:`evaluate_majority` plays each held-out problem of an evaluation (the problems
:func:`~marft_agents.rollout.evaluation.evaluate` plays on the same env, split and ``n``) ``k`` times,
sampled, and grades each problem by its plurality answer (:func:`plurality`):

- a vote is one sample's final answer (``info["team_answer"]``: a one-agent env's own answer); a sample
  that gave no answer casts no vote, and a problem without a vote is wrong;
- answers are grouped as the grader reads them (:func:`~marft_agents.rollout.evaluation.same_answer`:
  ``0.5`` and ``\\frac{1}{2}`` are one answer), each joining the first group, in sampling order, it matches;
- the largest group wins; a tie goes to the group whose first vote came first in sampling order (sample 1
  before sample 2), a rule that reads neither the gold answer nor chance;
- the winning group is right when the env graded its first sample right.

``k`` is given, or matched to a token budget (``tokens``: another method's mean generated tokens per
problem on the same problems, such as a team evaluation's ``mean_tokens``). Samples are then drawn a round
at a time, one per problem, until their cumulative mean generated tokens per problem reaches the budget
(or ``max_k`` rounds), and ``k`` is the number of rounds whose cumulative mean is nearest the budget
(:func:`k_for_tokens`; a tie: the fewer). Each sample draws from a generator of its own, seeded from
``sampling.seed``, its round and its problem (:class:`~marft_agents.engines.seeded.EpisodeSeededEngine`),
so a problem's first k samples are the same whatever else is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import marft_envs
from marft_agents.engines.base import Engine
from marft_agents.engines.config import EvalSampling
from marft_agents.engines.seeded import EpisodeSeededEngine
from marft_agents.models.policy import LaMASPolicy
from marft_agents.rollout.episode import Episode
from marft_agents.rollout.evaluation import (
    HELDOUT_SEED,
    decoding_of,
    episode_options,
    episode_tokens,
    eval_plan,
    eval_sampling,
    problem_id,
    same_answer,
    seeded_draws,
)
from marft_agents.rollout.layered import RolloutEngine
from marft_envs.outcomes import TEAM_ANSWER

MAX_K = 64
"""The most samples per problem :func:`evaluate_majority` draws by default."""


@dataclass(frozen=True)
class Vote:
    """One problem's plurality vote over its samples."""

    answer: Any
    """The winning answer (its first sample's), or None when no sample answered."""
    votes: int
    """Samples in the winning group."""
    groups: int
    """Distinct answers among the votes."""
    correct: bool
    """Whether the winning answer is right (the env's grading of its first sample)."""


def plurality(answers: Sequence[Any], solved: Sequence[bool | None]) -> Vote:
    """The plurality vote of one problem's samples, in sampling order: ``answers[i]`` (None: no answer, no vote)
    and whether the env graded sample ``i`` right; ties go to the group voted first."""
    groups: list[list[int]] = []  # sample indices per distinct answer, in order of first vote
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        for group in groups:
            if same_answer(answers[group[0]], answer):
                group.append(i)
                break
        else:
            groups.append([i])
    if not groups:
        return Vote(None, 0, 0, False)
    best = max(groups, key=len)  # max keeps the first of the largest: the group voted first wins a tie
    return Vote(answers[best[0]], len(best), len(groups), bool(solved[best[0]]))


def k_for_tokens(cumulative: Sequence[float], budget: float) -> int:
    """The number of samples per problem whose cumulative mean generated tokens per problem (``cumulative[j]``:
    after j + 1 samples) is nearest ``budget``; a tie: the fewer samples."""
    if not cumulative:
        raise ValueError("k_for_tokens needs the tokens of at least one round of samples")
    return 1 + min(range(len(cumulative)), key=lambda j: (abs(cumulative[j] - budget), j))


def evaluate_majority(
    policy: LaMASPolicy,
    env_id: str,
    env_kwargs: dict,
    n: int,
    *,
    sampling: EvalSampling,
    k: int | None = None,
    tokens: float | None = None,
    max_k: int = MAX_K,
    max_new_tokens: int = 48,
    agent_max_new_tokens: Mapping[str, int] | None = None,
    stop: Sequence[str] = (),
    n_envs: int = 128,
    engine: Engine | None = None,
    split: str = "test",
    outcomes: bool = False,
) -> dict:
    """Majority vote over ``k`` samples per problem (or as many as match ``tokens``) on ``n`` held-out problems.

    Returns ``accuracy`` (the plurality answers'), ``accuracy_stderr``, ``k``, ``protocol`` (``"majority@k"``),
    ``mean_tokens`` (the k samples' generated tokens per problem), ``tokens_by_k`` (the same after each round
    drawn), ``token_budget``, ``sample_accuracy`` (one sample's), ``any_correct`` (some sample right),
    ``episodes`` (problems), ``split``, ``heldout`` and ``decoding``; with ``outcomes``, one line per problem.
    ``engine`` generates (default: the hf engine, each sample from its own seeded generator).
    """
    if (k is None) == (tokens is None):
        raise ValueError("pass k (samples per problem) or tokens (a budget of generated tokens per problem), not both")
    if sampling is None or sampling.temperature == 0:
        raise ValueError("majority vote needs sampled answers: pass sampling=EvalSampling(temperature=0.7), not greedy")
    if isinstance(max_k, bool) or not isinstance(max_k, int) or max_k < 1 or (k is not None and not 1 <= k <= max_k):
        raise ValueError(f"k must be an integer from 1 to max_k={max_k!r}, got {k!r}")
    plan = eval_plan(env_id, env_kwargs, 1, split)
    envs = [marft_envs.make(env_id, **plan.env_kwargs) for _ in range(min(n, n_envs))]
    options = episode_options(plan, envs[0], n)
    run, own = eval_sampling(sampling, max_new_tokens, agent_max_new_tokens, stop)
    engine = engine if engine is not None else EpisodeSeededEngine(policy)
    rollout = RolloutEngine(policy, run, engine=engine, agent_sampling=own)
    rounds: list[list[Episode]] = []
    cumulative: list[float] = []  # mean generated tokens per problem after each round
    total = 0.0
    while len(rounds) < (k or max_k) and (k is not None or total < tokens):
        rounds.append(sample_round(rollout, policy.device, envs, options, len(rounds), sampling.seed))
        total += sum(episode_tokens(e) for e in rounds[-1]) / len(options)
        cumulative.append(total)
    k = k if k is not None else k_for_tokens(cumulative, tokens)
    result = majority_result(rounds[:k], options, outcomes)
    return {
        **result,
        "tokens_by_k": cumulative,
        "token_budget": tokens,
        "heldout": plan.heldout,
        "split": plan.split,
        "decoding": decoding_of(run),
    }


def sample_round(rollout: RolloutEngine, device: Any, envs: list, options: list, r: int, seed: int) -> list[Episode]:
    """Round ``r`` of samples: one episode per problem (index ``r * len(options) + i`` plays problem ``i``), in
    problem order, drawn from seeds of this round's own."""
    m = len(options)
    indices = range(r * m, (r + 1) * m)
    with seeded_draws(rollout.engine, device, seed + r, indices):  # a round's own seed: the torch path too
        return rollout.collect(
            envs, indices, seed_of=lambda i: HELDOUT_SEED + i % m, options_of=lambda i: options[i % m]
        )


def majority_result(rounds: list[list[Episode]], options: list[dict | None], outcomes: bool = False) -> dict:
    """:func:`evaluate_majority`'s scores of ``rounds`` (each one sample per problem, in problem order)."""
    k, m = len(rounds), len(options)
    per_problem = [[r[i] for r in rounds] for i in range(m)]
    votes = [plurality([e.steps[-1].info.get(TEAM_ANSWER) for e in s], [e.solved for e in s]) for s in per_problem]
    right = np.array([v.correct for v in votes], dtype=float)
    out = {
        "episodes": m,
        "k": k,
        "protocol": f"majority@{k}",
        "headline_metric": "accuracy",
        "accuracy": float(right.mean()) if m else 0.0,
        "accuracy_stderr": float(right.std(ddof=1) / np.sqrt(m)) if m > 1 else 0.0,
        "sample_accuracy": float(np.mean([bool(e.solved) for s in per_problem for e in s])) if m else 0.0,
        "any_correct": float(np.mean([any(bool(e.solved) for e in s) for s in per_problem])) if m else 0.0,
        "mean_tokens": float(sum(episode_tokens(e) for s in per_problem for e in s) / m) if m else 0.0,
    }
    if outcomes:
        out["outcomes"] = [vote_outcome(i, options[i], s, v) for i, (s, v) in enumerate(zip(per_problem, votes))]
    return out


def vote_outcome(i: int, option: dict | None, samples: list[Episode], vote: Vote) -> dict:
    """One problem's line: its ``uid`` and gold ``answer``, the plurality ``team_answer`` and whether it is ``correct``
    (the keys of ``evaluation.problem_outcomes``), its ``votes`` and every sample's answer and grade."""
    problem = (option or {}).get("problem")
    gold = getattr(problem, "answer", None)
    return {
        "episode": i,
        "seed": HELDOUT_SEED + i,
        "uid": problem_id(problem),
        "answer": _text(gold),
        "team_answer": _text(vote.answer),
        "correct": vote.correct,
        "votes": vote.votes,
        "groups": vote.groups,
        "samples": [{"answer": _text(e.steps[-1].info.get(TEAM_ANSWER)), "correct": e.solved} for e in samples],
    }


def _text(value: Any) -> str | None:
    """An answer as JSON holds it: None, or its text."""
    return None if value is None else str(value)
