"""``check_env``: the ecosystem's checkers plus our own, on every view of a FlexEnv.

It runs, as applicable:

1. PettingZoo ``api_test`` and ``seed_test`` on the AEC view;
2. PettingZoo ``parallel_api_test`` and ``parallel_seed_test`` on the Parallel view (Dec-POMDP envs);
3. Gymnasium's ``check_env`` on the Gymnasium view (one-agent envs);
4. whole-episode determinism on the layered interface, over several seeds (PettingZoo's seed tests
   stop after a step or two);
5. pure queries: asking for the graph, every observation, the infos and the state between steps,
   any number of times, changes nothing (side effects belong in ``on_action``);
6. Dec-POMDP equivalence: for an always-empty graph, the AEC and Parallel views give identical
   observations, rewards, terminations, truncations and infos for the same seed and actions, over
   whole episodes and several seeds;
7. branching: a copy (``env.branch()``) taken before any step of an episode, mid-round included,
   given the same actions gives the same observations, rewards and infos as the original (and the
   same next episode: the random generator is copied), and playing a copy leaves the original
   untouched. Skipped for an env that declares ``branchable = False``.

Actions come from ``policy(agent, observation, rng) -> str`` (default: random printable strings
from the action space, which exercise the malformed-input paths; pass a scripted policy to also
exercise the rewarded paths).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium.utils.env_checker import data_equivalence

from marft_envs.core import FlexEnv
from marft_envs.outcomes import SHARED_REWARD, reward_structure
from marft_envs.views import AECView, GymView, ParallelView

Policy = Callable[[str, dict, np.random.Generator], str]


@dataclass
class CheckReport:
    """Which checks ran on which env (every check that ran passed; a failure raises)."""

    env: str
    passed: list[str] = field(default_factory=list)


def random_policy(agent: str, observation: dict, rng: np.random.Generator) -> str:
    """A random printable string (possibly empty): exercises the malformed-action paths."""
    length = int(rng.integers(0, 40))
    chars = [chr(int(c)) for c in rng.integers(32, 127, size=length)]
    return "".join(chars)


def check_env(
    env: FlexEnv | str | Callable[[], FlexEnv],
    *,
    seeds: Iterable[int] = range(5),
    policy: Policy | None = None,
    num_cycles: int = 50,
    max_rounds: int = 1000,
) -> CheckReport:
    """Run every applicable checker on ``env`` (an instance, a registered id, or a zero-argument factory)."""
    make = _factory(env)
    probe = make()
    report = CheckReport(env=probe.name)
    if isinstance(env, str):
        _check_registry_flags(env, probe)
    seeds = list(seeds)
    policy = policy or random_policy

    from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

    from marft_envs.core import UnknownOptionWarning

    with warnings.catch_warnings():
        # PettingZoo warns that text observations are not NumPy arrays; that is by design here.
        warnings.filterwarnings("ignore", message=r".*(NumPy|numpy|Observation|Action space for each agent).*")
        # api_test resets with options={"options": 1} to see that reset takes options; no task reads that key.
        warnings.filterwarnings("ignore", category=UnknownOptionWarning)
        api_test(AECView(make()), num_cycles=num_cycles)
        report.passed.append("pettingzoo.api_test")
        seed_test(lambda: AECView(make()), num_cycles=num_cycles)
        report.passed.append("pettingzoo.seed_test")
        if probe.metadata.get("is_parallelizable", False):
            parallel_api_test(ParallelView(make()), num_cycles=num_cycles)
            report.passed.append("pettingzoo.parallel_api_test")
            parallel_seed_test(lambda: ParallelView(make()), num_cycles=num_cycles)
            report.passed.append("pettingzoo.parallel_seed_test")
        if len(probe.possible_agents) == 1:
            from gymnasium.utils.env_checker import check_env as gym_check_env

            gym_check_env(GymView(make()), skip_render_check=True)
            report.passed.append("gymnasium.check_env")

    check_determinism(make, seeds, policy, max_rounds)
    report.passed.append("marft.determinism")
    check_reward_structure(make, seeds, policy, max_rounds)
    report.passed.append("marft.reward_structure")
    check_pure_queries(make, seeds, policy, max_rounds)
    report.passed.append("marft.pure_queries")
    if probe.metadata.get("is_parallelizable", False):
        check_dec_pomdp_equivalence(make, seeds, policy, max_rounds)
        report.passed.append("marft.dec_pomdp_equivalence")
    if probe.branchable:
        check_branching(make, seeds, policy, max_rounds)
        report.passed.append("marft.branching")
    return report


def rollout_layered(env: FlexEnv, seed: int, policy: Policy, max_rounds: int = 1000, *, query: bool = False) -> list[tuple[str, Any]]:
    """Play one episode through the layered interface; returns the trace of everything observed.

    ``query=True`` also asks for the graph, every observation, the infos and the state three times
    before each step, and raises if the answers differ (the trace is the same as without).
    """
    rng = np.random.default_rng(seed)
    trace: list[tuple[str, Any]] = [("reset", env.reset(seed=seed))]
    for _ in range(max_rounds * len(env.possible_agents)):
        if not env.agents:
            return trace
        if query:
            answers = [_queries(env) for _ in range(3)]
            if not all(data_equivalence(answers[0], a) for a in answers[1:]):
                raise AssertionError(
                    f"{env.name}: asking the same queries twice between steps gave different answers "
                    f"(round {env.round}); queries must not change the state (do side effects in on_action)"
                )
        ready = env.ready_agents()
        observations = {a: env.observe(a) for a in ready}
        trace.append(("observe", observations))
        result = env.step({a: policy(a, observations[a], rng) for a in ready})
        if result is not None:
            trace.append(("round", (result.rewards, result.terminations, result.truncations, result.infos)))
    raise AssertionError(f"{env.name}: episode with seed {seed} did not end within {max_rounds} rounds")


def check_reward_structure(make: Callable[[], FlexEnv], seeds: Iterable[int], policy: Policy, max_rounds: int = 1000) -> None:
    """The env's ``reward_structure`` is a known one and its rounds keep it: a "zero_sum" env's rewards sum to 0 in every
    round, and a round's ``shared_reward`` (the part every agent received alike) is the same for every agent of it."""
    env = make()
    structure = reward_structure(env)
    for seed in seeds:
        for kind, item in rollout_layered(env, seed, policy, max_rounds):
            if kind != "round":
                continue
            rewards, _, _, infos = item
            if structure == "zero_sum" and abs(sum(rewards.values())) > 1e-6:
                raise AssertionError(
                    f"{env.name} declares reward_structure='zero_sum' but a round paid {rewards} (sum {sum(rewards.values()):g}, "
                    f"seed {seed}): pay opponents +r and -r, or declare 'general_sum'"
                )
            shared = {float(i.get(SHARED_REWARD) or 0.0) for i in infos.values()}
            if len(shared) > 1:
                raise AssertionError(
                    f"{env.name}: the agents of one round report different shared rewards {sorted(shared)} (seed {seed}): "
                    "the shared part is what every agent received alike"
                )


def check_determinism(make: Callable[[], FlexEnv], seeds: Iterable[int], policy: Policy, max_rounds: int = 1000) -> None:
    """Two instances with the same seed and actions produce identical whole episodes."""
    env1, env2 = make(), make()
    for seed in seeds:
        t1 = rollout_layered(env1, seed, policy, max_rounds)
        t2 = rollout_layered(env2, seed, policy, max_rounds)
        for k, (a, b) in enumerate(zip(t1, t2)):
            if not data_equivalence(a, b):
                raise AssertionError(f"{env1.name}: seed {seed} diverges at step {k}: {a!r} != {b!r}")
        if len(t1) != len(t2):
            raise AssertionError(f"{env1.name}: seed {seed} gives episodes of different lengths")


def check_pure_queries(make: Callable[[], FlexEnv], seeds: Iterable[int], policy: Policy, max_rounds: int = 1000) -> None:
    """Queries between steps (graph, observations, infos, state) change nothing, then or later in the episode."""
    for seed in seeds:
        plain = rollout_layered(make(), seed, policy, max_rounds)
        queried = rollout_layered(make(), seed, policy, max_rounds, query=True)
        for k, (a, b) in enumerate(zip(plain, queried)):
            if not data_equivalence(a, b):
                raise AssertionError(
                    f"{a[0] if a else '?'} at step {k} of seed {seed} changed when the env was queried "
                    f"between steps: {a!r} != {b!r}; queries must not change the state "
                    "(do side effects in on_action)"
                )
        if len(plain) != len(queried):
            raise AssertionError(f"seed {seed}: querying the env between steps changed the episode's length")


def _queries(env: FlexEnv) -> tuple:
    """Everything a caller may ask between steps."""
    try:
        state = env.state()
    except NotImplementedError:
        state = None
    graph = env.round_graph()
    return (graph.agents, graph.edges(), {a: env.observe(a) for a in env.possible_agents}, env.infos, env.ready_agents(), state)


def check_dec_pomdp_equivalence(make: Callable[[], FlexEnv], seeds: Iterable[int], policy: Policy, max_rounds: int = 1000) -> None:
    """With an always-empty graph, the AEC and Parallel views agree on whole episodes."""
    for seed in seeds:
        aec_trace = _aec_rounds(AECView(make()), seed, policy, max_rounds)
        par_trace = _parallel_rounds(ParallelView(make()), seed, policy, max_rounds)
        if len(aec_trace) != len(par_trace):
            raise AssertionError(f"seed {seed}: AEC played {len(aec_trace)} rounds, Parallel {len(par_trace)}")
        for t, (a, p) in enumerate(zip(aec_trace, par_trace)):
            for what, x, y in zip(("observations", "rewards", "terminations", "truncations", "infos"), a, p):
                if not data_equivalence(x, y):
                    raise AssertionError(f"seed {seed}, round {t}: AEC and Parallel {what} differ: {x!r} != {y!r}")


def check_branching(make: Callable[[], FlexEnv], seeds: Iterable[int], policy: Policy, max_rounds: int = 1000) -> None:
    """A branch taken before any step replays the rest of the episode exactly; playing a branch leaves the original be.

    Even seeds step whole layers, odd seeds one agent at a time (a tree rollout branches at every
    agent node, mid-round). Before each step of the original, one branch replays the original's
    actions to the end and must match it step by step, then draw the same next episode from an
    unseeded ``reset`` (its random generator is a copy); another branch plays other actions to the
    end, and the original, going on, must not notice either.
    """
    for seed in seeds:
        one_at_a_time = seed % 2 == 1
        reference_env = make()
        reference_env.reset(seed=seed)
        actions: list[dict[str, str]] = []
        reference = _play(reference_env, _acting(policy, np.random.default_rng(seed), one_at_a_time, actions), max_rounds)
        reference_next = _next_episode(reference_env)
        reference_env.close()
        env = make()
        env.reset(seed=seed)
        for k in range(len(actions) + 1):
            where = f"{env.name}: seed {seed}: a branch taken before step {k}"
            same, other = env.branch(), env.branch()
            if same is env or other is env or same is other:
                raise AssertionError(f"{env.name}: branch() must return a new env, not the same object")
            replayed = _guarded(where, _play, same, _replay(actions[k:], where), max_rounds)
            for j, (a, b) in enumerate(zip(replayed, reference[k:])):
                if not data_equivalence(a, b):
                    raise AssertionError(
                        f"{where} diverges from the original at step {k + j}: {a!r} != {b!r}; "
                        "a branch must copy all of the episode's state (and the random generator)"
                    )
            if len(replayed) != len(reference) - k:
                raise AssertionError(f"{where} played {len(replayed)} more steps, the original {len(reference) - k}")
            if not data_equivalence(_guarded(where, _next_episode, same), reference_next):
                raise AssertionError(
                    f"{where} draws another next episode than the original (reset without a seed): copy np_random with the state"
                )
            other_actions = _acting(policy, np.random.default_rng([seed, k]), one_at_a_time, [])
            _guarded(f"{where}, played with other actions,", _play, other, other_actions, max_rounds)
            same.close()
            other.close()
            if k < len(actions):
                changed = f"{env.name}: seed {seed}: playing a branch changed the original at step {k}"
                step = _guarded(changed + ":", _play, env, _replay(actions[k : k + 1], changed), max_rounds, 1)
                if not step or not data_equivalence(step[0], reference[k]):
                    got = f"{step[0]!r} != {reference[k]!r}" if step else "its episode ended"
                    raise AssertionError(
                        f"{changed} ({got}); a branch must share no mutable state with its original "
                        "(branch_shared is for objects never changed in place)"
                    )
        if not data_equivalence(_next_episode(env), reference_next):
            raise AssertionError(
                f"{env.name}: seed {seed}: playing branches changed the original's random generator (its next episode differs)"
            )
        env.close()


def _guarded(where: str, play: Callable[..., Any], *args: Any) -> Any:
    """``play(*args)``; an error raised by the env (often: state shared with a branch) fails the check, saying where."""
    try:
        return play(*args)
    except AssertionError:
        raise
    except Exception as err:
        raise AssertionError(
            f"{where} raised {type(err).__name__}: {err}; a branch must be in its original's exact state and share no mutable state with it"
        ) from err


def _acting(policy: Policy, rng: np.random.Generator, one_at_a_time: bool, record: list[dict[str, str]]):
    """Who acts and how, per step: the policy's actions for the ready agents (or the first of them), recorded."""

    def act(env: FlexEnv, k: int) -> dict[str, str]:
        ready = env.ready_agents()[:1] if one_at_a_time else env.ready_agents()
        actions = {a: policy(a, env.observe(a), rng) for a in ready}
        record.append(actions)
        return actions

    return act


def _replay(actions: list[dict[str, str]], who: str):
    """Step with these recorded actions, in order; an env that wants more steps than they have fails."""

    def act(env: FlexEnv, k: int) -> dict[str, str]:
        if k >= len(actions):
            raise AssertionError(f"{env.name}: {who} goes on after the original's episode ended")
        return actions[k]

    return act


def _play(env: FlexEnv, act: Callable[[FlexEnv, int], dict[str, str]], max_rounds: int, steps: int | None = None) -> list[tuple]:
    """Step ``env`` from where it is (to the end, or ``steps`` steps); per step, what was seen and what came of it."""
    trace = []
    limit = max_rounds * len(env.possible_agents)
    while env.agents and len(trace) != steps:
        if len(trace) >= limit:
            raise AssertionError(f"{env.name}: the episode did not end within {max_rounds} rounds")
        ready = env.ready_agents()
        seen = (env.round, ready, {a: env.observe(a) for a in ready}, env.infos, _state(env))
        actions = act(env, len(trace))
        result = env.step(actions)
        outcome = None if result is None else (result.rewards, result.terminations, result.truncations, result.infos)
        trace.append((seen, actions, outcome))
    return trace


def _state(env: FlexEnv) -> str | None:
    try:
        return env.state()
    except NotImplementedError:  # state() is optional
        return None


def _next_episode(env: FlexEnv) -> tuple:
    """What an unseeded ``reset`` draws next (from the env's own random generator)."""
    infos = env.reset()
    return infos, {a: env.observe(a) for a in env.agents}


def _aec_rounds(env: AECView, seed: int, policy: Policy, max_rounds: int) -> list[tuple]:
    # Per round: what each agent observed at its turn, then the outcome, as a Parallel step reports it.
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    rounds = []
    for _ in range(max_rounds):
        live = [a for a in env.agents if not (env.terminations[a] or env.truncations[a])]
        if not live:
            break
        seen = {}
        for _ in live:
            agent = env.agent_selection
            seen[agent] = env.observe(agent)
            env.step(policy(agent, seen[agent], rng))
        rounds.append(
            (
                seen,
                {a: env.rewards[a] for a in live},
                {a: env.terminations[a] for a in live},
                {a: env.truncations[a] for a in live},
                {a: env.infos[a] for a in live},
            )
        )
        while env.agents and (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            env.step(None)
    return rounds


def _parallel_rounds(env: ParallelView, seed: int, policy: Policy, max_rounds: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    observations, _ = env.reset(seed=seed)
    rounds = []
    for _ in range(max_rounds):
        if not env.agents:
            break
        seen = {a: observations[a] for a in env.agents}
        actions = {a: policy(a, seen[a], rng) for a in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)
        rounds.append((seen, rewards, terminations, truncations, infos))
    return rounds


def _check_registry_flags(env_id: str, probe: FlexEnv) -> None:
    from marft_envs.registration import spec

    entry = spec(env_id)
    parallel = bool(probe.metadata.get("is_parallelizable", False))
    if entry.parallel != parallel:
        raise AssertionError(f"{env_id}: registered with parallel={entry.parallel} but metadata['is_parallelizable'] is {parallel}")
    if entry.gym != (len(probe.possible_agents) == 1):
        raise AssertionError(f"{env_id}: registered with gym={entry.gym} but it has {len(probe.possible_agents)} agents")


def _factory(env: FlexEnv | str | Callable[[], FlexEnv]) -> Callable[[], FlexEnv]:
    if isinstance(env, str):
        from marft_envs.registration import make

        return lambda: make(env)
    if isinstance(env, FlexEnv):
        template = copy.deepcopy(env)
        return lambda: copy.deepcopy(template)
    if callable(env):
        return env
    raise TypeError(f"check_env takes a FlexEnv, a registered id or a factory, got {type(env).__name__}")
