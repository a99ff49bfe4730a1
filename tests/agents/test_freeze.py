"""Who trains (issue 37, item 2): ``agents.<agent_id>.train=false`` freezes an agent for every algorithm.

A frozen agent still acts with its adapter; no update changes it (its adapter and its own critic part stay
bit-identical) and no optimizer holds it. The run refuses, in one line, a config in which no agent trains,
an unknown agent, or one agent frozen on a shared adapter.
"""

import json

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards
from signal_env import ParityChain

import marft_envs
from marft_agents.algorithms import build_learner, config_class, names
from marft_agents.cli import main as cli
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs.report import summary_table
from marft_agents.settings.agents import AgentSettings, frozen_agents
from marft_agents.training.config import ConfigError, TrainConfig, load, validate
from marft_agents.training.trainer import train
from marft_envs.outcomes import SHARED_REWARD

CHAIN = "signal_env:ParityChain"
SMALL = {"minibatch_size": 8, "ppo_epochs": 1}
"""Every learner's config: one pass in one minibatch (GRPO and CORY take the same two keys)."""


@pytest.fixture(scope="module")
def chain_policy(tiny_model_dir):
    """One policy on ParityChain's agents (reasoner_0 -> actor_0), one LoRA adapter each, shared by the tests."""
    model, tokenizer = load_base(str(tiny_model_dir))
    return LaMASPolicy(model, tokenizer, ParityChain().possible_agents)


def snapshot(module_or_state) -> dict[str, torch.Tensor]:
    state = module_or_state if isinstance(module_or_state, dict) else module_or_state.state_dict()
    return {k: v.detach().clone() for k, v in state.items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def optimizers_of(algo) -> list[torch.optim.Optimizer]:
    """Every optimizer a learner keeps: its adapters', its critic's, its per-agent critics'."""
    out = list(algo.optimizers.values())
    if algo.critic is not None:
        out.append(algo.critic.optimizer)
    return out + list(getattr(algo, "critic_optimizers", {}).values())


def held(optimizers: list[torch.optim.Optimizer]) -> set[int]:
    """Ids of every parameter the optimizers step or keep state for."""
    ids = {id(p) for o in optimizers for g in o.param_groups for p in g["params"]}
    return ids | {id(p) for o in optimizers for p in o.state}


def own_critic(algo, agent: str, adapter: str) -> torch.nn.Module | None:
    """The critic part that is the agent's alone (IPPO's head, CORY's value head); None where the critic is shared."""
    if hasattr(algo, "critics"):
        return algo.critics[adapter]
    if getattr(algo, "centralised", True) is False:  # IPPO: a head per agent
        return algo.critic.head.heads[algo.head_of[agent]]
    return None


def collect(algo, policy, envs, update: int):
    algo.before_collect(envs, update)
    engine = RolloutEngine(policy, Sampling(1.0, 6), record_state=False, skip_ignored=algo.skips_ignored)
    torch.manual_seed(update)
    episodes = engine.collect(envs, range(8 * update, 8 * update + len(envs)))
    for e in episodes:
        for s in e.steps:
            s.reward, s.info = 0.0, {**s.info, SHARED_REWARD: 0.0}  # the random model's coin flips may all agree
            s.state = f"episode {e.index} round {s.round}"  # MAPPO's global state (ParityChain has none of its own)
    return plant_rewards(episodes)  # every other episode paid: returns differ, so every learner takes a policy step


CHAIN_ALGOS = [n for n in names() if n not in ("ppo", "cory")]
"""Every algorithm of the registry that trains ParityChain's two agents (PPO takes one agent, CORY its own env)."""


@pytest.mark.parametrize("algo_name", CHAIN_ALGOS)
def test_a_frozen_agent_acts_but_nothing_of_it_changes_or_is_kept_in_an_optimizer(chain_policy, algo_name):
    policy, frozen, trained = chain_policy, "reasoner_0", "actor_0"
    config = config_class(algo_name)(**SMALL)
    algo = build_learner(algo_name, policy, config, 1.0, frozen=frozenset({frozen}))
    assert algo.frozen == {frozen} and algo.trainable == [trained] and set(algo.optimizers) == {trained}
    critic = own_critic(algo, frozen, frozen)
    before = {a: snapshot(policy.adapter_state(a)) for a in policy.adapters}
    critic_before = snapshot(critic) if critic is not None else None
    envs = [ParityChain() for _ in range(8)]
    for update in range(2):
        episodes = collect(algo, policy, envs, update)
        assert {s.agent for e in episodes for s in e.steps} == {frozen, trained}  # the frozen agent still acts
        metrics = algo.update(episodes, update, np.random.default_rng(update))
        assert f"{trained}/loss" in metrics and f"{frozen}/loss" not in metrics
    assert same(snapshot(policy.adapter_state(frozen)), before[frozen])  # bit-identical
    assert not same(snapshot(policy.adapter_state(trained)), before[trained])
    if critic is not None:
        assert same(snapshot(critic), critic_before)
    kept = held(optimizers_of(algo))
    assert kept and not {id(p) for p in policy.parameters(frozen)} & kept
    assert all(id(p) in kept for p in policy.parameters(trained))
    if critic is not None:
        assert not {id(p) for p in critic.parameters()} & kept
    state = algo.state_dict()  # a checkpoint still holds the frozen adapter, no optimizer of it
    assert set(state["adapters"]) == {frozen, trained} and set(state["optimizers"]) == {trained}
    algo.load_state_dict(state)


def test_cory_with_one_frozen_solver_trains_only_the_other(tiny_model_dir):
    envs = [marft_envs.make("marft/MathCORY-v0") for _ in range(4)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = build_learner("cory", policy, config_class("cory")(swap_interval=1, **SMALL), 1.0, frozen=frozenset({"solver_1"}))
    before = {a: snapshot(policy.adapter_state(a)) for a in policy.adapters}
    critic_before, coef = snapshot(algo.critics["solver_1"]), algo.kl_coefs["solver_1"]
    for update in range(2):  # both roles: the frozen solver is the observer, then the pioneer
        metrics = algo.update(collect(algo, policy, envs, update), update, np.random.default_rng(update))
        assert "solver_0/loss" in metrics and "solver_1/loss" not in metrics and "solver_1/kl_ref" in metrics
    assert same(snapshot(policy.adapter_state("solver_1")), before["solver_1"])
    assert not same(snapshot(policy.adapter_state("solver_0")), before["solver_0"])
    assert same(snapshot(algo.critics["solver_1"]), critic_before) and algo.kl_coefs["solver_1"] == coef
    assert set(algo.optimizers) == set(algo.critic_optimizers) == {"solver_0"}
    assert not {id(p) for p in [*policy.parameters("solver_1"), *algo.critics["solver_1"].parameters()]} & held(optimizers_of(algo))
    algo.load_state_dict(algo.state_dict())


def test_ppo_has_one_agent_so_freezing_it_leaves_none_training(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["solver_0"])
    with pytest.raises(ValueError, match=r"every adapter \['solver_0'\] is frozen: leave at least one training"):
        build_learner("ppo", policy, config_class("ppo")(), 1.0, frozen=frozenset({"solver_0"}))
    with pytest.raises(ConfigError, match="freezes every agent"):
        frozen_agents({"solver_0": AgentSettings(train=False)}, ["solver_0"], shared_adapter=False)


@pytest.mark.parametrize("algo_name", ["marft", "marft_token"])
def test_the_round_robin_runs_over_the_agents_that_train(tiny_model_dir, algo_name):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["planner_0", "reasoner_0", "actor_0"])
    config = config_class(algo_name)(agent_iteration_interval=2)
    algo = build_learner(algo_name, policy, config, 1.0, frozen=frozenset({"reasoner_0"}))
    assert [algo.learning_adapters(u) for u in range(8)] == [["planner_0"]] * 2 + [["actor_0"]] * 2 + [["planner_0"]] * 2 + [
        ["actor_0"]
    ] * 2
    config.agent_iteration_interval = 0
    assert algo.learning_adapters(0) == ["planner_0", "actor_0"]


def test_the_marft_round_robin_with_a_frozen_agent_updates_only_the_trainable_one(chain_policy):
    policy = chain_policy
    algo = build_learner("marft", policy, config_class("marft")(agent_iteration_interval=1, **SMALL), 1.0, frozen=frozenset({"actor_0"}))
    envs = [ParityChain() for _ in range(8)]
    for update in range(2):  # without the freeze, update 1 would be actor_0's turn
        before = {a: snapshot(policy.adapter_state(a)) for a in policy.adapters}
        metrics = algo.update(collect(algo, policy, envs, update), update, np.random.default_rng(update))
        assert "reasoner_0/loss" in metrics and "actor_0/loss" not in metrics
        assert same(snapshot(policy.adapter_state("actor_0")), before["actor_0"])
        assert not same(snapshot(policy.adapter_state("reasoner_0")), before["reasoner_0"])


# -- the config ---------------------------------------------------------------------------------------


def test_train_is_a_per_agent_key_read_from_overrides_and_checked():
    config = load(overrides=["agents.actor_0.train=false"])
    validate(config)
    assert config.agents == {"actor_0": AgentSettings(train=False)}
    with pytest.raises(ConfigError) as err:
        load(overrides=["agents.actor_0.train=maybe"])
    assert str(err.value) == "agents.actor_0.train must be true or false, got 'maybe'"
    agents = ["reasoner_0", "actor_0"]
    assert frozen_agents(config.agents, agents, shared_adapter=False) == ["actor_0"]
    assert frozen_agents({"actor_0": AgentSettings(temperature=0.5)}, agents, shared_adapter=True) == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["agents.reasoner_0.train=false", "agents.actor_0.train=false"],
            "agents.<agent_id>.train=false freezes every agent of the env (['reasoner_0', 'actor_0']): leave at least one training",
        ),
        (["agents.nobody.train=false"], "agents.nobody: env signal_env:ParityChain has no agent 'nobody'; its agents are"),
        (
            ["adapter_mode=shared", "agents.actor_0.train=false"],
            "agents.actor_0.train=false: with adapter_mode=shared one adapter serves every agent, so one agent cannot be frozen alone",
        ),
    ],
)
def test_a_config_that_cannot_freeze_is_refused_in_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch, overrides, message):
    from marft_agents.training import run_parts

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the frozen agents were checked")

    monkeypatch.setattr(run_parts, "build_policy", no_model)
    run = tmp_path / "run"
    assert cli(["train", f"env={CHAIN}", f"model={tmp_path / 'no-model'}", f"run_dir={run}", *overrides]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"marft train: error: {message}"), lines
    assert not run.exists()


def test_a_learner_that_cannot_freeze_is_refused_in_one_line(chain_policy):
    from marft_agents import algorithms
    from marft_agents.algorithms import register
    from marft_agents.algorithms.base import Learner

    class Plain(Learner):
        """A learner written before freezing: no frozen= argument."""

        def __init__(self, policy, config, temperature, tis_cap=None):
            super().__init__(policy, config, temperature, tis_cap)

        def update(self, episodes, update, rng):
            return {}

    register("plain_no_freeze", config_class("ppo"), Plain)
    try:
        assert build_learner("plain_no_freeze", chain_policy, config_class("ppo")(), 1.0).frozen == frozenset()
        with pytest.raises(ValueError, match=r"^algo=plain_no_freeze: Plain.__init__ takes no frozen="):
            build_learner("plain_no_freeze", chain_policy, config_class("ppo")(), 1.0, frozen=frozenset({"actor_0"}))
    finally:
        algorithms._registered.pop("plain_no_freeze")  # other tests list the registry


def test_a_run_with_a_frozen_agent_records_it_checkpoints_it_and_resumes(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    config = TrainConfig(
        env=CHAIN,
        model=str(tiny_model_dir),
        run_dir=str(run_dir),
        updates=1,
        episodes_per_update=4,
        eval_episodes=2,
        eval_transcripts=0,
        max_new_tokens=4,
        checkpoint_every=1,
        threads=1,
    )
    config.agents = {"reasoner_0": AgentSettings(train=False)}
    config.algo_args.minibatch_size = 8
    assert train(config, progress=False, quiet=True)["frozen_agents"] == ["reasoner_0"]
    assert json.loads((run_dir / "config.json").read_text())["agents"]["reasoner_0"]["train"] is False
    first = ckpt.load_checkpoint(ckpt.latest_checkpoint(run_dir / "checkpoints"))["algo"]
    assert set(first["adapters"]) == {"reasoner_0", "actor_0"} and set(first["optimizers"]) == {"actor_0"}
    config.updates = 2
    summary = train(config, resume=True, progress=False, quiet=True)
    assert summary["updates"] == 2 and summary["frozen_agents"] == ["reasoner_0"]
    assert "frozen (agents.<agent_id>.train=false, acted but never updated): reasoner_0" in summary_table(summary)
    last = ckpt.load_checkpoint(ckpt.latest_checkpoint(run_dir / "checkpoints"))["algo"]
    assert same(last["adapters"]["reasoner_0"], first["adapters"]["reasoner_0"])  # frozen across the resume too
    assert set(last["optimizers"]) == {"actor_0"}
