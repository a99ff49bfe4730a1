"""Whole episodes of every env, on a few seeds, emit exactly what they emitted at commit c2e5498.

A transcript is everything the layered interface gives out over an episode — every ready agent's
observation (instructions and text), the global state, the actions, each round's rewards,
terminations, truncations and infos, and the fresh infos after each step — serialised as JSON and
hashed. The digests below were recorded on commit c2e5498, before the ``on_action`` hook, the
shared attempts-with-feedback base, booking's profile file and the reward move; a refactor must
leave them unchanged. If an env's behaviour changes on purpose, bump its version and record new
digests (``python tests/tasks/test_transcripts.py`` prints them).

The code-repair transcripts keep the first observation of each episode (the task as the agents see
it) and the rewards and terminations, not the later feedback text, whose wording comes from the
sandboxed test harness.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import marft_envs
from marft_envs.testing.checks import random_policy

SEEDS = range(4)

DIGESTS = {
    'marft/MathChain-v0 {"rounds": 3} scripted': "569f0a403f1dc5bb9167f62708d434e090e83ffcde02c2352148df4d776d7e75",
    'marft/MathChain-v0 {"n_agents": 3} scripted': "7ba42eb78531803a06f61c09d5295caff5e3ad91649e59ac735510d06385d394",
    'marft/MathSolo-v0 {"rounds": 3} scripted': "17d69b313ed40f55b5664cf3b85acb49d8e5aa6796f5ce7ae12a5757124b4c91",
    'marft/MathDebate-v0 {"feedback": true} scripted': "060da1cb969c95797b1126a11880c58f238653a2194a5b03058f303b9f1eb919",
    'marft/MathCORY-v0 {"rounds": 2} scripted': "483dddb734e80437858d79916ae704f694641885c370d2ef4adcea863718b5d6",
    "marft/Booking-v0 {} oracle": "853ad0940c108f86bae8008d7a0df1d92373c9ca0927395dae8ede02111d3993",
    "marft/Booking-v0 {} random_tools": "ab8e3977aac5164289b2e49a7200951902dce10105c928c50a464a99a048d8e3",
    "marft/Booking-v0 {} random_text": "ec4637f854a6eeea9fa1e964cedba30adebc92de28f748d8cdb023cc8f99aaae",
    'marft/BookingFixed-v0 {"credit": "per_agent"} oracle': "85f6ea82416f7fc2c138d1a17712a28b97007df570699aa70fce7d546e4d13d5",
    'marft/BookingFixed-v0 {"credit": "per_agent"} random_tools': "a01ecb73bc917405241c089672501abc0e61ea4e657db79f300378e47dbfba2e",
    'marft/BookingFixed-v0 {"credit": "per_agent"} random_text': "fc55781e6cf3c4375b1aaec3020fddbf404258087a7ab5b781afe640c3df3535",
    'marft/BookingDecPOMDP-v0 {"max_rounds": 4} oracle': "c1779f0d5a2c09bb81b6f4cbf71a36ee7a85f9b3154bf22d0ff4938f17ed2e72",
    'marft/BookingDecPOMDP-v0 {"max_rounds": 4} random_tools': "08297a4cfca4fa275324f0dc0cbe596b090c36c4d330fdf978d885f97448f223",
    'marft/BookingDecPOMDP-v0 {"max_rounds": 4} random_text': "f227a2310c55a3214f02c729d7d827371efac9ca05ea77a2c1407eb1b7e4299c",
    'marft/CodeRepair-v0 {"roles": ["locator", "tester", "fixer", "reviewer"], "rounds": 2} oracle': "5e1cd5376383046b43a827d51fd8496187239251a04f1d5d5ac94eeb6b42884a",
    'marft/CodeRepairVote-v0 {"n_agents": 2, "rounds": 2} oracle': "fded646e2c029408d48b0f0124d199fed8eca79beec71b8ddeee0061e3f6afb5",
    'marft/CodeRepairSolo-v0 {"rounds": 2} oracle': "e444548a1b31d34180b68982cfe48e93cd6366fc7708809303a0a8525d0635ef",
}


def _policies(family: str):
    if family == "math":
        from marft_envs.tasks.math.scripted import chain_policy, solver_policy

        # slipping reasoners and a copying actor in a chain; slipping solvers elsewhere
        return {"scripted": lambda env: (chain_policy if "Chain" in env.name else solver_policy)(env, slip=0.5)}
    if family == "booking":
        from marft_envs.tasks.booking.scripted import oracle_policy, random_tool_policy

        return {"oracle": oracle_policy, "random_tools": lambda env: random_tool_policy, "random_text": lambda env: random_policy}
    from marft_envs.tasks.code.scripted import oracle_policy

    return {"oracle": lambda env: oracle_policy(env, slip=0.5, patch_format="mixed")}


CASES = [
    # (env id, constructor options, family)
    ("marft/MathChain-v0", {"rounds": 3}, "math"),
    ("marft/MathChain-v0", {"n_agents": 3}, "math"),
    ("marft/MathSolo-v0", {"rounds": 3}, "math"),
    ("marft/MathDebate-v0", {"feedback": True}, "math"),
    ("marft/MathCORY-v0", {"rounds": 2}, "math"),
    ("marft/Booking-v0", {}, "booking"),
    ("marft/BookingFixed-v0", {"credit": "per_agent"}, "booking"),
    ("marft/BookingDecPOMDP-v0", {"max_rounds": 4}, "booking"),
    ("marft/CodeRepair-v0", {"rounds": 2, "roles": ["locator", "tester", "fixer", "reviewer"]}, "code"),
    ("marft/CodeRepairVote-v0", {"rounds": 2, "n_agents": 2}, "code"),
    ("marft/CodeRepairSolo-v0", {"rounds": 2}, "code"),
]


def transcript(env, seed: int, policy, *, full: bool = True) -> list:
    """What ``env`` emits over one episode played by ``policy`` from ``seed`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    out: list = [env.reset(seed=seed)]
    while env.agents:
        ready = env.ready_agents()
        observations = {a: env.observe(a) for a in ready}
        try:
            state = env.state_text()
        except NotImplementedError:
            state = None
        actions = {a: policy(a, observations[a], rng) for a in ready}
        result = env.step(actions)
        shown = observations if full or len(out) == 1 else None
        outcome = (
            None
            if result is None
            else (
                (result.rewards, result.terminations, result.truncations, result.infos)
                if full
                else (result.rewards, result.terminations, result.truncations)
            )
        )
        out.append((shown, state if full else None, actions if full else None, outcome, env.infos if full else None))
    return out


def digest(env_id: str, kwargs: dict, family: str, policy_name: str) -> str:
    make_policy = _policies(family)[policy_name]
    episodes = []
    for seed in SEEDS:
        env = marft_envs.make(env_id, **kwargs)
        episodes.append(transcript(env, seed, make_policy(env), full=family != "code"))
    text = json.dumps(episodes, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _key(env_id: str, kwargs: dict, policy_name: str) -> str:
    return f"{env_id} {json.dumps(kwargs, sort_keys=True)} {policy_name}"


PARAMS = [(env_id, kwargs, family, name) for env_id, kwargs, family in CASES for name in _policies(family)]


@pytest.mark.parametrize("env_id, kwargs, family, policy_name", PARAMS, ids=[_key(e, k, p) for e, k, _, p in PARAMS])
def test_transcripts_are_unchanged(env_id, kwargs, family, policy_name):
    if family == "code":
        from marft_envs.sandbox import detect_isolation

        if not detect_isolation().contained:  # the oracle's patches run in the sandbox
            pytest.skip(f"no contained sandbox here:\n{detect_isolation().describe()}")
    assert digest(env_id, kwargs, family, policy_name) == DIGESTS[_key(env_id, kwargs, policy_name)]


if __name__ == "__main__":
    for env_id, kwargs, family, name in PARAMS:
        print(f"    {_key(env_id, kwargs, name)!r}: {digest(env_id, kwargs, family, name)!r},")
