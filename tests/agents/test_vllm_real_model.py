"""The vllm engine on the real model (SmolLM2-135M-Instruct): exact behaviour log-probs, and a short run.

Marked ``vllm`` (``make test-vllm`` selects them) and ``real_model``; skipped where vLLM is not
installed. The model comes from the checkout's cache (``real_model_helpers``). One torch thread and
one engine thread: on shared cores more threads were slower (docs/real-models.md).
"""

import importlib.util
import json

import pytest
import torch
from real_model_helpers import REAL, real_model_cache

import marft_envs
from marft_agents.cli import main as cli
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Request, Sampling

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.real_model,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vLLM is not installed in this Python: `make test-vllm` builds .venv-vllm and runs these tests",
    ),
]

TOLERANCE = 1e-3
"""Engine vs trainer log-probs of sampled tokens on the real model, both float32 (measured 2.4e-5 over 96 tokens;
the issue's probe: 1e-4 over 1,925 tokens). The controls below differ by more than 100 times this."""


@pytest.fixture(scope="module")
def real_cache():
    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MARFT_CACHE", str(real_model_cache()))
        torch.set_num_threads(1)
        yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def served(real_cache, tmp_path_factory):
    from marft_agents.engines.vllm import VLLMEngine

    env = marft_envs.make("marft/MathChain-v0")
    model, tokenizer = load_base(REAL)
    policy = LaMASPolicy(model, tokenizer, env.possible_agents, lora_targets=("q_proj", "v_proj"))
    for k, adapter in enumerate(policy.adapters):  # off peft's zero init: each adapter answers differently
        generator = torch.Generator().manual_seed(k)
        with torch.no_grad():
            for p in policy.parameters(adapter):
                p.add_(0.02 * torch.randn(p.shape, generator=generator))
    engine = VLLMEngine(policy, REAL, work_dir=tmp_path_factory.mktemp("vllm-real"), threads=1)
    env.reset(seed=0)
    prompts = {a: policy.prompt(env.observe(a)) for a in env.possible_agents}
    yield policy, engine, prompts
    engine.close()


def gap(policy, prompt, response, logps, adapter, temperature):
    logp, _, mask = policy.score([prompt], [response], adapter, temperature)
    return (logp[0][mask[0]] - logps).abs().max().item()


@pytest.mark.timeout(600)
def test_real_model_behaviour_logps_are_the_trainers_recompute_in_float32(served):
    policy, engine, prompts = served
    agents = list(prompts)
    layer = [Request(prompts[a], a) for a in agents for _ in range(2)]
    gen = engine.generate(layer, Sampling(0.7, 24))
    assert engine.calls == 1  # both agents' adapters in one call
    own, swapped, raw = [], [], []
    for request, response, logps in zip(layer, gen.responses, gen.token_logps):
        assert len(response) == len(logps) >= 1
        own.append(gap(policy, request.prompt, response, logps, request.adapter, 0.7))
        other = agents[1 - agents.index(request.adapter)]
        swapped.append(gap(policy, request.prompt, response, logps, other, 0.7))
        raw.append(gap(policy, request.prompt, response, logps, request.adapter, 1.0))
    print(f"real model, fp32: max |engine - trainer| = {max(own):.2e} over {sum(map(len, gen.responses))} tokens")
    assert max(own) < TOLERANCE
    assert max(swapped) > 100 * TOLERANCE  # the control: the other agent's adapter is told apart
    assert max(raw) > 100 * TOLERANCE  # and so are log-probs before temperature


@pytest.mark.timeout(900)  # an engine start and two updates of the real model on one shared core
def test_a_short_real_model_run_with_vllm_and_the_tis_correction_trains(real_cache, tmp_path):
    run = tmp_path / "run"
    assert (
        cli(
            [
                "train",
                f"model={REAL}",
                "generation.engine=vllm",
                "generation.threads=1",
                "generation.tis_cap=2",
                "dtype=float32",  # the trainer in fp32 as the engine: dtype=auto would score in bf16 here
                "threads=1",
                "updates=2",
                "episodes_per_update=2",
                "eval_episodes=1",
                "eval_rounds=0",
                "max_new_tokens=12",
                "checkpoint_every=0",
                f"run_dir={run}",
                "--no-progress",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [0, 1] and all(r["time/sync_s"] > 0 for r in rows)
    for r in rows:  # fp32 engine: the trainer's recompute agrees, the weights stay at 1 within the tolerance
        assert r["tis/abs_logp_diff_max"] < TOLERANCE
        assert all(abs(v - 1) < 10 * TOLERANCE for k, v in r.items() if "tis_weight" in k)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["model"] == REAL and summary["updates"] == 2
