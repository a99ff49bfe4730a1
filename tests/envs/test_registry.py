"""Every registered env passes every checker, through every registry it is in."""

import importlib
import re

import gymnasium
import pettingzoo
import pytest

import marft_envs
from marft_envs.testing import check_env


def shipped(kind: str = "aec") -> list[str]:
    """The ids this package ships (not test envs other test modules register, nor adapters' ids)."""
    return [
        i
        for i in marft_envs.list_envs(kind)
        if marft_envs.registration.entry_point(marft_envs.spec(i).target).startswith("marft_envs.tasks.")
    ]


AEC_IDS = shipped("aec")


def test_each_kind_has_at_least_one_id():
    assert "marft/MathChain-v0" in marft_envs.list_envs("aec")
    assert "marft/MathDebate-v0" in marft_envs.list_envs("parallel")
    assert "marft/MathSolo-v0" in marft_envs.list_envs("gym")
    assert shipped() == AEC_IDS and len(AEC_IDS) == 19


@pytest.mark.parametrize("env_id", AEC_IDS)
def test_registered_env_passes_every_checker(env_id):
    report = check_env(env_id, seeds=range(10), num_cycles=200)
    expected = {
        "pettingzoo.api_test",
        "pettingzoo.seed_test",
        "marft.determinism",
        "marft.reward_structure",
        "marft.pure_queries",
        "marft.branching",
    }  # branching: a copy mid-episode, the SQLite world and sandboxed grading included
    if env_id in marft_envs.list_envs("parallel"):
        expected |= {"pettingzoo.parallel_api_test", "pettingzoo.parallel_seed_test", "marft.dec_pomdp_equivalence"}
    if env_id in marft_envs.list_envs("gym"):
        expected |= {"gymnasium.check_env"}
    assert expected <= set(report.passed)


def scripted(env_id):
    """Env kwargs and a policy factory ``make_policy(env)`` that reach each family's rewarded paths."""
    if env_id.startswith("marft/MathJigsaw-"):
        from marft_envs.tasks.math.scripted import jigsaw_policy

        return {"rounds": 3, "n_agents": 3}, lambda env: jigsaw_policy(env, slip=0.5)
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
    if env_id == "marft/NumberDuel-v0":
        # a player names a number near the cap (sometimes over it): wins, losses, ties and invalid answers all occur
        return {}, lambda env: lambda agent, obs, rng: f"\\boxed{{{env.cap + int(rng.integers(-2, 2))}}}"
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
    env = gymnasium.make("marft/MathSolo-v1")
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
    "marft/MathChain-v1": ({"split": "test"}, "rounds"),
    "marft/MathSolo-v0": ({"split": "test"}, "rounds"),
    "marft/MathSolo-v1": ({"split": "test"}, "rounds"),
    "marft/MathCORY-v0": ({"split": "test"}, "rounds"),
    "marft/MathCORY-v1": ({"split": "test"}, "rounds"),
    "marft/MathJigsaw-v0": ({"split": "test"}, "rounds"),
    "marft/MathJigsaw-v1": ({"split": "test"}, "rounds"),
    "marft/MathJigsaw-v2": ({"split": "test"}, "rounds"),
    "marft/MathJigsawSolo-v0": ({"split": "test"}, "rounds"),
    "marft/MathDebate-v0": ({"split": "test"}, None),  # its rounds are debate rounds, not attempts
    "marft/MathDebate-v1": ({"split": "test"}, None),
    "marft/CodeRepair-v0": ({"split": "test"}, "rounds"),
    "marft/CodeRepairVote-v0": ({"split": "test"}, "rounds"),
    "marft/CodeRepairSolo-v0": ({"split": "test"}, "rounds"),
    "marft/Booking-v0": (None, None),
    "marft/BookingFixed-v0": (None, None),
    "marft/BookingDecPOMDP-v0": (None, None),
    "marft/NumberDuel-v0": (None, None),  # each seed draws a cap: no held-out split, no attempts
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


# -- one version history per env family ------------------------------------------------------------


def version_history_ids(family: str) -> list[str]:
    """The ids heading the entries of a family package's ``Version history`` (docs/contract.md, "Versioning")."""
    doc = importlib.import_module(family).__doc__ or ""
    _, found, history = doc.partition("\nVersion history")
    assert found, f"{family}: its docstring has no 'Version history' section; add one (docs/contract.md, 'Versioning')"
    headings = [line for line in history.splitlines() if re.fullmatch(r"    ``\S+``(, ``\S+``)*:", line)]
    return re.findall(r"``(\S+?)``", "\n".join(headings))


@pytest.mark.parametrize("env_id", AEC_IDS)
def test_each_shipped_id_is_in_its_familys_version_history(env_id):
    module = marft_envs.registration.entry_point(marft_envs.spec(env_id).target).partition(":")[0]
    family = module.rpartition(".")[0]  # marft_envs.tasks.<family>
    doc = importlib.import_module(module).__doc__ or ""
    assert doc.startswith(f"``{env_id}``: "), f"{module}: its docstring, the env's reference, starts with its id"
    assert f"\nVersion history: the family's, in :mod:`{family}`.\n" in doc, f"{module}: point to {family}'s version history"
    ids = version_history_ids(family)
    assert ids.count(env_id) == 1, f"{env_id}: head its entries once in {family}'s version history (found {ids.count(env_id)})"


def test_a_family_history_lists_only_registered_ids():
    for family in ("marft_envs.tasks.math", "marft_envs.tasks.booking", "marft_envs.tasks.code"):
        assert set(version_history_ids(family)) <= set(AEC_IDS), family


# -- one env per id ---------------------------------------------------------------------------------


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made by a test leave our registry as it was (other tests list every env)."""
    from marft_envs import registration

    monkeypatch.setattr(registration, "_registry", dict(registration._registry))


class Impostor(marft_envs.FlexEnv):
    """Not the built-in MathChain, whatever id it is registered under."""


@pytest.mark.usefixtures("scratch_registry")
def test_a_known_id_is_not_re_registered_to_another_env():
    from marft_envs.tasks.math import MathChain

    with pytest.raises(marft_envs.RegistrationError) as info:
        marft_envs.register("marft/MathChain-v1", Impostor)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "env id 'marft/MathChain-v1' is already registered to marft_envs.tasks.math.chain:MathChain; refusing to re-register it to "
    )
    assert message.endswith(":Impostor: register your env under an id of its own (e.g. 'you/Name-v0')")
    assert isinstance(info.value, ValueError)
    # nothing changed, in any registry
    assert marft_envs.spec("marft/MathChain-v1").factory is MathChain
    assert isinstance(pettingzoo.make("aec", "marft/MathChain-v1").env, MathChain)
    with pytest.raises(marft_envs.RegistrationError, match="already registered to .*with other gym"):
        marft_envs.register("marft/MathSolo-v0", marft_envs.spec("marft/MathSolo-v0").factory, gym=False)


@pytest.mark.usefixtures("scratch_registry")
def test_the_same_registration_again_changes_nothing():
    entry = marft_envs.spec("marft/MathSolo-v0")
    marft_envs.register("marft/MathSolo-v0", entry.factory, gym=True, eval_kwargs=entry.eval_kwargs, attempts_option=entry.attempts_option)
    assert marft_envs.spec("marft/MathSolo-v0") == entry
    # a module imported again (or reloaded) defines a new class object under the same name: accepted
    reloaded = type("Impostor", (Impostor,), {"__module__": Impostor.__module__, "__qualname__": "Impostor"})
    marft_envs.register("test/Impostor-v0", Impostor)
    marft_envs.register("test/Impostor-v0", reloaded)
    assert marft_envs.spec("test/Impostor-v0").factory is reloaded


def test_an_entry_point_that_takes_a_known_id_fails_in_one_line(monkeypatch, scratch_registry, tmp_path):
    from importlib import metadata

    from marft_envs import plugins

    (tmp_path / "impostor_plugin.py").write_text(
        "import marft_envs\n\nclass Fake(marft_envs.FlexEnv):\n    pass\n\n"
        "def register_envs():\n    marft_envs.register('marft/MathChain-v1', Fake)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    point = metadata.EntryPoint(name="impostor", value="impostor_plugin:register_envs", group=plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: [point] if group == point.group else [])
    monkeypatch.setattr(plugins, "_loaded_entry_points", False)
    with pytest.raises(plugins.PluginError) as info:
        plugins.load_entry_points()
    assert "\n" not in str(info.value)
    assert str(info.value).startswith(
        "entry point 'impostor' (impostor_plugin:register_envs) of group 'marft.envs' "
        "failed: RegistrationError: env id 'marft/MathChain-v1' is already registered"
    )
    assert marft_envs.spec("marft/MathChain-v1").factory.__name__ == "MathChain"


@pytest.mark.parametrize("command", [["train"], ["envs"]])
def test_the_cli_refuses_an_import_that_takes_a_known_id(tmp_path, command):
    import os
    import subprocess
    import sys

    (tmp_path / "impostor_task.py").write_text(
        "import marft_envs\n\nclass Always(marft_envs.FlexEnv):\n    pass\n\nmarft_envs.register('marft/MathChain-v1', Always)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    overrides = ["env=marft/MathChain-v1", f"run_dir={tmp_path / 'run'}"] if command == ["train"] else []
    out = subprocess.run(
        [sys.executable, "-m", "marft_agents.cli", *command, "--import", "impostor_task", *overrides],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(
        f"marft {command[0]}: error: cannot import 'impostor_task' (--import / imports): "
        "RegistrationError: env id 'marft/MathChain-v1' is already registered to "
        "marft_envs.tasks.math.chain:MathChain; refusing to re-register it to "
        "impostor_task:Always"
    ), out.stderr
    assert not (tmp_path / "run").exists()


def test_import_marft_envs_imports_no_task_family_until_one_is_made():
    import subprocess
    import sys

    code = (
        "import sys, marft_envs; before = sorted(m for m in sys.modules if m.startswith('marft_envs.tasks') "
        "or m.startswith('marft_envs.sandbox') or m == 'sqlite3'); marft_envs.make('marft/MathSolo-v0'); "
        "after = sorted(m for m in sys.modules if m.startswith('marft_envs.tasks.')); "
        "print(before, 'marft_envs.tasks.math.solo' in after, any(m.startswith('marft_envs.tasks.code') for m in after))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True", "False"], out.stdout  # MATH made: MATH imported, code repair not


def test_lazy_builtin_entries_declare_what_their_classes_say():
    for env_id in AEC_IDS:
        entry = marft_envs.spec(env_id)
        assert isinstance(entry.target, str), env_id
        assert entry.parallel == bool(entry.factory.metadata.get("is_parallelizable", False)), env_id
        assert entry.gym == (len(entry.factory().possible_agents) == 1), env_id


def test_a_lazy_factory_needs_its_views_declared():
    with pytest.raises(ValueError, match="pass parallel="):
        marft_envs.register("test/Lazy-v0", "somewhere.module:Env")
    with pytest.raises(ValueError, match="'package.module:Class'"):
        marft_envs.register("test/Lazy-v0", "not a target", parallel=False)
