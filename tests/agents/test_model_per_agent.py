"""A model per agent: ``agents.<agent_id>.model`` gives an agent its own base, tokenizer and template.

The team here: reasoner_0 on the embedded model (hidden size 128, its own tokenizer) and actor_0 on the tests'
tiny random model (hidden size 32, another tokenizer). GRPO and IPPO (a value head per agent, each of its own
width) train both adapters, each on its own base, and leave both bases as they were; a run checkpoints,
resumes, evaluates and names each agent's model; what a team cannot do is refused in one line before any
model loads.
"""

import json

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards
from signal_env import ParityChain
from transformers import AutoTokenizer

import marft_envs
from marft_agents.algorithms import build_learner, config_class
from marft_agents.algorithms.tis import recompute_behaviour
from marft_agents.cli import main as cli
from marft_agents.models.chat import prompt_ids
from marft_agents.models.sampling import Sampling
from marft_agents.models.team import TeamPolicy
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs import checkpoint as ckpt
from marft_agents.settings.agents import AgentSettings
from marft_agents.training.config import ConfigError, TrainConfig
from marft_agents.training.setup import build_policy
from marft_agents.training.trainer import train
from marft_envs.outcomes import SHARED_REWARD

CHAIN = "signal_env:ParityChain"


def team_config(tiny_model_dir, **kwargs) -> TrainConfig:
    kwargs = {"algo": "grpo", **kwargs}
    config = TrainConfig(env=CHAIN, model="embedded", threads=1, **kwargs)
    config.agents = {"actor_0": AgentSettings(model=str(tiny_model_dir))}
    return config


@pytest.fixture(scope="module")
def team(tiny_model_dir):
    torch.manual_seed(0)
    return build_policy(team_config(tiny_model_dir), ParityChain().possible_agents)


def test_agents_that_name_no_model_of_their_own_get_one_policy_as_before(tiny_model_dir):
    config = TrainConfig(env=CHAIN, model=str(tiny_model_dir))
    config.agents = {"actor_0": AgentSettings(model=str(tiny_model_dir), temperature=0.5)}  # the run's model, named again
    policy = build_policy(config, ParityChain().possible_agents)
    assert not isinstance(policy, TeamPolicy) and policy.adapters == ["reasoner_0", "actor_0"]


def test_one_model_for_every_agent_is_no_team_whichever_model_it_is(tiny_model_dir):
    config = TrainConfig(env=CHAIN, model="embedded", algo="marft")
    config.agents = {a: AgentSettings(model=str(tiny_model_dir)) for a in ("reasoner_0", "actor_0")}  # both: not the run's
    policy = build_policy(config, ParityChain().possible_agents)
    assert not isinstance(policy, TeamPolicy) and policy.hidden_size == 32  # the model both name, one base
    solo = TrainConfig(env="marft/MathSolo-v0", model="embedded", algo="ppo")
    solo.agents = {"solver_0": AgentSettings(model=str(tiny_model_dir))}
    assert build_policy(solo, ["solver_0"]).hidden_size == 32  # one agent on its own model: no team, PPO takes it


def test_an_unknown_agent_with_a_model_is_named_as_unknown(tmp_path, capsys):
    args = ["train", f"env={CHAIN}", "algo=marft", f"run_dir={tmp_path / 'run'}", f"agents.nobody_0.model={tmp_path}"]
    assert cli(args) == 2
    err = capsys.readouterr().err.strip()
    assert "has no agent 'nobody_0'" in err and "team" not in err and "\n" not in err


def test_each_agent_acts_on_its_own_model_and_prompts_with_its_own_tokenizer(team, tiny_model_dir):
    assert isinstance(team, TeamPolicy)
    assert team.model_of == {"reasoner_0": "embedded", "actor_0": str(tiny_model_dir)}
    assert [p.base.config.hidden_size for p in team.members.values()] == [128, 32]
    env = ParityChain()
    env.reset(seed=0)
    obs = env.observe("reasoner_0")
    assert team.prompt(obs, "actor_0") == prompt_ids(AutoTokenizer.from_pretrained(str(tiny_model_dir)), obs)
    assert team.prompt(obs, "reasoner_0") == prompt_ids(team.members["embedded"].tokenizer, obs)
    assert team.prompt(obs, "reasoner_0") != team.prompt(obs, "actor_0")
    with pytest.raises(ValueError, match="builds each prompt with its agent's tokenizer"):
        team.prompt(obs)
    with pytest.raises(ValueError, match="reads each agent's features with that agent's own base: name the agent"):
        team.features([team.prompt(obs, "actor_0")])  # no agent: whose base?
    assert team.features([team.prompt(obs, "actor_0")], "actor_0")[:, 32:].abs().sum() == 0  # (1, 128): 32 wide, padded
    assert team.kl_reference("actor_0") == "actor_0@base"


@pytest.mark.parametrize("algo_name", ["grpo", "ippo", "marft", "marft_token"])
def test_a_learner_trains_each_agents_adapter_on_its_own_base_and_leaves_the_bases_alone(team, algo_name):
    bases = {m: {n: p.detach().clone() for n, p in pol.base.named_parameters() if "lora_" not in n} for m, pol in team.members.items()}
    before = {a: team.adapter_state(a) for a in team.adapters}
    algo = build_learner(
        algo_name, team, config_class(algo_name)(minibatch_size=8, ppo_epochs=1), 1.0
    )  # kl_coef > 0: own base as reference
    if algo_name != "grpo":  # a value head per agent (IPPO) or per model (both MARFTs), at its model's width
        assert [head.net[0].in_features for head in algo.critic.head.heads] == [128, 32]
        critic_before = {k: v.clone() for k, v in algo.critic.head.state_dict().items()}
    engine = RolloutEngine(team, Sampling(1.0, 4), record_state=False, skip_ignored=algo.skips_ignored)
    torch.manual_seed(0)
    episodes = engine.collect([ParityChain() for _ in range(8)], range(8))
    for e in episodes:
        for s in e.steps:
            s.reward, s.info = 0.0, {**s.info, SHARED_REWARD: 0.0}
    steps = [s for e in episodes for s in e.steps]
    gap = recompute_behaviour(team, steps, 1.0)  # each response scored by the model that sampled it (the TIS recompute)
    assert gap["tis/abs_logp_diff_max"] < 1e-4, gap
    metrics = algo.update(plant_rewards(episodes), 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values() if isinstance(v, float))
    for a in team.adapters:
        after = team.adapter_state(a)
        assert any(not torch.equal(before[a][k], after[k]) for k in after), f"{a}'s adapter did not change"
    for m, pol in team.members.items():
        now = {n: p for n, p in pol.base.named_parameters() if "lora_" not in n}
        assert now.keys() == bases[m].keys() and all(torch.equal(now[n], bases[m][n]) for n in now), f"{m}'s base changed"
    if algo_name != "grpo":
        for k in range(2):
            prefix = f"heads.{k}.net."
            assert any(not torch.equal(v, critic_before[n]) for n, v in algo.critic.head.state_dict().items() if n.startswith(prefix))


@pytest.mark.parametrize("algo_name", ["grpo", "ippo", "marft"])
def test_a_team_run_checkpoints_resumes_evaluates_and_names_each_agents_model(tiny_model_dir, tmp_path, algo_name):
    run_dir = tmp_path / "run"
    config = team_config(
        tiny_model_dir,
        algo=algo_name,
        run_dir=str(run_dir),
        updates=1,
        episodes_per_update=4,
        eval_episodes=2,
        eval_transcripts=1,
        max_new_tokens=4,
        checkpoint_every=1,
    )
    config.algo_args.minibatch_size = 8
    models = {"reasoner_0": "embedded", "actor_0": str(tiny_model_dir)}
    assert train(config, progress=False, quiet=True)["agent_models"] == models
    first = ckpt.load_checkpoint(ckpt.latest_checkpoint(run_dir / "checkpoints"))["algo"]["adapters"]
    widths = {a: {v.shape[1] for k, v in w.items() if "q_proj.lora_A" in k} for a, w in first.items()}
    assert widths == {"reasoner_0": {128}, "actor_0": {32}}  # each adapter sits on its own model's layers
    config.updates = 2
    summary = train(config, resume=True, progress=False, quiet=True)
    assert summary["updates"] == 2 and summary["resumed_from_update"] == 1
    assert json.loads((run_dir / "summary.json").read_text())["agent_models"] == models
    for name in ("eval_before", "eval_after"):
        (sample,) = [json.loads(line) for line in (run_dir / "samples" / f"{name}.jsonl").read_text().splitlines()]
        assert sample  # a transcript of the team's episode
    assert json.loads((run_dir / "config.json").read_text())["agents"]["actor_0"]["model"] == str(tiny_model_dir)
    if algo_name != "grpo":
        return
    assert cli(["eval", "--run", str(run_dir), "--episodes", "2"]) == 0  # the run's team, from its checkpoint
    settings = dict(updates=0, eval_episodes=2, eval_transcripts=0, max_new_tokens=4, init_from=str(run_dir))
    assert train(team_config(tiny_model_dir, run_dir=str(tmp_path / "from"), **settings), progress=False, quiet=True)
    moved = team_config(tiny_model_dir, run_dir=str(tmp_path / "moved"), **settings)
    moved.agents["actor_0"].model = "embedded"  # the actor's adapter was trained on the tiny model
    with pytest.raises(ConfigError, match=r"trained agent actor_0 on model .*, this run gives it 'embedded'"):
        train(moved, progress=False, quiet=True)
    assert not (tmp_path / "moved").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algo=cory", "env=marft/MathCORY-v0", "agents.solver_1.model=X"], "algo=cory: CORY swaps the pioneer and observer"),
        (["adapter_mode=shared"], "adapter_mode=shared: a team of models takes adapter_mode=lora"),
        (["distributed.episode_seeds=true"], "distributed.episode_seeds samples one model: leave it off"),
    ],
)
def test_what_a_team_cannot_do_is_refused_in_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch, overrides, message):
    from marft_agents.training import run_parts

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the team was checked")

    monkeypatch.setattr(run_parts, "build_policy", no_model)
    run = tmp_path / "run"
    agent = "solver_1" if "env=marft/MathCORY-v0" in overrides else "actor_0"
    overrides = [o.replace("=X", f"={tmp_path / 'm'}") for o in overrides]
    args = ["train", f"env={CHAIN}", "model=embedded", f"run_dir={run}", "algo=grpo", f"agents.{agent}.model={tmp_path / 'm'}"]
    if agent != "actor_0":
        args = [a for a in args if not a.startswith("agents.actor_0")]
    assert cli([*args, *overrides]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    prefix = f"marft train: error: agents.{agent}.model={tmp_path / 'm'} makes a team of models, which {message}"
    assert len(lines) == 1 and lines[0].startswith(prefix), lines
    assert not run.exists()


def test_the_docs_example_trains_a_team(tmp_path, monkeypatch, capsys):
    import tempfile
    from pathlib import Path

    from test_docs import code_blocks

    page = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
    (block,) = [b for b in code_blocks(page) if b.lang == "python" and "agents.actor_0.model=" in b.code]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's folders go under tmp_path
    exec(compile("\n" * (block.line - 1) + block.code, str(page), "exec"), {"__name__": "__docs__"})
    assert capsys.readouterr().out == "embedded\n"


def test_a_mathchain_team_with_the_actor_frozen_trains_resumes_and_leaves_the_actor_bit_identical(tiny_model_dir, tmp_path):
    # The docs' command: two models on marft/MathChain-v0, the actor frozen, through the CLI (GRPO: MARFT's one
    # critic is refused for agents of different widths)
    run_dir = tmp_path / "run"
    args = [
        "train", "env=marft/MathChain-v0", "algo=grpo", "model=embedded", f"agents.actor_0.model={tiny_model_dir}",
        "agents.actor_0.train=false", "updates=2", "episodes_per_update=4", "grpo.group_size=2", "eval_episodes=2",
        "eval_transcripts=1", "max_new_tokens=4", "checkpoint_every=1", "threads=1", f"run_dir={run_dir}", "--no-progress",
    ]  # fmt: skip
    assert cli(args) == 0
    first = min(p for p in (run_dir / "checkpoints").iterdir() if p.name != "latest")
    last = ckpt.latest_checkpoint(run_dir / "checkpoints")
    before = ckpt.load_checkpoint(first)["algo"]["adapters"]["actor_0"]
    after = ckpt.load_checkpoint(last)["algo"]["adapters"]["actor_0"]
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert set(ckpt.load_checkpoint(last)["algo"]["optimizers"]) == {"reasoner_0"}  # no optimizer for the frozen actor
    lora_b = [v for k, v in after.items() if "lora_B" in k]
    assert lora_b and all(not v.any() for v in lora_b)  # a LoRA B starts at zero: never stepped, it still is
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["agent_models"] == {"reasoner_0": "embedded", "actor_0": str(tiny_model_dir)}
    assert summary["frozen_agents"] == ["actor_0"]
    assert (run_dir / "samples" / "eval_after.jsonl").read_text().strip()
    assert cli([*args[:-2], f"run_dir={run_dir}", "--no-progress", "--resume", "updates=3"]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["resumed_from_update"] == 2


def test_mappo_values_the_state_with_each_models_head(tiny_model_dir):
    # MathDebate: solver_0 on the embedded model (128 wide), solver_1 on the tiny one (32); the state read by each
    config = TrainConfig(env="marft/MathDebate-v0", model="embedded", algo="mappo", threads=1)
    config.agents = {"solver_1": AgentSettings(model=str(tiny_model_dir))}
    envs = [marft_envs.make("marft/MathDebate-v0") for _ in range(4)]
    torch.manual_seed(0)
    team = build_policy(config, envs[0].possible_agents)
    algo = build_learner("mappo", team, config_class("mappo")(minibatch_size=4), 1.0)
    assert [head.net[0].in_features for head in algo.critic.head.heads] == [128, 32]
    episodes = RolloutEngine(team, Sampling(1.0, 4), record_state=True).collect(envs, range(4))
    critic_before = {k: v.clone() for k, v in algo.critic.head.state_dict().items()}
    metrics = algo.update(plant_rewards(episodes), 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values() if isinstance(v, float))
    for k in range(2):
        prefix = f"heads.{k}.net."
        assert any(not torch.equal(v, critic_before[n]) for n, v in algo.critic.head.state_dict().items() if n.startswith(prefix))


def test_a_team_on_the_vllm_engine_is_refused_by_the_model_check(tiny_model_dir):
    # (through the CLI a missing vLLM is named first, before the env is made)
    from marft_agents.training.setup import check_models

    config = team_config(tiny_model_dir)
    config.generation.engine = "vllm"
    with pytest.raises(ConfigError, match="generation.engine=vllm serves one base: use generation.engine=hf"):
        check_models(config, ParityChain().possible_agents)


def test_a_marft_team_of_two_widths_trains_on_two_ranks(tiny_model_dir, tmp_path):
    from data_parallel_helpers import torchrun

    run = tmp_path / "run"
    args = [
        "-m", "marft_agents.cli", "train", "env=signal_env:ParityChain", "model=embedded",
        f"agents.actor_0.model={tiny_model_dir}", "algo=marft", f"run_dir={run}", "updates=2", "episodes_per_update=4",
        "eval_episodes=2", "max_new_tokens=4", "threads=1", "marft.minibatch_size=3", "--no-progress",
    ]  # fmt: skip
    done = torchrun(args, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["updates"] == 2 and summary["agent_models"] == {"reasoner_0": "embedded", "actor_0": str(tiny_model_dir)}
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(np.isfinite(r["critic/value_loss"]) for r in rows)
