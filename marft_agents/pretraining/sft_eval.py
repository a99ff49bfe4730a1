"""Held-out evaluation during and after pre-training, through the same rollout engine as ``marft eval``.

The model being trained is wrapped as a one-adapter policy (:class:`marft_agents.models.bare.ModelAsPolicy`)
and played by :class:`marft_agents.rollout.layered.RolloutEngine` through the hf engine, the one
generation path of training and ``marft eval``; the metrics are those of
:func:`marft_agents.rollout.evaluation.summarize` (``accuracy``, per-role ``own_accuracy`` and
``answer_accuracy_when_right``/``_wrong``, ...), plus what only pre-training reports: accuracy per
problem level, whether the chain's reasoner finished its steps, and pass@k of sampled runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch

from marft_agents.engines.hf import HFEngine
from marft_agents.models.bare import ModelAsPolicy
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.episode import Episode
from marft_agents.rollout.evaluation import summarize
from marft_agents.rollout.layered import RolloutEngine
from marft_envs.tasks.math.chain import MathChain
from marft_envs.tasks.math.problems import Problem
from marft_envs.tasks.math.solo import MathSolo
from marft_envs.tasks.math.synthetic import SyntheticMath


def _rate(xs: Sequence[bool]) -> float | None:
    return round(float(np.mean(xs)), 4) if len(xs) else None


def play(
    model, tokenizer, env_class, problems: Sequence[Problem], *, temperature: float = 0.0, max_new_tokens: int = 48
) -> list[Episode]:
    """One single-pass episode of ``env_class`` (test split) per problem, all envs stepped together.

    Each layer (the chain's reasoners, then its actors) is one batch over every episode, generated
    in slices of 256 prompts.
    """
    envs = [env_class(split="test") for _ in problems]
    policy = ModelAsPolicy(model, tokenizer)
    rollout = RolloutEngine(
        policy, Sampling(temperature=temperature, max_new_tokens=max_new_tokens), engine=HFEngine(policy)
    )
    return rollout.collect(envs, range(len(problems)), options_of=lambda i: {"problem": problems[i]})


def _text(episode: Episode, agent: str) -> str:
    return next(s.text for s in episode.steps if s.agent == agent)


def chain_breakdown(episodes: Sequence[Episode], problems: Sequence[Problem]) -> dict:
    """Accuracy per level; how often the reasoner finished (wrote at least as many lines as the worked
    solution has steps), and the accuracy then. ``problems[e.index]`` is episode ``e``'s problem."""
    by_level = defaultdict(list)
    finished = []
    for e in episodes:
        problem = problems[e.index]
        by_level[problem.level].append(e.solved)
        finished.append(len(_text(e, "reasoner_0").splitlines()) >= len(problem.solution.splitlines()))
    return {
        "accuracy_by_level": {str(k): _rate(v) for k, v in sorted(by_level.items())},
        "reasoner_finished": _rate(finished),
        "accuracy_when_finished": _rate([e.solved for e, f in zip(episodes, finished) if f]),
    }


@torch.no_grad()
def evaluate_chain(
    model,
    tokenizer,
    n: int = 200,
    seed: int = 0,
    *,
    temperature: float = 0.0,
    samples: int = 1,
    max_new_tokens: int = 48,
) -> dict:
    """The 2-agent MathChain on ``n`` held-out (test-split) problems: greedy by default.

    With ``temperature > 0`` and ``samples = k``, every problem is played ``k`` times: ``pass@1`` is
    the mean accuracy over all episodes, ``pass@k`` the fraction of problems solved at least once.
    """
    was_training = model.training
    model.eval()
    problems = SyntheticMath(split="test").heldout(n, seed)
    played = [p for p in problems for _ in range(samples)]
    with torch.random.fork_rng():  # sampled evaluations are reproducible and leave the global RNG alone
        torch.manual_seed(seed)
        episodes = play(model, tokenizer, MathChain, played, temperature=temperature, max_new_tokens=max_new_tokens)
    model.train(was_training)
    out = {"n": len(problems), "temperature": temperature, **summarize(episodes), **chain_breakdown(episodes, played)}
    if samples > 1:
        solved = [any(e.solved for e in episodes[i * samples : (i + 1) * samples]) for i in range(len(problems))]
        out["samples"] = samples
        out["pass@1"] = _rate([e.solved for e in episodes])
        out[f"pass@{samples}"] = _rate(solved)
    out["examples"] = [
        {
            "gold": played[e.index].answer,
            "reasoner_0": _text(e, "reasoner_0"),
            "actor_0": _text(e, "actor_0"),
            "solved": e.solved,
        }
        for e in episodes[:3]
    ]
    return out


@torch.no_grad()
def evaluate_solo(model, tokenizer, n: int = 200, seed: int = 0, *, max_new_tokens: int = 48) -> dict:
    """Greedy accuracy of the single ``solver`` (MathSolo) on ``n`` held-out problems, overall and per level."""
    was_training = model.training
    model.eval()
    problems = SyntheticMath(split="test").heldout(n, seed)
    episodes = play(model, tokenizer, MathSolo, problems, max_new_tokens=max_new_tokens)
    model.train(was_training)
    by_level = defaultdict(list)
    for e in episodes:
        by_level[problems[e.index].level].append(e.solved)
    return {
        "n": len(problems),
        **summarize(episodes),
        "accuracy_by_level": {str(k): _rate(v) for k, v in sorted(by_level.items())},
    }
