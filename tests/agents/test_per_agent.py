"""Per-agent settings (``agents.<agent_id>.temperature`` / ``.max_new_tokens``) and per-agent health (issue 35, items 2 and 3)."""

import json

import numpy as np
import pytest
import torch
from agent_helpers import episode
from signal_env import ParityChain

from marft_agents.algorithms.base import minibatches
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.algorithms.tis import recompute_behaviour
from marft_agents.cli import main as cli
from marft_agents.engines.hf import HFEngine
from marft_agents.engines.seeded import EpisodeSeededEngine
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling, agent_sampling, row_temperatures
from marft_agents.rollout.evaluation import answer_agreement, copy_rates, eval_sampling, evaluate
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs.report import agent_health, summary_table
from marft_agents.settings.agents import AgentSettings, field_names
from marft_agents.training.config import ConfigError, TrainConfig, describe, from_dict, load, to_dict, validate
from marft_agents.training.setup import learner_temperature, worker_spec
from marft_agents.training.trainer import train

CHAIN = "signal_env:ParityChain"
LIMITS = {"reasoner_0": 3, "actor_0": 8}


def make_policy(model_dir, agents, mode="lora"):
    model, tokenizer = load_base(str(model_dir))
    return LaMASPolicy(model, tokenizer, agents, mode=mode)


# -- the config section ---------------------------------------------------------------------------------


def test_overrides_and_files_fill_one_section_per_agent_and_round_trip(tmp_path):
    config = load(overrides=["agents.reasoner_0.temperature=1", "agents.actor_0.max_new_tokens=8", "agents.actor_0.temperature=0.3"])
    validate(config)
    assert config.agents == {
        "reasoner_0": AgentSettings(temperature=1.0),  # an int becomes the field's float
        "actor_0": AgentSettings(temperature=0.3, max_new_tokens=8),
    }
    assert isinstance(config.agents["reasoner_0"].temperature, float)
    plain = to_dict(config)["agents"]
    assert all(set(section) == set(field_names()) for section in plain.values())  # every key, unset ones as None
    assert {
        a: {k: section[k] for k in ("temperature", "max_new_tokens", "train", "model", "top_k", "stop")} for a, section in plain.items()
    } == {
        "reasoner_0": {"temperature": 1.0, "max_new_tokens": None, "train": True, "model": None, "top_k": None, "stop": None},
        "actor_0": {"temperature": 0.3, "max_new_tokens": 8, "train": True, "model": None, "top_k": None, "stop": None},
    }
    assert from_dict(json.loads(json.dumps(to_dict(config)))) == config  # config.json and back
    toml = tmp_path / "run.toml"
    toml.write_text("temperature = 0.7\n[agents.actor_0]\ntemperature = 0.3\nmax_new_tokens = 8\n[agents.reasoner_0]\ntemperature = 1.0\n")
    assert load(toml).agents == config.agents
    assert TrainConfig().agents == {} and "agents" in to_dict(TrainConfig())  # no section: every agent at the run's values


def test_help_config_lists_the_per_agent_keys_with_their_docstrings():
    rows = {key: doc for key, _, doc in describe()}
    assert "agents.<agent_id>.temperature" in rows and "agents.<agent_id>.max_new_tokens" in rows
    assert all(rows[k] for k in rows if k.startswith("agents."))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("agents.actor_0.temperature=0", "agents.actor_0.temperature must be >= 0.001 (training samples; greedy decoding"),
        ("agents.actor_0.temperature=nan", "agents.actor_0.temperature must be a float, got 'nan'"),
        ("agents.actor_0.temperature=1e999", "agents.actor_0.temperature must be a finite number, got inf"),
        ("agents.actor_0.max_new_tokens=0", "agents.actor_0.max_new_tokens must be >= 1, got 0"),
        ("agents.actor_0.max_new_tokens=2.5", "agents.actor_0.max_new_tokens must be a int, got 2.5"),
        ("agents.actor_0.temprature=0.5", "unknown config key 'agents.actor_0.temprature'; did you mean 'agents.actor_0.temperature'?"),
        ("agents.actor_0=0.5", "agents.actor_0 is not a per-agent key: use agents.<agent_id>.<key>"),
    ],
)
def test_bad_per_agent_values_are_refused_in_one_line(override, message):
    with pytest.raises(ConfigError) as err:
        validate(load(overrides=[override]))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_an_agent_the_env_lacks_is_refused_in_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch):
    from marft_agents.training import run_parts

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the agents were checked")

    monkeypatch.setattr(run_parts, "build_policy", no_model)
    run = tmp_path / "run"
    assert cli(["train", f"env={CHAIN}", f"model={tmp_path / 'no-model'}", f"run_dir={run}", "agents.nobody.temperature=0.5"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "marft train: error: agents.nobody: env signal_env:ParityChain has no agent 'nobody'; its agents are ['reasoner_0', 'actor_0']"
    ]
    assert not run.exists()


def test_the_learner_and_the_workers_get_each_agents_settings():
    config = load(overrides=["agents.reasoner_0.temperature=0.5", "agents.actor_0.max_new_tokens=8", "temperature=0.9"])
    assert learner_temperature(config, ["reasoner_0", "actor_0"]) == {"reasoner_0": 0.5, "actor_0": 0.9}
    assert learner_temperature(load(overrides=["agents.actor_0.max_new_tokens=8"]), ["reasoner_0", "actor_0"]) == 0.7  # one for all
    spec = worker_spec(config, record_state=False)
    assert spec.agents == config.agents and spec.agents is not config.agents


# -- sampling and scoring -------------------------------------------------------------------------------


def test_agent_sampling_overrides_only_what_an_agent_sets_and_greedy_stays_greedy():
    base = Sampling(0.7, 48)
    assert agent_sampling(base, {"a": 0.5}, {"b": 3}) == {"a": Sampling(0.5, 48), "b": Sampling(0.7, 3)}
    assert agent_sampling(Sampling(0.0, 48), {"a": 0.5}, {"b": 3}) == {"b": Sampling(0.0, 3)}
    assert row_temperatures(["a", "b"], 0.7) == 0.7
    assert row_temperatures(["a", "a"], {"a": 0.5, "b": 1.0}) == 0.5
    assert torch.equal(row_temperatures(["a", "b", "a"], {"a": 0.5, "b": 1.0}), torch.tensor([0.5, 1.0, 0.5]))


def test_requests_are_grouped_by_adapter_and_sampling_in_order_of_first_appearance():
    from marft_agents.engines.base import groups
    from marft_agents.models.sampling import Request

    run, short = Sampling(1.0, 48), Sampling(1.0, 3)
    layer = [Request([1], "a"), Request([2], "a", sampling=short), Request([3], "b"), Request([4], "a", sampling=run), Request([5], "a")]
    assert groups(layer, run) == {("a", run): [0, 3, 4], ("a", short): [1], ("b", run): [2]}


def test_one_adapter_serving_agents_with_two_samplings_makes_one_call_per_sampling(tiny_model_dir):
    envs = [ParityChain() for _ in range(4)]
    policy = make_policy(tiny_model_dir, envs[0].possible_agents, mode="shared")
    engine = HFEngine(policy)
    env = envs[0]
    env.reset(seed=0)
    prompt = policy.prompt(env.observe("reasoner_0"))
    rollout = RolloutEngine(policy, Sampling(1.0, 8), engine=engine, agent_sampling={"actor_0": Sampling(0.5, 2)})
    layer = [rollout.request(prompt, "reasoner_0"), rollout.request(prompt, "actor_0"), rollout.request(prompt, "reasoner_0")]
    torch.manual_seed(0)
    got = engine.generate(layer, rollout.sampling)
    assert engine.calls == 2 and len(got.responses[1]) <= 2 and max(len(got.responses[0]), len(got.responses[2])) > 2
    logp, _, mask = policy.score([prompt], [got.responses[1]], "shared", 0.5)  # the actor's at its own 0.5
    torch.testing.assert_close(logp[0][mask[0]], got.token_logps[1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("engine_kind", ["hf", "seeded"])
def test_a_rollout_keeps_each_agent_within_its_own_token_limit(tiny_model_dir, engine_kind):
    envs = [ParityChain() for _ in range(6)]
    policy = make_policy(tiny_model_dir, envs[0].possible_agents)
    engine = HFEngine(policy) if engine_kind == "hf" else EpisodeSeededEngine(policy)
    if engine_kind == "seeded":
        engine.seed_episodes({i: 100 + i for i in range(6)})
    own = agent_sampling(Sampling(1.0, 48), max_new_tokens=LIMITS)
    rollout = RolloutEngine(policy, Sampling(1.0, 48), engine=engine, agent_sampling=own)
    torch.manual_seed(0)
    episodes = rollout.collect(envs, range(6))
    lengths = {a: [len(s.response) for e in episodes for s in e.steps if s.agent == a] for a in LIMITS}
    assert max(lengths["reasoner_0"]) <= 3 and max(lengths["actor_0"]) <= 8
    assert max(lengths["actor_0"]) > 3  # a random model rarely stops early: the actor used more than the reasoner's limit
    assert rollout.generate_calls == 2  # one call per layer: one (adapter, sampling) group each


def test_the_behaviour_log_probs_of_an_agent_sampled_at_its_own_temperature_are_its_policys_scores_there(tiny_model_dir):
    envs = [ParityChain() for _ in range(4)]
    policy = make_policy(tiny_model_dir, envs[0].possible_agents, mode="shared")  # one adapter: rows at two temperatures
    temperatures = {"reasoner_0": 0.5, "actor_0": 1.0}
    rollout = RolloutEngine(policy, Sampling(1.0, 6), agent_sampling=agent_sampling(Sampling(1.0, 6), temperatures))
    torch.manual_seed(0)
    steps = [s for e in rollout.collect(envs, range(4)) for s in e.steps]
    # by hand, for one reasoner step: a plain forward pass over prompt + response, logits / 0.5, log-softmax
    s = next(s for s in steps if s.agent == "reasoner_0")
    with torch.no_grad(), policy.active("shared") as model:
        logits = model(torch.tensor([s.prompt + s.response])).logits[0].float()  # (P + R, V)
    hand = torch.log_softmax(logits[len(s.prompt) - 1 : -1] / 0.5, -1).gather(-1, torch.tensor(s.response)[:, None])[:, 0]  # (R,)
    torch.testing.assert_close(s.token_logps, hand, atol=1e-4, rtol=0)
    wrong = torch.log_softmax(logits[len(s.prompt) - 1 : -1] / 1.0, -1).gather(-1, torch.tensor(s.response)[:, None])[:, 0]
    assert (s.token_logps - wrong).abs().max() > 1e-2  # scored at the run's 1.0 it would not be 1
    # one minibatch mixing both agents: every row at its own agent's temperature, so every ratio is 1
    (mb,) = minibatches(policy, "shared", steps, list(range(len(steps))), None, temperature=temperatures, minibatch_size=64)
    for k, step in enumerate(mb.steps):
        torch.testing.assert_close(mb.logp_tok[k][mb.mask[k]].detach(), step.token_logps, atol=1e-4, rtol=0)
    before = [x.token_logps.clone() for x in steps]
    assert recompute_behaviour(policy, steps, temperatures)["tis/abs_logp_diff_max"] < 1e-4  # the TIS recompute too
    assert all(torch.allclose(x.token_logps, b, atol=1e-4) for x, b in zip(steps, before))


def test_the_learners_first_ratio_is_one_for_an_agent_sampled_at_its_own_temperature(tiny_model_dir):
    envs = [ParityChain() for _ in range(8)]
    temperatures = {"reasoner_0": 0.5, "actor_0": 1.0}

    def first_update(learner_temperature):
        policy = make_policy(tiny_model_dir, envs[0].possible_agents)
        rollout = RolloutEngine(policy, Sampling(1.0, 6), agent_sampling=agent_sampling(Sampling(1.0, 6), temperatures))
        torch.manual_seed(0)
        episodes = rollout.collect(envs, range(8))
        assert len({e.team_return for e in episodes}) == 2  # the team is paid sometimes: the update takes a policy step
        learner = MARFT(policy, MARFTConfig(minibatch_size=64, ppo_epochs=1), temperature=learner_temperature)
        return learner.update(episodes, 0, np.random.default_rng(0))

    right = first_update(temperatures)
    assert right["reasoner_0/approx_kl"] < 1e-8 and right["reasoner_0/clip_frac"] == 0.0  # ratio 1 on the first minibatch
    assert right["actor_0/approx_kl"] < 1e-8
    wrong = first_update(1.0)  # the run's one temperature for the reasoner sampled at 0.5
    assert wrong["reasoner_0/approx_kl"] > 1e-3


def test_greedy_evaluation_keeps_each_agents_token_limit(tiny_model_dir):
    from marft_envs.plugins import resolve

    policy = make_policy(tiny_model_dir, ["reasoner_0", "actor_0"])
    resolve(CHAIN)  # a module:Class id, registered as a run registers it
    result = evaluate(policy, CHAIN, {}, 4, max_new_tokens=48, agent_max_new_tokens=LIMITS)
    lengths = {a: r["mean_response_tokens"] for a, r in result["roles"].items()}
    assert lengths["reasoner_0"] <= 3 and lengths["actor_0"] <= 8


def test_a_worker_plays_each_agent_at_its_own_settings(tiny_model_dir):
    from marft_agents.distributed.worker import RolloutWorker

    config = load(overrides=[f"env={CHAIN}", f"model={tiny_model_dir}", "temperature=1.0", "max_new_tokens=48"])
    config.agents = {a: AgentSettings(max_new_tokens=n) for a, n in LIMITS.items()}
    worker = RolloutWorker(worker_spec(config, record_state=False))
    worker.engine, worker.version = worker._build_engine(), 0  # as load() makes it, without Ray's object store
    greedy = eval_sampling(None, 48, agent_max_new_tokens=LIMITS)  # as the worker pool's evaluate asks
    for evaluation in (None, (*greedy, 0)):
        episodes, _ = worker.collect(0, [None], list(range(4)), [10 + i for i in range(4)], evaluation=evaluation)
        for e in episodes:
            assert all(len(s.response) <= LIMITS[s.agent] for s in e.steps)


# -- per-agent health ---------------------------------------------------------------------------------


def answered(index, reasoner, actor, parents=("reasoner_0",)):
    """A one-round chain episode whose agents answered ``reasoner`` and ``actor`` (None: no answer)."""
    e = episode(index, [[("reasoner_0", 0.0), ("actor_0", 0.0)]])
    e.steps[0].info = {"answer": reasoner}
    e.steps[1].info, e.steps[1].parents = {"answer": actor}, tuple(parents)
    return e


def test_copy_rate_and_agreement_by_hand():
    episodes = [answered(0, "1/2", "0.5"), answered(1, "3", "4"), answered(2, "3", None), answered(3, None, "3")]
    # the actor repeated the reasoner's answer in 1 of the 3 episodes where the reasoner gave one ("0.5" is "1/2")
    assert copy_rates(episodes) == {"actor_0": pytest.approx(1 / 3)}
    assert answer_agreement(episodes) == pytest.approx(1 / 4)  # no answer agrees with nothing
    # agents that did not see each other (a debate's first round) copy nobody, but may agree
    independent = [answered(0, "3", "3", parents=()), answered(1, "3", "4", parents=())]
    assert copy_rates(independent) == {} and answer_agreement(independent) == 0.5
    assert answer_agreement([episode(0, [[("a", 1.0)]])]) is None  # no answers reported: no agreement metric


def test_health_rows_map_each_agent_to_its_adapters_metrics():
    metrics = {"shared/advantage_mean": 0.0, "shared/advantage_std": 1.0, "shared/reward": 0.5, "train/actor_0/copy_rate": 0.75}
    health = agent_health(metrics, {"reasoner_0": "shared", "actor_0": "shared"})
    assert health["actor_0"] == {"advantage_mean": 0.0, "advantage_std": 1.0, "reward": 0.5, "copy_rate": 0.75}
    assert "copy_rate" not in health["reasoner_0"]


def tb_scalars(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    return set(acc.Tags()["scalars"])


@pytest.mark.parametrize("env", [CHAIN, "signal_env:ParityAnswers"])
def test_a_short_run_logs_and_prints_each_agents_health(tiny_model_dir, tmp_path, capsys, env):
    run_dir = tmp_path / "run"
    config = TrainConfig(
        env=env,
        model=str(tiny_model_dir),
        run_dir=str(run_dir),
        updates=2,
        episodes_per_update=8,
        eval_episodes=4,
        eval_transcripts=0,
        max_new_tokens=6,
        checkpoint_every=0,
        threads=1,
    )
    config.agents = {"reasoner_0": AgentSettings(temperature=1.0, max_new_tokens=4)}
    summary = train(config, progress=False, quiet=False)
    table = capsys.readouterr().out
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    keys = [f"{a}/{k}" for a in ("reasoner_0", "actor_0") for k in ("advantage_mean", "advantage_std", "reward")]
    keys += [f"signal/{a}/{k}" for a in ("reasoner_0", "actor_0") for k in ("rewarded_frac", "truncated_frac")]
    if env.endswith("ParityAnswers"):
        keys += ["train/actor_0/copy_rate", "train/reasoner_0/own_accuracy", "train/actor_0/own_accuracy", "train/agreement"]
    for row in rows:
        assert all(k in row for k in keys), [k for k in keys if k not in row]
        assert all(0.0 <= row[k] <= 1.0 for k in keys if k.startswith(("train/", "signal/")))
        assert row["critic/explained_variance"] <= 1.0  # the shared critic's, before the update's fit
    assert {*keys, "critic/explained_variance"} <= tb_scalars(run_dir)  # TensorBoard holds every key metrics.jsonl does
    assert set(summary["agents"]) == {"reasoner_0", "actor_0"}
    assert summary["agents"]["actor_0"]["advantage_mean"] == rows[-1]["actor_0/advantage_mean"]
    header = "agent (update 2)   advantage ± spread   reward   rewarded   own accuracy   copy rate   cut at limit   critic EV"
    assert header in table
    assert summary["agents"]["reasoner_0"]["truncated_frac"] == rows[-1]["signal/reasoner_0/truncated_frac"]
    block = table[table.index("agent (update 2)") :].splitlines()
    actor = next(line for line in block if line.startswith("actor_0"))
    if env.endswith("ParityAnswers"):
        assert f"{rows[-1]['train/actor_0/copy_rate']:.1%}" in actor and "actor_0 copy rate" in table
        assert 0.0 <= summary["eval_after"]["roles"]["actor_0"]["copy_rate"] <= 1.0 and "agreement" in summary["eval_after"]
    else:
        assert actor.split()[7] == "-"  # ParityChain reports no answers: no copy rate
    assert actor.split()[8] == f"{rows[-1]['signal/actor_0/truncated_frac']:.1%}"  # cut at limit
    assert summary_table(summary) in table
    for e in [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]:
        assert e["train/reasoner_0/response_length"] <= 4  # the reasoner's own limit held in training
