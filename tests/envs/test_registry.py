"""Every registered env passes every checker, through every registry it is in."""

import gymnasium
import pettingzoo
import pytest

import marft_envs
from marft_envs.testing import check_env

AEC_IDS = marft_envs.list_envs("aec")


def test_each_kind_has_at_least_one_id():
    assert "marft/MathChain-v0" in marft_envs.list_envs("aec")
    assert "marft/MathDebate-v0" in marft_envs.list_envs("parallel")
    assert "marft/MathSolo-v0" in marft_envs.list_envs("gym")
    assert marft_envs.list_envs() == AEC_IDS


@pytest.mark.parametrize("env_id", AEC_IDS)
def test_registered_env_passes_every_checker(env_id):
    report = check_env(env_id, seeds=range(10), num_cycles=200)
    expected = {"pettingzoo.api_test", "pettingzoo.seed_test", "marft.determinism", "marft.pure_queries",
                "marft.branching"}  # branching: a copy mid-episode, the SQLite world and sandboxed grading included
    if env_id in marft_envs.list_envs("parallel"):
        expected |= {"pettingzoo.parallel_api_test", "pettingzoo.parallel_seed_test", "marft.dec_pomdp_equivalence"}
    if env_id in marft_envs.list_envs("gym"):
        expected |= {"gymnasium.check_env"}
    assert expected <= set(report.passed)


def scripted(env_id):
    """Env kwargs and a policy factory ``make_policy(env)`` that reach each family's rewarded paths."""
    if env_id.startswith("marft/Math"):
        from marft_envs.tasks.math.scripted import chain_policy, solver_policy

        # Debate, Solo and CORY (pioneer/observer): every agent solves with \boxed{}.
        make_policy = chain_policy if "Chain" in env_id else solver_policy
        return {"rounds": 3}, lambda env: make_policy(env, slip=0.5)
    if env_id.startswith("marft/Booking"):
        from marft_envs.tasks.booking.scripted import oracle_policy

        return {}, oracle_policy
    if env_id.startswith("marft/CodeRepair"):
        from marft_envs.sandbox import detect_isolation
        from marft_envs.tasks.code.scripted import oracle_policy as code_oracle

        if not detect_isolation().contained:  # scripted patches run in the sandbox
            pytest.skip(f"no contained sandbox here:\n{detect_isolation().describe()}")

        return {"rounds": 2}, lambda env: code_oracle(env, slip=0.5, patch_format="mixed")
    raise KeyError(f"no scripted policy for {env_id}: add one to scripted() in this test")


@pytest.mark.parametrize("env_id", AEC_IDS)
def test_registered_env_is_deterministic_with_a_scripted_policy(env_id):
    # Random strings only reach the malformed-answer path; scripted answers reach the rewarded one.
    from gymnasium.utils.env_checker import data_equivalence

    from marft_envs.testing.checks import rollout_layered

    kwargs, make_policy = scripted(env_id)
    for seed in range(5):
        traces = []
        for _ in range(2):
            env = marft_envs.make(env_id, **kwargs)
            traces.append(rollout_layered(env, seed, make_policy(env)))
        assert data_equivalence(traces[0], traces[1])
        rewards = [r for kind, r in traces[0] if kind == "round"]
        assert rewards, "the episode had no rounds"


def test_ecosystem_make_functions():
    assert isinstance(pettingzoo.make("aec", "marft/MathChain-v0"), pettingzoo.AECEnv)
    assert isinstance(pettingzoo.make("parallel", "marft/MathDebate-v0", n_agents=2), pettingzoo.ParallelEnv)
    env = gymnasium.make("marft/MathSolo-v0")
    obs, info = env.reset(seed=0)
    assert obs["text"].startswith("Problem:") and info["parents"] == []


def test_make_views_and_errors():
    assert isinstance(marft_envs.make("marft/MathChain-v0"), marft_envs.FlexEnv)
    assert isinstance(marft_envs.make("marft/MathChain-v0", view="aec"), marft_envs.AECView)
    with pytest.raises(KeyError, match="did you mean 'marft/MathChain-v0'"):
        marft_envs.make("marft/MathChian-v0")
    with pytest.raises(ValueError, match="unknown view 'cuda'"):
        marft_envs.make("marft/MathChain-v0", view="cuda")
    with pytest.raises(ValueError, match="no Gymnasium view"):
        marft_envs.make("marft/MathChain-v0", view="gym")
    with pytest.raises(ValueError, match=r"reasoner_0 -> actor_0.*use the AEC view"):
        marft_envs.make("marft/MathChain-v0", view="parallel")
    with pytest.raises(ValueError, match="unknown kind"):
        marft_envs.list_envs("vector")


def test_import_stays_torch_free():
    import subprocess
    import sys

    code = (
        "import sys, marft_envs, marft_envs.testing, marft_envs.tasks.math.scripted;"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft', 'datasets') if m in sys.modules);"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"marft_envs imported {out.stdout.strip()} {out.stderr[-500:]}"


# What each shipped env declares for held-out evaluation: (eval_kwargs, attempts_option).
EVAL_DECLARATIONS = {
    "marft/MathChain-v0": ({"split": "test"}, "rounds"),
    "marft/MathSolo-v0": ({"split": "test"}, "rounds"),
    "marft/MathCORY-v0": ({"split": "test"}, "rounds"),
    "marft/MathDebate-v0": ({"split": "test"}, None),  # its rounds are debate rounds, not attempts
    "marft/CodeRepair-v0": ({"split": "test"}, "rounds"),
    "marft/CodeRepairVote-v0": ({"split": "test"}, "rounds"),
    "marft/CodeRepairSolo-v0": ({"split": "test"}, "rounds"),
    "marft/Booking-v0": (None, None),
    "marft/BookingFixed-v0": (None, None),
    "marft/BookingDecPOMDP-v0": (None, None),
}


def test_every_shipped_env_declares_how_it_is_evaluated():
    assert sorted(EVAL_DECLARATIONS) == AEC_IDS
    for env_id, declared in EVAL_DECLARATIONS.items():
        entry = marft_envs.spec(env_id)
        assert (entry.eval_kwargs, entry.attempts_option) == declared, env_id


@pytest.mark.parametrize("env_id", AEC_IDS)
def test_the_declared_evaluation_options_are_the_envs_own(env_id):
    entry = marft_envs.spec(env_id)
    kwargs = dict(entry.eval_kwargs or {})
    if entry.attempts_option is not None:
        kwargs[entry.attempts_option] = 2
    env = marft_envs.make(env_id, **kwargs)  # a misspelt option would raise TypeError here
    if entry.attempts_option is not None:
        assert env.max_rounds == 2 and env.feedback
    if entry.eval_kwargs is not None:
        options = env.heldout_options(3, seed=0)
        assert len(options) == 3
        for k, opts in enumerate(options):
            env.reset(seed=k, options=opts)
            assert env.problem is opts["problem"]
