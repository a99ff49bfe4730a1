"""Whole episodes of every env, on a few seeds, emit exactly what they emitted at commit c2e5498.

A transcript is everything the layered interface gives out over an episode — every ready agent's
observation (instructions and text), the global state, the actions, each round's rewards,
terminations, truncations and infos, and the fresh infos after each step — serialised as JSON and
hashed. The digests below were recorded on commit c2e5498, before the ``on_action`` hook, the
shared attempts-with-feedback base, booking's profile file and the reward move; a refactor must
leave them unchanged. If an env's behaviour changes on purpose, bump its version and record new
digests (``python tests/tasks/test_transcripts.py`` prints them). The MATH and booking digests were
re-recorded when every round's infos gained ``shared_reward`` (``marft_envs.outcomes.SHARED_REWARD``),
after checking that the transcripts without that key still hash to c2e5498's digests.

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
    'marft/MathChain-v0 {"rounds": 3} scripted': "83976fc3529fa68617e2ae3893d60483f46d6a40b8f10e54e1f163d7aa4f0653",
    'marft/MathChain-v0 {"n_agents": 3} scripted': "cb0ccfef088c983cb861d2cd00192b14a7844f083f1f19702a4c58be4c73072b",
    'marft/MathSolo-v0 {"rounds": 3} scripted': "d35c794fea837d743968bff3bfcebda052f8c3d4aebfcc8c66f0b05f96f710da",
    'marft/MathDebate-v0 {"feedback": true} scripted': "daef0d2c7a9ee0a67c4c592fc10dc093048fe227672c6e3e0bfd08904a3df6cf",
    'marft/MathCORY-v0 {"rounds": 2} scripted': "ca8b733fb18af846a74605011fd1b904f151a0501f3e232c2894f365cdd1ed4a",
    "marft/Booking-v0 {} oracle": "713361a12866e94992e4c7cd7684bd0e32b09a16aa90386419340ea59ba9d6ef",
    "marft/Booking-v0 {} random_tools": "a20dd34f56b415ce4c3484c8756606b29a52aba602b55e78ffab848535972615",
    "marft/Booking-v0 {} random_text": "d6d7313e10c13f3be2007ab06532d144e39ffc0e42c204b32c9651423fc6cd39",
    'marft/BookingFixed-v0 {"credit": "per_agent"} oracle': "5dc4348420fc30a0cdb0b661d98c23d7da6115efc2aa0a3804d843878b040790",
    'marft/BookingFixed-v0 {"credit": "per_agent"} random_tools': "79355fec6647baf07fee57dbd3833567d639e2504ad46c8baea51d35de0536ef",
    'marft/BookingFixed-v0 {"credit": "per_agent"} random_text': "fa38919a86aec79af580db6912c8253ffa99e9d5246103f5286fb93989b59cbe",
    'marft/BookingDecPOMDP-v0 {"max_rounds": 4} oracle': "c8ede7bda50f593fd58933aea9e4f0eaaf00f7c26396b88526712490ce48fa2c",
    'marft/BookingDecPOMDP-v0 {"max_rounds": 4} random_tools': "d09dfffc0cba362ecd54079f1f2aa6cb3cdb59260969ffe205ce6903917e4fb7",
    'marft/BookingDecPOMDP-v0 {"max_rounds": 4} random_text': "243fe737f482ffbfadf1194b3d8912e80a3e1d0c30e9a168666d7b0860f2fba4",
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
