"""Held-out evaluation of a LaMAS: greedy single-pass accuracy and per-role diagnostics.

The headline number is the team's single-pass accuracy with greedy decoding on held-out problems
(the designated answering agent's final answer). MARFT's own curves use a different protocol —
"solved within K attempts with right/wrong feedback" — which :func:`evaluate` reports separately,
under that name, when ``rounds > 1``.

How the env is built is declared in its registry entry (:class:`marft_envs.registration.EnvEntry`),
never guessed: ``eval_kwargs`` (a held-out split, e.g. ``{"split": "test"}``; the episodes' reset
options come from ``env.heldout_options(n, seed)``) and ``attempts_option`` (the constructor option
that sets the attempts with feedback). An env that declares no held-out split is evaluated as
configured, and one without an attempts option in its own episode protocol; the result says which
(``heldout``, ``protocol``, ``attempts``).

Per-role diagnostics show whether the system still uses its messages: each agent's own accuracy
(``info["reward_components"]["own_correct"]``), and the answering agent's accuracy when each other
agent was right vs wrong (a downstream agent can learn to answer well without reading its parent,
which shows as the same accuracy whether the parent was right or wrong). Each agent's mean response
length shows how much it writes (RL often changes that first). Where the env reports each agent's
answer (``info["answer"]``, the MATH envs), each agent's ``copy_rate`` (how often its answer is one
of the teammates' it saw in the same round: MathChain's actor copying the reasoner) and the team's
``agreement`` (how often every answer of an episode's last round is the same: MathDebate's solvers
converging) show whether the agents think for themselves.

Evaluation is greedy; an agent's own token limit (``agents.<agent_id>.max_new_tokens``) holds here
as in training (its own temperature does not: greedy decoding has none).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import marft_envs
from marft_agents.engines.base import Engine
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Sampling, agent_sampling
from marft_agents.rollout.episode import Episode
from marft_agents.rollout.layered import RolloutEngine
from marft_envs.outcomes import ANSWER, OWN_CORRECT, REWARD_COMPONENTS

HELDOUT_SEED = 20_251_130  # fixed: every run evaluates on the same held-out problems
PROTOCOLS = ("single_pass", "attempts_with_feedback", "as_configured")
"""``single_pass``: the attempts option set to 1; ``attempts_with_feedback``: set to ``rounds > 1``;
``as_configured``: the env has no attempts option and runs its episodes as ``env_kwargs`` say."""


HEADLINE_METRICS = ("accuracy", "mean_return")
"""What an env may declare as its headline (``FlexEnv.headline_metric``)."""


@dataclass(frozen=True)
class EvalPlan:
    """How one evaluation builds its envs, read from the env's registry entry."""

    env_kwargs: dict[str, Any]
    """The constructor options of the evaluation envs."""
    heldout: bool
    """True when the env declares a held-out split (its episodes come from ``heldout_options``)."""
    protocol: str
    """One of :data:`PROTOCOLS`."""
    attempts: int | None
    """Attempts per episode, or None when the protocol is ``as_configured``."""
    headline_metric: str = "accuracy"
    """What the run reports first: the env class's ``headline_metric`` ("accuracy" or "mean_return")."""


def eval_plan(env_id: str, env_kwargs: dict, rounds: int = 1) -> EvalPlan:
    """The evaluation envs' options and protocol for ``env_id``; ``rounds > 1`` needs an attempts option."""
    entry = marft_envs.spec(env_id)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer of at least 1, got {rounds!r}")
    kwargs = {**env_kwargs, **(entry.eval_kwargs or {})}
    metric = getattr(entry.factory, "headline_metric", "accuracy")
    if metric not in HEADLINE_METRICS:
        raise ValueError(f"{env_id}: headline_metric must be one of {list(HEADLINE_METRICS)}, got {metric!r}")
    if entry.attempts_option is None:
        if rounds > 1:
            raise ValueError(f"{env_id} has no attempts-with-feedback option: evaluate it with rounds=1")
        return EvalPlan(kwargs, entry.eval_kwargs is not None, "as_configured", None, metric)
    kwargs.pop("max_cycles", None)  # PettingZoo's name for the same limit would override the attempts
    kwargs[entry.attempts_option] = rounds
    protocol = "single_pass" if rounds == 1 else "attempts_with_feedback"
    return EvalPlan(kwargs, entry.eval_kwargs is not None, protocol, rounds, metric)


def evaluate(
    policy: LaMASPolicy,
    env_id: str,
    env_kwargs: dict,
    n: int,
    *,
    rounds: int = 1,
    max_new_tokens: int = 48,
    n_envs: int = 128,
    samples: int = 0,
    engine: Engine | None = None,
    agent_max_new_tokens: Mapping[str, int] | None = None,
) -> dict:
    """Greedy evaluation on ``n`` held-out problems; ``rounds > 1`` uses the feedback protocol.

    ``agent_max_new_tokens``: the agents with a token limit of their own (the others: ``max_new_tokens``).

    Returns :func:`summarize`'s keys plus ``heldout`` (bool), ``protocol`` (one of :data:`PROTOCOLS`)
    and ``attempts`` (int, or None for ``as_configured``); with ``samples > 0`` also ``samples``, the
    transcripts of that many episodes. ``engine`` generates (default: the hf engine on ``policy``).
    """
    plan = eval_plan(env_id, env_kwargs, rounds)
    envs = [marft_envs.make(env_id, **plan.env_kwargs) for _ in range(min(n, n_envs))]
    options = episode_options(plan, envs[0], n)
    greedy = Sampling(temperature=0.0, max_new_tokens=max_new_tokens)
    rollout = RolloutEngine(
        policy, greedy, engine=engine, agent_sampling=agent_sampling(greedy, max_new_tokens=agent_max_new_tokens)
    )
    episodes = rollout.collect(
        envs, range(len(options)), seed_of=lambda i: HELDOUT_SEED + i, options_of=options.__getitem__
    )
    return eval_result(episodes, plan, samples)


def episode_options(plan: EvalPlan, env: Any, n: int) -> list[dict | None]:
    """The reset options of each of ``n`` evaluation episodes (fewer when the held-out split is smaller).

    Episode ``i`` is reset with seed ``HELDOUT_SEED + i`` and these options (None without a held-out split).
    """
    return list(env.heldout_options(n, HELDOUT_SEED)) if plan.heldout else [None] * n


def eval_result(episodes: list[Episode], plan: EvalPlan, samples: int = 0) -> dict:
    """:func:`evaluate`'s result for the finished evaluation ``episodes`` (in index order) under ``plan``."""
    out = {
        **summarize(episodes),
        "heldout": plan.heldout,
        "protocol": plan.protocol,
        "attempts": plan.attempts,
        "headline_metric": plan.headline_metric,
    }
    if samples:  # whole transcripts, for the run folder
        out["samples"] = [transcript(e) for e in pick_transcripts(episodes, samples)]
    return out


def transcript(episode: Episode) -> dict:
    """One episode as plain data: every agent-step's observation, action and reward, and the outcome."""
    return {
        "episode": episode.index,
        "solved": episode.solved,
        "return": episode.team_return,
        "steps": [
            {
                "round": s.round,
                "agent": s.agent,
                "observation": s.observation,
                "action": s.text,
                "reward": s.reward,
                "reward_components": s.info.get(REWARD_COMPONENTS, {}),
            }
            for s in episode.steps
        ],
    }


def pick_transcripts(episodes: list[Episode], n: int) -> list[Episode]:
    """``n`` episodes to keep whole: half rewarded (non-zero return) and half not, where both exist, in index order.

    The first rewarded and the first unrewarded ones (the draw is the held-out split's, not chosen by
    outcome); when one kind runs short the other fills the rest.
    """
    rewarded = [e for e in episodes if any(s.reward != 0 for s in e.steps)]
    unrewarded = [e for e in episodes if not any(s.reward != 0 for s in e.steps)]
    take = min(len(rewarded), max(n - len(unrewarded), (n + 1) // 2))
    chosen = rewarded[:take] + unrewarded[: n - take]
    return sorted(chosen, key=lambda e: e.index)


def summarize(episodes: list[Episode]) -> dict:
    """Accuracy, mean return (each with its standard error) and per-role diagnostics of finished episodes.

    ``success_reported`` says whether the env reported success at all (``marft_envs.outcomes.SOLVED``);
    when it did not, ``accuracy`` is 0 by definition and mean return is the number to read.
    """
    solved = np.array([bool(e.solved) for e in episodes], dtype=float)
    returns = np.array([e.team_return for e in episodes], dtype=float)  # a shared reward once, not once per agent
    out = {
        "episodes": len(episodes),
        "success_reported": any(e.solved is not None for e in episodes),
        "accuracy": float(solved.mean()) if len(solved) else 0.0,
        "accuracy_stderr": _stderr(solved),
        "mean_return": float(returns.mean()) if len(returns) else 0.0,
        "mean_return_stderr": _stderr(returns),
        "mean_rounds": float(np.mean([1 + e.steps[-1].round for e in episodes])) if episodes else 0.0,
    }
    out["roles"] = role_diagnostics(episodes)
    agreement = answer_agreement(episodes)
    if agreement is not None:
        out["agreement"] = agreement
    return out


def _stderr(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def role_diagnostics(episodes: list[Episode]) -> dict:
    """Per agent: first-round own accuracy, the answering agent's first-round accuracy given this agent
    right or wrong, and the mean response length in tokens over all its responses (every round; the
    end-of-turn token included)."""
    own: dict[str, list[float]] = defaultdict(list)
    lengths: dict[str, list[int]] = defaultdict(list)
    given: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"right": [], "wrong": []})
    for e in episodes:
        for s in e.steps:
            lengths[s.agent].append(len(s.response))
        first = [s for s in e.steps if s.round == 0]
        if not first:
            continue
        correct = {s.agent: s.info.get(REWARD_COMPONENTS, {}).get(OWN_CORRECT) for s in first}
        for agent, c in correct.items():
            if c is not None:
                own[agent].append(float(c))
        answerer = first[-1].agent
        for agent, c in correct.items():
            if agent != answerer and c is not None and correct.get(answerer) is not None:
                given[agent]["right" if c else "wrong"].append(float(correct[answerer]))
    roles: dict[str, dict] = {a: {"mean_response_tokens": float(np.mean(v))} for a, v in lengths.items()}
    for agent, v in own.items():
        roles[agent]["own_accuracy"] = float(np.mean(v))
    for agent, split in given.items():
        for k, v in split.items():
            roles[agent][f"answer_accuracy_when_{k}"] = float(np.mean(v)) if v else None
            roles[agent][f"n_{k}"] = len(v)
    for agent, rate in copy_rates(episodes).items():
        roles[agent]["copy_rate"] = rate
    return roles


def same_answer(a: object, b: object) -> bool:
    """Whether two reported answers are the same: equal, or equivalent as math answers; no answer (None) matches
    none."""
    if a is None or b is None:
        return False
    if a == b:
        return True
    from marft_envs.rewards.math import answers_match

    return isinstance(a, str) and isinstance(b, str) and answers_match(a, b)


def copy_rates(episodes: list[Episode]) -> dict[str, float]:
    """Per agent that saw teammates' answers: the share of its steps whose answer is one of theirs.

    A step counts when the env reports answers (``info["answer"]``) and at least one of the step's
    parents (the agents whose same-round actions it saw) gave one; an agent that gives no answer
    there did not copy. MathChain's actor: how often its boxed answer is the reasoner's.
    """
    copied: dict[str, list[float]] = defaultdict(list)
    for e in episodes:
        answers = {(s.round, s.agent): s.info[ANSWER] for s in e.steps if ANSWER in s.info}
        for s in e.steps:
            if ANSWER not in s.info:
                continue
            seen = [answers[(s.round, p)] for p in s.parents if answers.get((s.round, p)) is not None]
            if seen:
                copied[s.agent].append(float(any(same_answer(s.info[ANSWER], a) for a in seen)))
    return {agent: float(np.mean(v)) for agent, v in copied.items()}


def answer_agreement(episodes: list[Episode]) -> float | None:
    """The share of episodes whose last round's answers (two or more reported) are all the same; None without any.

    An agent that gave no answer disagrees. MathDebate's solvers: how often they end on one answer.
    """
    agreed = []
    for e in episodes:
        last = [s.info[ANSWER] for s in e.steps if s.round == e.steps[-1].round and ANSWER in s.info]
        if len(last) >= 2:
            agreed.append(float(all(same_answer(last[0], a) for a in last[1:])))
    return float(np.mean(agreed)) if agreed else None
