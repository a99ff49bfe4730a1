"""Held-out evaluation of a LaMAS: greedy single-pass accuracy and per-role diagnostics.

The headline number is the team's single-pass accuracy with greedy decoding on held-out problems
(the designated answering agent's final answer). MARFT's own curves use a different protocol —
"solved within K attempts with right/wrong feedback" — which :func:`evaluate` reports separately,
under that name, when ``rounds > 1``.

Per-role diagnostics show whether the system still uses its messages: each agent's own accuracy
(``info["reward_components"]["own_correct"]``), and the answering agent's accuracy when each other
agent was right vs wrong (see ``EXPERIMENTS.md``: a downstream agent can learn to route around its
parent). Each agent's mean response length shows how much it writes (RL often changes that first).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

import marft_envs
from marft_agents.engines.base import Engine
from marft_agents.policy import LaMASPolicy, Sampling
from marft_agents.rollout import Episode, RolloutEngine

HELDOUT_SEED = 20_251_130  # fixed: every run evaluates on the same held-out problems


def evaluate(
    policy: LaMASPolicy,
    env_id: str,
    env_kwargs: dict,
    n: int,
    *,
    rounds: int = 1,
    max_new_tokens: int = 48,
    n_envs: int = 128,
    engine: Engine | None = None,
) -> dict:
    """Greedy evaluation on ``n`` held-out problems; ``rounds > 1`` uses the feedback protocol.

    ``engine`` generates (default: the hf engine on ``policy``).
    """
    envs = [_heldout_env(env_id, env_kwargs, rounds) for _ in range(min(n, n_envs))]
    options_of = lambda i: None  # noqa: E731
    if hasattr(envs[0], "problems"):
        problems = envs[0].problems.heldout(n, seed=HELDOUT_SEED)
        n = len(problems)
        options_of = lambda i: {"problem": problems[i]}  # noqa: E731
    rollout = RolloutEngine(policy, Sampling(temperature=0.0, max_new_tokens=max_new_tokens), engine=engine)
    episodes = rollout.collect(envs, range(n), seed_of=lambda i: HELDOUT_SEED + i, options_of=options_of)
    return summarize(episodes)


def _heldout_env(env_id: str, env_kwargs: dict, rounds: int):
    # MATH-style envs take a test split and a number of attempts; other envs are used as they are.
    try:
        return marft_envs.make(env_id, **{**env_kwargs, "split": "test", "rounds": rounds})
    except TypeError:
        return marft_envs.make(env_id, **env_kwargs)


def summarize(episodes: list[Episode]) -> dict:
    """Accuracy, its standard error, mean return and per-role diagnostics of finished episodes."""
    solved = np.array([e.solved for e in episodes], dtype=float)
    returns = [sum(s.reward for s in e.steps) for e in episodes]
    out = {
        "episodes": len(episodes),
        "accuracy": float(solved.mean()) if len(solved) else 0.0,
        "accuracy_stderr": float(solved.std(ddof=1) / np.sqrt(len(solved))) if len(solved) > 1 else 0.0,
        "mean_return": float(np.mean(returns)) if returns else 0.0,
        "mean_rounds": float(np.mean([1 + e.steps[-1].round for e in episodes])) if episodes else 0.0,
    }
    out["roles"] = role_diagnostics(episodes)
    return out


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
        correct = {s.agent: s.info.get("reward_components", {}).get("own_correct") for s in first}
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
    return roles
