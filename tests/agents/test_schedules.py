"""Optimisation controls (issue 54, item 3): learning-rate schedules, gradient accumulation, each agent's own ``lr`` and
LoRA shape; checkpointed and resumed exactly, refused in one line where a value cannot work."""

from __future__ import annotations

import copy
import json
import math
import signal
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.base import apply
from marft_agents.algorithms.data_parallel import WHOLE, Layout, Share, passes
from marft_agents.algorithms.grpo import GRPO, GRPOConfig
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.algorithms.marft_token import MARFTToken, MARFTTokenConfig
from marft_agents.algorithms.optimizers import adapter_optimizers, advance, attach, lr_factor, rates
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.runs import checkpoint as ckpt
from marft_agents.training import trainer
from marft_agents.training.config import ConfigError, describe, load, validate
from marft_agents.training.interrupts import RunInterrupted
from marft_agents.training.setup import build_policy, check_resumable
from marft_agents.training.trainer import train

AGENTS = ["reasoner_0", "actor_0"]


# -- the schedule: a pure function, then LambdaLR over it ----------------------------------------------


def test_the_factor_at_each_update_is_the_hand_computed_one():
    constant = [lr_factor(t, schedule="constant", warmup=4, updates=10) for t in range(6)]
    assert constant == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]  # (t + 1) / W, then the full rate
    # linear, W = 2 of T = 10: warm-up 1/2, 2/2; then 1 - (t - 2) / 8
    linear = [lr_factor(t, schedule="linear", warmup=2, updates=10) for t in (0, 1, 2, 6, 9, 10, 12)]
    assert linear == [0.5, 1.0, 1.0, 0.5, 0.125, 0.0, 0.0]  # 0 only after the last update, and past it
    # cosine, W = 2 of T = 10: p = (t - 2) / 8, (1 + cos(pi p)) / 2
    cosine = [lr_factor(t, schedule="cosine", warmup=2, updates=10) for t in (0, 1, 2, 4, 6, 9)]
    expected = [0.5, 1.0, 1.0, (1 + math.sqrt(0.5)) / 2, 0.5, (1 + math.cos(7 * math.pi / 8)) / 2]
    assert cosine == pytest.approx(expected, abs=1e-15)
    assert expected[3] == pytest.approx(0.8535533906) and expected[5] == pytest.approx(0.0380602337)
    assert [lr_factor(t, schedule="cosine", warmup=0, updates=4) for t in range(4)] == pytest.approx([1.0, 0.8535533906, 0.5, 0.1464466094])
    with pytest.raises(ValueError, match="unknown lr_schedule 'step'"):
        lr_factor(0, schedule="step", warmup=0, updates=4)


def _toy_optimizers() -> dict[str, torch.optim.Optimizer]:
    return {a: torch.optim.AdamW([torch.nn.Parameter(torch.ones(2))], lr=3e-4, weight_decay=0.0) for a in AGENTS}


def test_lambda_lr_steps_each_adapter_at_its_own_rate_times_the_factor_and_its_state_round_trips(tmp_path):
    optimizers = _toy_optimizers()
    schedulers = attach(optimizers, {"actor_0": 1e-3}, schedule="cosine", warmup=1, updates=4)
    seen = []
    for _ in range(2):
        seen.append(rates(optimizers))
        advance(schedulers)
    factor = [lr_factor(t, schedule="cosine", warmup=1, updates=4) for t in range(3)]
    assert seen == [{"reasoner_0/lr": pytest.approx(3e-4 * f), "actor_0/lr": pytest.approx(1e-3 * f)} for f in factor[:2]]
    # a checkpoint holds plain data only (read with weights_only=True) and continues where it stopped
    path = tmp_path / "state.pt"
    torch.save({a: {"optimizer": optimizers[a].state_dict(), "schedule": s.state_dict()} for a, s in schedulers.items()}, path)
    saved = torch.load(path, weights_only=True)
    again = _toy_optimizers()  # the run's optimizers, made afresh at the algorithm's rate
    fresh = attach(again, {"actor_0": 1e-3}, schedule="cosine", warmup=1, updates=4)
    for a in AGENTS:
        again[a].load_state_dict(saved[a]["optimizer"])
        fresh[a].load_state_dict(saved[a]["schedule"])
    assert rates(again) == rates(optimizers) and rates(again)["actor_0/lr"] == pytest.approx(1e-3 * factor[2])
    advance(fresh)
    advance(schedulers)
    assert rates(again) == rates(optimizers)
    assert rates(again)["actor_0/lr"] == pytest.approx(1e-3 * lr_factor(3, schedule="cosine", warmup=1, updates=4))


# -- gradient accumulation --------------------------------------------------------------------------------


def test_accumulated_minibatches_share_their_group_by_rows_and_tokens():
    steps = [SimpleNamespace(response=[0] * n) for n in (1, 1, 2, 4, 3)]
    parts = list(passes(steps, [0, 1, 2, 3, 4], None, minibatch_size=2, epochs=1, accumulation=2))
    assert [rows.tolist() for rows, _ in parts] == [[0, 1], [2, 3], [4]]
    # group [0..3]: 4 rows, 8 tokens; the last group holds one minibatch, which is all of its step
    assert [share for _, share in parts] == [
        Share(rows=0.5, tokens=2 / 8, first=True, last=False),
        Share(rows=0.5, tokens=6 / 8, first=False, last=True),
        WHOLE,
    ]
    alone = list(passes(steps, [0, 1, 2, 3, 4], None, minibatch_size=2, epochs=1))
    assert [share for _, share in alone] == [WHOLE] * 3  # no accumulation: every minibatch is a step of its own
    # data-parallel: rank 0 holds global rows 0..1 of a group [0, 2, 1, 3] whose minibatches are [0, 2] and [1, 3]
    layout = Layout(offsets=(0, 2, 4), sizes=np.array([1, 1, 2, 4]), rank=0)
    share = layout.share(np.array([0, 2]), np.array([0]), np.array([0, 2, 1, 3]), first=True, last=False)
    assert share == Share(rows=1 / 4, tokens=1 / 8, first=True, last=False, within=(1 / 2, 1 / 3))
    assert share.weights == (1 / 2, 1 / 3)  # its statistics weigh as a part of their minibatch, not of the group


def test_apply_adds_the_parts_and_steps_once_as_the_combined_minibatch_would():
    # a mean loss over rows x of w * x: one minibatch of x = (1, 2, 3, 6) has gradient mean(x) = 3
    w = torch.nn.Parameter(torch.zeros(1))
    sgd = torch.optim.SGD([w], lr=1.0)  # w moves by exactly minus the gradient
    first, last = Share(rows=0.5, first=True, last=False), Share(rows=0.5, first=False, last=True)
    part = apply(sgd, first.rows * (w * torch.tensor([1.0, 2.0])).mean(), [w], 1e9, "toy", share=first)
    assert part == 0.0 and w.item() == 0.0 and w.grad.item() == 0.75  # no step yet: 0.5 * mean(1, 2)
    apply(sgd, last.rows * (w * torch.tensor([3.0, 6.0])).mean(), [w], 1e9, "toy", share=last)
    assert w.item() == -3.0  # 0.5 * 1.5 + 0.5 * 4.5: the whole minibatch's gradient, one step
    sgd.zero_grad()
    apply(sgd, (w * torch.tensor([1.0, 2.0, 3.0, 6.0])).mean(), [w], 1e9, "toy")  # no accumulation: a step of its own
    assert w.item() == -6.0


LEARNERS = {"marft": (MARFT, MARFTConfig), "marft_token": (MARFTToken, MARFTTokenConfig), "grpo": (GRPO, GRPOConfig)}


@pytest.mark.parametrize("name", list(LEARNERS))
def test_k_accumulated_minibatches_update_as_one_minibatch_k_times_larger(tiny_model_dir, name):
    torch.set_num_threads(1)
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    torch.manual_seed(0)
    engine = RolloutEngine(policy, Sampling(1.0, 6), skip_ignored=False)
    episodes = engine.collect(envs, range(4), seed_of=lambda i: i // 2)  # GRPO's groups of 2 share a problem
    episodes = plant_rewards(episodes)  # the random model earns nothing: a spread of returns in every group
    start = {a: policy.adapter_state(a) for a in policy.adapters}

    def weights_after(minibatch_size: int, accumulation: int) -> dict[str, torch.Tensor]:
        for a in policy.adapters:
            policy.load_adapter_state(a, start[a])
        learner_cls, config_cls = LEARNERS[name]
        options = dict(minibatch_size=minibatch_size, grad_accumulation=accumulation, entropy_coef=0.01)
        config = config_cls(**options, **({"group_size": 2} if name == "grpo" else {}))
        torch.manual_seed(1)  # the same critic head for every learner
        learner = learner_cls(policy, config, temperature=1.0)
        metrics = learner.update(copy.deepcopy(episodes), 0, np.random.default_rng(0))
        assert all(np.isfinite(v) for v in metrics.values()) and "actor_0/loss" in metrics
        return {f"{a}:{n}": w for a in policy.adapters for n, w in policy.adapter_state(a).items()}

    large = weights_after(4, 1)
    accumulated = weights_after(2, 2)
    small = weights_after(2, 1)
    moved = max(float((large[k] - start[k.split(":")[0]][k.split(":", 1)[1]]).abs().max()) for k in large)
    assert moved > 1e-5  # the update stepped
    for k in large:  # the same step, to float32 summation order (a gradient near Adam's eps amplifies it to ~1e-7)
        torch.testing.assert_close(accumulated[k], large[k], rtol=0, atol=1e-6)
    assert max(float((small[k] - large[k]).abs().max()) for k in large) > 1e-4  # two steps of 2 are not one of 4


def test_kl_gate_cannot_judge_one_part_of_an_accumulated_step():
    with pytest.raises(ConfigError, match=r"^marft\.kl_gate=0\.001 judges each minibatch alone, .* marft\.grad_accumulation=1$"):
        validate(load(overrides=["marft.kl_gate=0.001", "marft.grad_accumulation=2"]))


# -- each agent's own lr and LoRA --------------------------------------------------------------------------


def _lora_a(policy: LaMASPolicy, adapter: str) -> dict[str, tuple[int, ...]]:
    return {n.split(".lora_A")[0]: tuple(p.shape) for n, p in policy.base.named_parameters() if f"lora_A.{adapter}." in n}


def test_an_agent_gets_its_own_lora_rank_alpha_and_targets(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    own = {"actor_0": {"lora_r": 4, "lora_alpha": 32, "lora_targets": ["q_proj"]}}
    policy = LaMASPolicy(model, tokenizer, AGENTS, lora_r=8, lora_targets=("q_proj", "v_proj"), agent_lora=own)
    reasoner, actor = _lora_a(policy, "reasoner_0"), _lora_a(policy, "actor_0")
    assert {s[0] for s in reasoner.values()} == {8} and {s[0] for s in actor.values()} == {4}
    assert sorted({n.rsplit(".", 1)[1] for n in reasoner}) == ["q_proj", "v_proj"]
    assert sorted({n.rsplit(".", 1)[1] for n in actor}) == ["q_proj"]
    assert (policy.base.peft_config["reasoner_0"].lora_alpha, policy.base.peft_config["actor_0"].lora_alpha) == (16, 32)
    policy.freeze_reference()  # the KL reference copies each adapter's own config
    assert {s[0] for s in _lora_a(policy, "actor_0-ref").values()} == {4}
    with pytest.raises(ValueError, match=r"agents\.actor_0\.lora_r=64 is above the model's hidden size 32"):
        LaMASPolicy(*load_base(str(tiny_model_dir)), AGENTS, agent_lora={"actor_0": {"lora_r": 64}})
    with pytest.raises(ValueError, match="needs an adapter per agent: adapter_mode=lora, not shared"):
        LaMASPolicy(*load_base(str(tiny_model_dir)), AGENTS, mode="shared", agent_lora={"actor_0": {"lora_r": 4}})


def test_a_runs_policy_and_its_rollout_workers_build_the_agents_own_shapes(tiny_model_dir):
    from marft_agents.distributed.worker import RolloutWorker
    from marft_agents.training.setup import worker_spec

    overrides = [f"model={tiny_model_dir}", "env=marft/MathChain-v0", "agents.actor_0.lora_r=4", "agents.reasoner_0.lora_alpha=4"]
    config = load(overrides=[*overrides, "device=cpu"])
    policy = build_policy(config, AGENTS)
    assert {s[0] for s in _lora_a(policy, "actor_0").values()} == {4} and {s[0] for s in _lora_a(policy, "reasoner_0").values()} == {8}
    assert policy.base.peft_config["reasoner_0"].lora_alpha == 4 and policy.base.peft_config["actor_0"].lora_alpha == 16
    worker = RolloutWorker(worker_spec(config, record_state=False))  # the weights the trainer publishes must fit
    for a in AGENTS:
        worker.policy.load_adapter_state(a, policy.adapter_state(a))


def test_each_agents_optimizer_steps_at_its_own_rate(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, AGENTS)
    optimizers = adapter_optimizers(policy, 3e-4)
    attach(optimizers, {"actor_0": 5e-5}, schedule="constant", warmup=0, updates=10)
    assert [g["lr"] for g in optimizers["actor_0"].param_groups] == [5e-5]
    assert [g["lr"] for g in optimizers["reasoner_0"].param_groups] == [3e-4]


# -- a run: logged rates, checkpoint, resume -------------------------------------------------------------


def _config(model_dir, run_dir, **extra):
    overrides = [
        "env=signal_env:ParityChain",  # a random model's team is paid half the time: every update steps
        f"model={model_dir}",
        f"run_dir={run_dir}",
        "updates=4",
        "episodes_per_update=4",
        "eval_episodes=2",
        "eval_rounds=0",
        "eval_every=0",
        "eval_transcripts=0",
        "checkpoint_every=0",
        "max_new_tokens=6",
        "threads=1",
        "device=cpu",
        "lr_schedule=cosine",
        "warmup_updates=1",
        "marft.minibatch_size=2",
        "marft.grad_accumulation=2",
        "agents.actor_0.lr=1e-3",
        "agents.actor_0.lora_r=4",
        *(f"{k}={v}" for k, v in extra.items()),
    ]
    return load(overrides=overrides)


def _metrics(run_dir) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def test_a_run_stopped_midway_and_resumed_equals_one_that_never_stopped(tiny_model_dir, tmp_path, monkeypatch):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(_config(tiny_model_dir, straight), progress=False, quiet=True)
    rows = _metrics(straight)
    for t, row in enumerate(rows):  # each update's rate: its agent's own (or marft.lr) times the schedule's factor
        f = lr_factor(t, schedule="cosine", warmup=1, updates=4)
        assert (row["reasoner_0/lr"], row["actor_0/lr"]) == (pytest.approx(3e-4 * f), pytest.approx(1e-3 * f))
    assert rows[0]["actor_0/lr"] == pytest.approx(1e-3) and rows[3]["actor_0/lr"] == pytest.approx(2.5e-4)  # cos(2 pi / 3)

    calls = iter(range(100))  # a SIGTERM after update 2 of 4: the run stops with that update's checkpoint
    original = trainer._stop_requested
    monkeypatch.setattr(trainer, "_stop_requested", lambda ranks, stop: signal.SIGTERM if next(calls) == 1 else original(ranks, stop))
    with pytest.raises(RunInterrupted, match="after update 2"):
        train(_config(tiny_model_dir, resumed), progress=False, quiet=True)
    monkeypatch.setattr(trainer, "_stop_requested", original)
    latest = ckpt.load_checkpoint(ckpt.latest_checkpoint(resumed / "checkpoints"))
    assert latest["update"] == 2 and set(latest["algo"]["schedulers"]) == set(AGENTS)
    assert latest["algo"]["schedulers"]["actor_0"]["last_epoch"] == 2  # the schedule's position: the next update's
    train(_config(tiny_model_dir, resumed), resume=True, progress=False, quiet=True)

    assert _metrics(straight) == _metrics(resumed)
    a = ckpt.load_checkpoint(ckpt.latest_checkpoint(straight / "checkpoints"))["algo"]["adapters"]
    b = ckpt.load_checkpoint(ckpt.latest_checkpoint(resumed / "checkpoints"))["algo"]["adapters"]
    assert {n: w.shape[0] for n, w in a["actor_0"].items() if "lora_A" in n} == dict.fromkeys([n for n in a["actor_0"] if "lora_A" in n], 4)
    for adapter in a:
        for name in a[adapter]:
            torch.testing.assert_close(a[adapter][name], b[adapter][name], rtol=0, atol=0)
    with pytest.raises(ConfigError, match=r"^--resume: lr_schedule=cosine decays .* resume with updates=4"):
        check_resumable(straight, _config(tiny_model_dir, straight, updates=8))


def test_a_checkpoint_from_before_schedules_resumes_at_its_optimizers_rates(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, AGENTS)
    older = MARFT(policy, MARFTConfig(lr=1e-4), temperature=1.0)  # a learner as runs made them before schedules
    state = older.state_dict()
    assert set(state) == {"adapters", "optimizers", "critic", "critic_optimizer"}  # no "schedulers"
    now = MARFT(policy, MARFTConfig(lr=1e-4), temperature=1.0)
    now.schedulers = attach(now.optimizers, {}, schedule="constant", warmup=0, updates=4)  # what a run attaches now
    now.load_state_dict(state)  # no "schedulers": each schedule starts at the rate its optimizer holds
    assert rates(now.optimizers) == {"reasoner_0/lr": 1e-4, "actor_0/lr": 1e-4}
    advance(now.schedulers)
    assert rates(now.optimizers) == {"reasoner_0/lr": 1e-4, "actor_0/lr": 1e-4}


# -- the config: every key checked in one line, every key in --help-config ---------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["lr_schedule=step"], r"^lr_schedule must be one of \['constant', 'linear', 'cosine'\], got 'step'$"),
        (["warmup_updates=-1"], r"^warmup_updates must be >= 0, got -1$"),
        (["updates=5", "warmup_updates=6"], r"^warmup_updates=6 is longer than the run \(updates=5\): .* <= 5$"),
        (["marft.grad_accumulation=0"], r"^marft\.grad_accumulation must be >= 1, got 0$"),
        (["algo=grpo", "grpo.grad_accumulation=0"], r"^grpo\.grad_accumulation must be >= 1, got 0$"),
        (["agents.actor_0.lr=2"], r"^agents\.actor_0\.lr must be in \(0, 1\) .*, got 2\.0$"),
        (["agents.actor_0.lora_r=0"], r"^agents\.actor_0\.lora_r must be >= 1, got 0$"),
        (["agents.actor_0.lora_alpha=0"], r"^agents\.actor_0\.lora_alpha must be > 0, got 0$"),
        (["agents.actor_0.lora_targets=[]"], r"^agents\.actor_0\.lora_targets must be a non-empty list of module names"),
        (["agents.actor_0.lora_targets=q_proj"], r"^agents\.actor_0\.lora_targets must be a list, got 'q_proj'$"),
        (["adapter_mode=shared", "agents.actor_0.lr=1e-4"], r"^agents\.actor_0\.lr: with adapter_mode=shared one adapter"),
        (["adapter_mode=copies", "agents.actor_0.lora_r=4"], r"^agents\.actor_0\.lora_r: adapter_mode=copies gives"),
        (["agents.actor_0.train=false", "agents.actor_0.lr=1e-4"], r"^agents\.actor_0\.lr: the agent is frozen"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_key(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        validate(load(overrides=overrides))
    assert "\n" not in str(err.value)


def test_help_config_shows_every_new_key_with_its_docstring():
    for algo in ("marft", "grpo", "cory"):
        docs = {key: doc for key, _, doc in describe(algo)}
        keys = ["lr_schedule", "warmup_updates", f"{algo}.grad_accumulation"]
        keys += [f"agents.<agent_id>.{k}" for k in ("lr", "lora_r", "lora_alpha", "lora_targets")]
        assert all(docs.get(k) for k in keys), [k for k in keys if not docs.get(k)]
    assert load().lr_schedule == "constant" and load().warmup_updates == 0 and load().algo_args.grad_accumulation == 1


def test_the_docs_example_prints_each_updates_rates(tmp_path, monkeypatch, capsys):
    import tempfile
    from pathlib import Path

    from test_docs import code_blocks

    page = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
    blocks = code_blocks(page)
    (k,) = [k for k, b in enumerate(blocks) if b.lang == "python" and "marft.grad_accumulation=2" in b.code]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's run goes under tmp_path
    exec(compile("\n" * (blocks[k].line - 1) + blocks[k].code, str(page), "exec"), {"__name__": "__docs__"})
    assert blocks[k + 1].lang == "text" and capsys.readouterr().out == blocks[k + 1].code + "\n"
