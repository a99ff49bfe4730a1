"""``dtype=bfloat16``: the base loads in bf16 for training and rollouts, the LoRA adapters stay float32."""

import json

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

import marft_envs
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.cli import main as cli
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import ConfigError, TrainConfig, load, validate
from marft_agents.training.trainer import build_policy


def snapshot(policy):
    return {n: (p.detach().clone(), p.requires_grad) for n, p in policy.base.named_parameters()}


def test_the_default_is_auto_and_a_small_base_stays_float32(tiny_model_dir, capsys):
    config = TrainConfig(model=str(tiny_model_dir))
    assert config.dtype == "auto"
    policy = build_policy(config, ["reasoner_0", "actor_0"])
    assert {p.dtype for p in policy.base.parameters()} == {torch.float32}  # under 50 M parameters, on any CPU
    assert "dtype=auto" not in capsys.readouterr().err  # a small base is float32 on every machine: nothing to say


def test_auto_loads_a_large_base_in_bf16_where_the_cpu_computes_it(tiny_model_dir, monkeypatch, capsys):
    from marft_agents.models import dtype

    monkeypatch.setattr(dtype, "AUTO_BF16_MIN_PARAMETERS", 1)  # the tiny base counts as large
    monkeypatch.setattr(dtype, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    policy = build_policy(TrainConfig(model=str(tiny_model_dir)), ["reasoner_0", "actor_0"])
    assert {p.dtype for n, p in policy.base.named_parameters() if "lora_" not in n} == {torch.bfloat16}
    assert {p.dtype for p in policy.parameters("reasoner_0")} == {torch.float32}  # the adapters stay float32
    assert "dtype=auto: bfloat16 (this CPU computes bf16 natively" in capsys.readouterr().err
    monkeypatch.setattr(dtype, "cpu_flags", lambda: frozenset({"avx2"}))
    policy = build_policy(TrainConfig(model=str(tiny_model_dir)), ["reasoner_0", "actor_0"])
    assert {p.dtype for p in policy.base.parameters()} == {torch.float32}
    assert "this CPU has no native bf16" in capsys.readouterr().err


def test_bfloat16_loads_the_base_in_bf16_and_keeps_the_adapters_in_float32(tiny_model_dir):
    config = load(overrides=[f"model={tiny_model_dir}", "dtype=bfloat16"])
    validate(config)
    policy = build_policy(config, ["reasoner_0", "actor_0"])
    lora = {n for n, _ in policy.base.named_parameters() if "lora_" in n}
    assert lora
    dtypes = {n: p.dtype for n, p in policy.base.named_parameters()}
    assert {dtypes[n] for n in lora} == {torch.float32}
    assert {d for n, d in dtypes.items() if n not in lora} == {torch.bfloat16}


def test_a_bf16_update_changes_every_trainable_parameter_and_no_frozen_one(tiny_model_dir):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    policy = build_policy(TrainConfig(model=str(tiny_model_dir), dtype="bfloat16"), envs[0].possible_agents)
    algo = MARFT(policy, MARFTConfig(minibatch_size=2), temperature=1.0)  # 2 steps per adapter: A moves once B has
    torch.manual_seed(0)
    episodes = plant_rewards(RolloutEngine(policy, Sampling(1.0, 8)).collect(envs, range(4)))  # returns that differ: a policy step
    assert all(s.token_logps.dtype == torch.float32 for e in episodes for s in e.steps)
    before = snapshot(policy)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    after = snapshot(policy)
    trainable = {n for n, (_, grad) in before.items() if grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert not [n for n in trainable if torch.equal(before[n][0], after[n][0])], "a trainable parameter did not move"
    assert not [n for n in before.keys() - trainable if not torch.equal(before[n][0], after[n][0])]
    assert {after[n][0].dtype for n in trainable} == {torch.float32}


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["dtype=float16"], "dtype must be one of ['float32', 'bfloat16', 'auto'], got 'float16'"),
        (["dtype=bf16"], "dtype must be one of ['float32', 'bfloat16', 'auto'], got 'bf16'"),
        (["dtype=bfloat16", "adapter_mode=copies"], "dtype=bfloat16 is for LoRA on a frozen base"),
    ],
)
def test_refused_dtypes_are_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        validate(load(overrides=overrides))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_marft_train_with_bfloat16_records_it(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    args = [
        "train",
        f"model={tiny_model_dir}",
        "dtype=bfloat16",
        "updates=1",
        "episodes_per_update=4",
        "eval_episodes=2",
        "eval_rounds=0",
        "eval_every=0",
        "max_new_tokens=8",
        f"run_dir={run}",
        "marft.minibatch_size=2",
        "--no-progress",
    ]
    assert cli(args) == 0
    assert json.loads((run / "config.json").read_text())["dtype"] == "bfloat16"
    assert (run / "summary.json").is_file()


AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})
SAPPHIRE = AVX2 | {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}


@pytest.mark.parametrize(
    "dtype, flags, gpu_bf16, resolved",
    [
        ("auto", AVX2, None, "float32"),  # emulated bf16 was 3-6x slower than fp32 there
        ("auto", SAPPHIRE, None, "bfloat16"),
        ("auto", frozenset({"avx512_bf16"}), None, "bfloat16"),
        ("auto", AVX2, True, "bfloat16"),  # on a GPU with bf16 the CPU's flags do not matter
        ("auto", SAPPHIRE, False, "float32"),  # nor on a GPU without it
        ("float32", SAPPHIRE, None, "float32"),
        ("bfloat16", SAPPHIRE, None, "bfloat16"),
    ],
)
def test_auto_picks_bf16_only_where_the_hardware_has_it(dtype, flags, gpu_bf16, resolved):
    from marft_agents.models.dtype import resolve_dtype

    assert resolve_dtype(dtype, gpu_bf16=gpu_bf16, flags=flags) == resolved
    assert resolve_dtype(dtype, gpu_bf16=gpu_bf16, flags=flags, parameters=135_000_000) == resolved  # SmolLM2's size
    # the embedded model's size: auto stays float32 everywhere, an explicit dtype is kept
    assert resolve_dtype(dtype, gpu_bf16=gpu_bf16, flags=flags, parameters=1_000_000) == ("float32" if dtype == "auto" else dtype)


def test_explicit_bf16_on_a_cpu_without_it_warns_once_in_one_line():
    from marft_agents.models import dtype as cpu

    cpu._warn_once.cache_clear()
    with pytest.warns(RuntimeWarning) as caught:
        for _ in range(3):
            assert cpu.resolve_dtype("bfloat16", flags=AVX2) == "bfloat16"
    assert len(caught) == 1 and "\n" not in str(caught[0].message) and "dtype=float32" in str(caught[0].message)


def test_auto_is_accepted_and_copies_stay_float32(tiny_model_dir):
    config = load(overrides=[f"model={tiny_model_dir}", "dtype=auto", "adapter_mode=copies"])
    validate(config)
    policy = build_policy(config, ["reasoner_0", "actor_0"])
    assert {p.dtype for p in policy.base.parameters()} == {torch.float32}
    with pytest.raises(ConfigError, match="dtype must be one of"):
        validate(load(overrides=["dtype=float16"]))


def test_mmap_threshold_kb_holds_glibcs_threshold_only_when_asked(tiny_model_dir, monkeypatch):
    from marft_agents.training import allocator

    held = []
    monkeypatch.setattr(allocator, "hold_mmap_threshold", lambda threshold=allocator.DEFAULT_THRESHOLD: held.append(threshold))
    agents = ["reasoner_0", "actor_0"]
    build_policy(TrainConfig(model=str(tiny_model_dir)), agents)
    assert held == []  # the default: glibc's own dynamic threshold
    build_policy(TrainConfig(model=str(tiny_model_dir), mmap_threshold_kb=128), agents)
    assert held == [128 * 1024]
    with pytest.raises(ConfigError, match="mmap_threshold_kb"):
        validate(load(overrides=["mmap_threshold_kb=-1"]))
