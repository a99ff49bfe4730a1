"""What a FlexEnv refuses before it changes anything: a bad seed, a bad action or agent, an impossible count.

Each refusal is an :class:`~marft_envs.errors.EnvUsageError` whose one line says what to pass instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from marft_envs.errors import EnvUsageError
from marft_envs.text import valid_text


def checked_actions(env, actions) -> dict[str, str]:
    """The actions ``env.step`` may apply (valid text by ready agent), or ``EnvUsageError`` in one line."""
    if not isinstance(actions, Mapping):
        ready = env.ready_agents()
        example = f"{{{ready[0]!r}: '...'}}" if ready else "{agent: '...'}"
        raise EnvUsageError(
            f"{env.name}.step takes a dict of actions by agent, got {type(actions).__name__}: pass e.g. {example} (ready now: {ready})"
        )
    if env._abandoned is not None:
        raise EnvUsageError(f"{env.name}: the episode was abandoned ({env._abandoned}); call reset()")
    if not env.agents:
        raise EnvUsageError(f"{env.name}: the episode is over; call reset() to start a new one")
    ready = set(env.ready_agents())
    acting: dict[str, str] = {}
    for agent, action in actions.items():
        if agent not in env.possible_agents:
            raise EnvUsageError(f"unknown agent {agent!r}; agents are {env.possible_agents}")
        if agent not in env.agents:
            if action is not None:
                raise EnvUsageError(f"agent {agent!r} has finished its episode: its only valid action is None")
            continue
        if not isinstance(action, str):
            raise EnvUsageError(
                f"the action of agent {agent!r} must be a string, got {type(action).__name__} (None is only for finished agents)"
            )
        if agent not in ready:
            raise EnvUsageError(env._why_not_ready(agent))
        limit = getattr(env.action_space(agent), "max_length", None)
        if limit is not None and len(action) > limit:
            raise EnvUsageError(
                f"the action of agent {agent!r} has {len(action):,} characters; its action space "
                f"allows at most {limit:,}: shorten it (a lower generation limit) before stepping"
            )
        acting[agent] = valid_text(action)
    if not acting:
        raise EnvUsageError(f"{env.name}.step() got no action for a ready agent; ready: {sorted(ready)}")
    return acting


def check_seed(name: str, seed: Any) -> int | None:
    """``seed`` as Gymnasium's seeding takes it (None or an int >= 0; numpy integers too)."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    raise EnvUsageError(f"{name}.reset: seed must be None or an integer >= 0, got {seed!r}")


MAX_AGENTS = 64
"""The most agents a team env takes: every agent's prompt holds the others' messages, so past a few
dozen no model's context holds them (a chain of ``n_agents=10**6`` ran out of memory in ``make``)."""


def check_n_agents(n: Any, maximum: int = MAX_AGENTS) -> int:
    """``n_agents`` as an env takes it: an int from 1 to ``maximum``; else ValueError in one line."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not 1 <= n <= maximum:
        raise ValueError(f"n_agents must be at least 1 and at most {maximum}, got {n!r}"[:200])
    return int(n)


MAX_HELDOUT = 10_000
"""The most held-out episodes one query returns from a source that makes them (generated problems,
seeds): the CLI's ``--episodes`` bound. The synthetic test split draws 10,000 distinct problems in
about 10 s; ``heldout_options(10**9)`` ran for minutes (MathChain) or out of memory (Booking)."""


def check_heldout_n(n: Any, limit: int, where: str) -> int:
    """``n`` for a held-out query that can supply at most ``limit`` episodes: an int from 0 to ``limit``; else ValueError in one line."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not 0 <= n <= limit:
        raise ValueError(f"{where}: n (held-out episodes) must be an integer from 0 to {limit}, got {n!r}"[:200])
    return int(n)
