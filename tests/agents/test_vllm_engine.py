"""The vllm engine on the embedded model: exact behaviour log-probs, adapter sync, one call per layer.

Run with ``make test-vllm`` (its own venv); skipped where vLLM is not installed. One engine serves
every test of this module and is shut down at its end.
"""

import importlib.util

import pytest
import torch

import marft_envs
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Request, Sampling
from marft_agents.rollout.layered import RolloutEngine

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vLLM is not installed in this Python: `make test-vllm` builds .venv-vllm and runs these tests",
    ),
]

TOLERANCE = 1e-4
"""Engine vs trainer log-probs of sampled tokens, both float32 (measured: a few 1e-6 on the embedded model)."""
AGENTS_ENV = ("marft/MathDebate-v0", {"n_agents": 3, "rounds": 1})  # one layer, three agents


def perturb(policy, adapter, scale, seed):
    """Move ``adapter``'s weights off peft's zero init, so each adapter answers differently."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.parameters(adapter):
            p.add_(scale * torch.randn(p.shape, generator=generator))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from marft_agents.engines.vllm import VLLMEngine

    env = marft_envs.make(AGENTS_ENV[0], **AGENTS_ENV[1])
    model, tokenizer = load_base("embedded")
    policy = LaMASPolicy(model, tokenizer, env.possible_agents, lora_targets=("q_proj", "v_proj", "down_proj"))
    for k, adapter in enumerate(policy.adapters):
        perturb(policy, adapter, 0.05, seed=k)
    engine = VLLMEngine(policy, "embedded", work_dir=tmp_path_factory.mktemp("vllm-engine"), threads=2)
    env.reset(seed=0)
    prompts = {a: policy.prompt(env.observe(a)) for a in env.possible_agents}
    yield policy, engine, prompts
    engine.close()


def max_gap(policy, prompt, response, logps, adapter, temperature):
    logp, _, mask = policy.score([prompt], [response], adapter, temperature)
    return (logp[0][mask[0]] - logps).abs().max().item()


def test_behaviour_logps_are_the_trainers_recompute_and_a_swapped_adapter_is_not(served):
    policy, engine, prompts = served
    agents = list(prompts)
    layer = [Request(prompts[a], a) for a in agents for _ in range(2)]
    gen = engine.generate(layer, Sampling(0.7, 16))
    assert engine.calls == 1
    own, swapped, raw = [], [], []
    for request, response, logps in zip(layer, gen.responses, gen.token_logps):
        assert len(response) == len(logps) >= 1
        assert response[-1] == policy.eos_token_id or len(response) == 16
        own.append(max_gap(policy, request.prompt, response, logps, request.adapter, 0.7))
        other = agents[(agents.index(request.adapter) + 1) % len(agents)]
        swapped.append(max_gap(policy, request.prompt, response, logps, other, 0.7))
        raw.append(max_gap(policy, request.prompt, response, logps, request.adapter, 1.0))
    assert max(own) < TOLERANCE
    assert max(swapped) > 100 * TOLERANCE  # the control: another agent's adapter is told apart
    assert max(raw) > 100 * TOLERANCE  # vLLM's default (raw) log-probs are those at temperature 1


def test_greedy_tokens_are_the_hf_engines_and_carry_no_logps(served):
    policy, engine, prompts = served
    agent, prompt = next(iter(prompts.items()))
    gen = engine.generate([Request(prompt, agent)], Sampling(0.0, 16))
    assert gen.token_logps[0].numel() == 0
    assert gen.responses == policy.generate([prompt], agent, Sampling(0.0, 16)).responses


def test_after_a_sync_the_engine_serves_the_new_weights_under_a_new_name(served):
    policy, engine, prompts = served
    agent = next(iter(prompts))
    prompt = prompts[agent]
    old_name = engine.adapter_names()[agent]
    old_state = policy.adapter_state(agent)
    perturb(policy, agent, 0.2, seed=99)  # "an update"
    stale = engine.generate([Request(prompt, agent)] * 2, Sampling(1.0, 16))
    # not yet synced: the engine still samples the old weights
    policy.load_adapter_state(agent, {k: v.clone() for k, v in old_state.items()})
    assert all(max_gap(policy, prompt, r, lp, agent, 1.0) < TOLERANCE for r, lp in zip(stale.responses, stale.token_logps))
    perturb(policy, agent, 0.2, seed=99)
    engine.sync(engine.version + 1)
    with pytest.raises(ValueError, match="versions must increase"):
        engine.sync(engine.version)  # would serve a name twice
    assert engine.adapter_names()[agent] != old_name and engine.adapter_names()[agent].endswith(f"@v{engine.version}")
    fresh = engine.generate([Request(prompt, agent)] * 2, Sampling(1.0, 16))
    assert all(max_gap(policy, prompt, r, lp, agent, 1.0) < TOLERANCE for r, lp in zip(fresh.responses, fresh.token_logps))
    policy.load_adapter_state(agent, old_state)  # the control: the new samples are not the old weights'
    assert any(max_gap(policy, prompt, r, lp, agent, 1.0) > 100 * TOLERANCE for r, lp in zip(fresh.responses, fresh.token_logps))
    perturb(policy, agent, 0.2, seed=99)  # back to what the engine serves


def test_a_layer_of_every_agent_of_every_env_is_one_generate_call(served):
    policy, engine, _ = served
    envs = [marft_envs.make(AGENTS_ENV[0], **AGENTS_ENV[1]) for _ in range(4)]
    rollout = RolloutEngine(policy, Sampling(0.7, 8), engine=engine)
    episodes = rollout.collect(envs, range(4))
    assert rollout.generate_calls == 1  # one layer: 4 envs x 3 agents, three adapters
    steps = [s for e in episodes for s in e.steps]
    assert len(steps) == 12 and {s.version for s in steps} == {engine.version}
    for s in steps[:3]:
        assert max_gap(policy, s.prompt, s.response, s.token_logps, policy.adapter_of[s.agent], 0.7) < TOLERANCE


def test_top_k_and_top_p_reach_vllm_and_its_logps_are_the_truncated_distributions(served):
    from marft_agents.models.sampling import row_temperatures

    policy, engine, prompts = served
    a, b, c = list(prompts)
    own = {a: Sampling(0.9, 16, top_k=5), b: Sampling(0.8, 16, top_p=0.7), c: Sampling(1.0, 16, top_k=1)}
    layer = [Request(prompts[x], x, sampling=own[x]) for x in (a, b, c) for _ in range(3)]
    gen = engine.generate(layer, Sampling(0.7, 16))
    truncated, plain = [], []
    for request, response, logps in zip(layer, gen.responses, gen.token_logps):
        assert len(response) == len(logps) >= 1
        scoring = row_temperatures([request.adapter], own, policy.device)  # the learner's: the same truncation
        truncated.append(max_gap(policy, request.prompt, response, logps, request.adapter, scoring))
        plain.append(max_gap(policy, request.prompt, response, logps, request.adapter, request.sampling.temperature))
    assert max(truncated) < TOLERANCE
    assert max(plain[:6]) > 100 * TOLERANCE  # the control: untruncated, top-k 5 and top-p 0.7 score otherwise
    greedy = policy.generate([prompts[c]], c, Sampling(0.0, 16)).responses[0]
    assert all(r == greedy for r in gen.responses[6:]) and all(lp.abs().max() < TOLERANCE for lp in gen.token_logps[6:])


def test_a_stop_string_ends_a_vllm_response_where_the_hf_engine_ends_it(served):
    policy, engine, prompts = served
    agent, prompt = next(iter(prompts.items()))
    full = engine.generate([Request(prompt, agent)], Sampling(0.0, 16)).responses[0]
    texts = [policy.tokenizer.decode(full[: k + 1], skip_special_tokens=True) for k in range(len(full))]
    k = next(k for k in range(1, len(full)) if texts[k] and texts[k][-1] not in texts[k - 1])  # a new character
    stop = Sampling(0.0, 16, stop=(texts[k][-1],))
    ours = engine.generate([Request(prompt, agent, sampling=stop)], Sampling(0.7, 16))
    assert ours.responses == [full[: k + 1]] == policy.generate([prompt], agent, stop).responses
    assert ours.texts == [texts[k]]
    sampled = engine.generate([Request(prompt, agent, sampling=Sampling(1.0, 16, stop=stop.stop))] * 4, Sampling(0.7, 16))
    for response, logps in zip(sampled.responses, sampled.token_logps):  # the token completing the stop keeps its log-prob
        assert len(response) == len(logps) and max_gap(policy, prompt, response, logps, agent, 1.0) < TOLERANCE
