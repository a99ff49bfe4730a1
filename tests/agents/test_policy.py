"""LaMASPolicy and the rollout engine: exact log-probs, batching, adapters, reference."""

import pytest
import torch

import marft_envs
from marft_agents.models.policy import LaMASPolicy, ModelNotFoundError, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import AECAsLayered, RolloutEngine


def make_policy(model_dir, agents, mode="lora"):
    model, tokenizer = load_base(str(model_dir))
    return LaMASPolicy(model, tokenizer, agents, mode=mode)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_behaviour_logps_match_a_recompute_at_the_sampling_temperature(tiny_model_dir, temperature):
    # Scoring at another temperature than the one sampled at gives other log-probs, so the policy scores at the sampling one.
    env = marft_envs.make("marft/MathChain-v0")
    policy = make_policy(tiny_model_dir, env.possible_agents)
    env.reset(seed=0)
    prompts = [policy.prompt(env.observe("reasoner_0"))] * 4
    torch.manual_seed(0)
    gen = policy.generate(prompts, "reasoner_0", Sampling(temperature, 12))
    logp, _, mask = policy.score(prompts, gen.responses, "reasoner_0", temperature)
    for i, resp in enumerate(gen.responses):
        recomputed = logp[i][mask[i]]
        assert recomputed.shape == (len(resp),)
        torch.testing.assert_close(recomputed, gen.token_logps[i], atol=1e-5, rtol=1e-5)


def test_long_prompts_are_scored_untruncated(tiny_model_dir):
    # A prompt truncated when scored but not when generated would score other tokens.
    env = marft_envs.make("marft/MathSolo-v0")
    policy = make_policy(tiny_model_dir, env.possible_agents)
    env.reset(seed=0)
    obs = env.observe("solver_0")
    long = policy.prompt({**obs, "text": obs["text"] + " and more" * 60})
    short = policy.prompt(obs)
    gen = policy.generate([long, short], "solver_0", Sampling(1.0, 8))
    logp, _, mask = policy.score([long, short], gen.responses, "solver_0", 1.0)
    torch.testing.assert_close((logp * mask).sum(-1), torch.stack([t.sum() for t in gen.token_logps]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "env_id, kwargs, mode, calls_per_episode_batch",
    [
        ("marft/MathChain-v0", {}, "lora", 2),  # two layers (reasoner, actor), one adapter each
        ("marft/MathChain-v0", {}, "shared", 2),  # still two layers
        ("marft/MathDebate-v0", {"n_agents": 3, "rounds": 1}, "lora", 3),  # one layer, three adapters
        ("marft/MathDebate-v0", {"n_agents": 3, "rounds": 1}, "shared", 1),  # one layer, one shared adapter
    ],
)
def test_one_generate_call_per_layer_per_adapter(tiny_model_dir, env_id, kwargs, mode, calls_per_episode_batch):
    envs = [marft_envs.make(env_id, **kwargs) for _ in range(6)]
    policy = make_policy(tiny_model_dir, envs[0].possible_agents, mode)
    engine = RolloutEngine(policy, Sampling(1.0, 6))
    episodes = engine.collect(envs, range(6))
    assert engine.generate_calls == calls_per_episode_batch
    assert len(episodes) == 6 and all(e.steps[-1].done for e in episodes)
    assert [s.agent for s in episodes[0].steps] == envs[0].possible_agents


def test_rollout_records_rounds_and_rewards(tiny_model_dir):
    envs = [marft_envs.make("marft/MathChain-v0", rounds=2) for _ in range(3)]
    policy = make_policy(tiny_model_dir, envs[0].possible_agents)
    episodes = RolloutEngine(policy, Sampling(1.0, 6)).collect(envs, range(5))
    assert [e.index for e in episodes] == list(range(5))
    for e in episodes:
        # A random model rarely answers right, so most episodes use both attempts.
        assert [s.round_end for s in e.steps] == [False, True] * (len(e.steps) // 2)
        assert e.steps[-1].done and not any(s.done for s in e.steps[:-1])


def test_reference_is_the_base_with_adapters_off(tiny_model_dir):
    env = marft_envs.make("marft/MathSolo-v0")
    policy = make_policy(tiny_model_dir, env.possible_agents)
    env.reset(seed=1)
    prompt = [policy.prompt(env.observe("solver_0"))]
    response = [[5, 6, 7]]
    ref, _, _ = policy.score(prompt, response, None, 1.0)
    act, _, _ = policy.score(prompt, response, "solver_0", 1.0)
    torch.testing.assert_close(ref, act)  # LoRA B starts at zero: the adapter is the identity
    with torch.no_grad():
        for p in policy.parameters("solver_0"):
            p.add_(0.1)
    act, _, _ = policy.score(prompt, response, "solver_0", 1.0)
    ref2, _, _ = policy.score(prompt, response, None, 1.0)
    torch.testing.assert_close(ref2, ref)
    assert not torch.allclose(act, ref)


def test_loaded_adapters_stay_trainable(tiny_model_dir):
    # Adapters loaded frozen would stop learning after a resume.
    env = marft_envs.make("marft/MathChain-v0")
    policy = make_policy(tiny_model_dir, env.possible_agents)
    state = {k: v + 1.0 for k, v in policy.adapter_state("actor_0").items()}
    policy.load_adapter_state("actor_0", state)
    params = policy.parameters("actor_0")
    assert params and all(p.requires_grad for p in params)
    with policy.active("reasoner_0"):
        assert all(p.requires_grad for p in policy.parameters("actor_0"))


def test_copies_mode_has_one_model_per_agent(tiny_model_dir):
    env = marft_envs.make("marft/MathChain-v0")
    policy = make_policy(tiny_model_dir, env.possible_agents, mode="copies")
    assert policy.models["reasoner_0"] is not policy.models["actor_0"]
    assert all(p.requires_grad for p in policy.parameters("actor_0"))
    assert not any(p.requires_grad for p in policy.base.parameters())


def test_plain_pettingzoo_aec_envs_are_driven_too(tiny_model_dir):
    aec = marft_envs.make("marft/MathChain-v0", view="aec")
    policy = make_policy(tiny_model_dir, aec.possible_agents)
    envs = [AECAsLayered(marft_envs.make("marft/MathChain-v0", view="aec")) for _ in range(2)]
    episodes = RolloutEngine(policy, Sampling(1.0, 6)).collect(envs, range(3))
    assert len(episodes) == 3 and all(len(e.steps) == 2 for e in episodes)


def test_missing_model_is_one_clear_line(tmp_path):
    with pytest.raises(ModelNotFoundError) as err:
        load_base(str(tmp_path / "nope"))
    assert "no model at" in str(err.value) and "\n" not in str(err.value)


def test_unknown_adapter_mode(tiny_model_dir):
    model, tok = load_base(str(tiny_model_dir))
    with pytest.raises(ValueError, match="unknown adapter mode 'loro'"):
        LaMASPolicy(model, tok, ["a_0"], mode="loro")


def test_score_equals_a_plain_forward_over_full_sequences_with_the_same_gradients(tiny_model_dir):
    # score() runs the shared role prompt once and the output layer on response columns only;
    # log-probs, entropies and gradients must equal the straightforward computation.
    env = marft_envs.make("marft/MathChain-v0")
    policy = make_policy(tiny_model_dir, env.possible_agents)
    with torch.no_grad():
        for p in policy.parameters("reasoner_0"):
            p.add_(0.05 * torch.randn_like(p))  # a non-identity adapter, so its gradients matter
    prompts = []
    for seed in range(3):
        env.reset(seed=seed)
        prompts.append(policy.prompt(env.observe("reasoner_0")))
    responses = [[5, 6, 7, 8], [9], [10, 11]]
    logp, entropy, mask = policy.score(prompts, responses, "reasoner_0", 0.7)
    (logp * mask).sum().backward()
    fast = [p.grad.clone() for p in policy.parameters("reasoner_0")]
    policy.base.zero_grad()

    plain_logps, plain_entropies = [], []
    with policy.active("reasoner_0") as model:
        for prompt, resp in zip(prompts, responses):
            logits = model(input_ids=torch.tensor([prompt + resp])).logits[0, len(prompt) - 1 : -1] / 0.7
            logp_all = torch.log_softmax(logits, -1)
            plain_logps.append(logp_all.gather(-1, torch.tensor(resp)[:, None])[:, 0])
            plain_entropies.append(-(logp_all.exp() * logp_all).sum(-1))
    torch.cat(plain_logps).sum().backward()
    plain = [p.grad for p in policy.parameters("reasoner_0")]

    assert mask.sum(-1).tolist() == [4, 1, 2]
    torch.testing.assert_close(logp[mask], torch.cat(plain_logps).detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy[mask], torch.cat(plain_entropies).detach(), atol=1e-5, rtol=1e-5)
    for a, b in zip(fast, plain):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_features_are_the_last_prompt_tokens_final_hidden_state_under_the_base(tiny_model_dir):
    env = marft_envs.make("marft/MathChain-v0")
    policy = make_policy(tiny_model_dir, env.possible_agents)
    with torch.no_grad():
        for p in policy.parameters("reasoner_0"):
            p.add_(0.05)  # features must ignore the adapters
    prompts = []
    for seed in range(3):
        env.reset(seed=seed)
        prompts.append(policy.prompt(env.observe("reasoner_0")))
    prompts.append(prompts[0][:-5])  # a shorter prompt with the same role prefix
    features = policy.features(prompts)
    with torch.no_grad(), policy.reference() as model:
        plain = [model(input_ids=torch.tensor([p]), output_hidden_states=True).hidden_states[-1][0, -1] for p in prompts]
    torch.testing.assert_close(features, torch.stack(plain), atol=1e-5, rtol=1e-5)
