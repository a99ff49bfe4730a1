"""The causal-LM mechanics (``marft_agents.lm``), and numbers pinned from the embedded model.

The pinned numbers were recorded from the policy before its mechanics moved into ``lm.py``: the
tokens it generates (greedy and sampled with a fixed seed), their behaviour log-probs, the scores and
the critic features must stay what they were.
"""

import pytest
import torch

import marft_envs
from marft_agents.policy import LaMASPolicy, Sampling, load_base


@pytest.fixture(scope="module")
def embedded_policy():
    torch.manual_seed(0)  # LoRA's A matrices are drawn at construction
    model, tokenizer = load_base("embedded")
    env = marft_envs.make("marft/MathChain-v0")
    policy = LaMASPolicy(model, tokenizer, env.possible_agents)
    prompts = []
    for seed in range(3):
        env.reset(seed=seed)
        prompts.append(policy.prompt(env.observe("reasoner_0")))
    return policy, prompts


def test_pinned_greedy_generation(embedded_policy):
    policy, prompts = embedded_policy
    assert [len(p) for p in prompts] == [71, 71, 80]
    gen = policy.generate(prompts, "reasoner_0", Sampling(0.0, 24))
    assert gen.responses == [[23, 20, 28, 15, 26, 34, 22, 21, 20, 28, 2], [28, 27, 16, 30, 26, 34, 22, 27, 22, 2],
                             [22, 20, 24, 16, 26, 20, 27, 34, 22, 24, 20, 22, 23, 2]]
    assert gen.texts == ["2/7*5=10/7", "76+95=161", "1/3+5/6=13/12"]
    assert all(t.numel() == 0 for t in gen.token_logps)


@pytest.mark.parametrize("temperature, seed, responses, logp_sums", [
    (0.7, 1, [[23, 20, 28, 15, 26, 34, 23, 2], [28, 27, 16, 30, 26, 34, 22, 27, 22, 2],
              [22, 20, 24, 16, 26, 20, 27, 34, 23, 22, 20, 22, 23, 2]], [-1.397571, -0.624761, -5.168757]),
    (1.0, 2, [[23, 20, 28, 15, 26, 34, 23, 20, 28, 2], [28, 27, 16, 30, 26, 34, 22, 27, 22, 2],
              [22, 20, 24, 16, 26, 20, 27, 34, 22, 24, 20, 22, 26, 2]], [-2.657333, -1.024708, -6.374189]),
])
def test_pinned_sampled_generation(embedded_policy, temperature, seed, responses, logp_sums):
    policy, prompts = embedded_policy
    torch.manual_seed(seed)
    gen = policy.generate(prompts, "reasoner_0", Sampling(temperature, 24))
    assert gen.responses == responses
    torch.testing.assert_close(torch.stack([t.sum() for t in gen.token_logps]), torch.tensor(logp_sums),
                               atol=2e-5, rtol=0)


def test_pinned_scores_and_features(embedded_policy):
    policy, prompts = embedded_policy
    responses = [[23, 20, 28, 15, 26, 34, 23, 2], [28, 27, 16, 30, 26, 34, 22, 27, 22, 2],
                 [22, 20, 24, 16, 26, 20, 27, 34, 23, 22, 20, 22, 23, 2]]
    with torch.no_grad():
        logp, entropy, mask = policy.score(prompts, responses, None, 0.7)
        features = policy.features(prompts)
        token_features = policy.token_features(prompts, responses)
    assert mask.sum(-1).tolist() == [8, 10, 14]
    torch.testing.assert_close((logp * mask).sum(-1), torch.tensor([-1.397575, -0.624762, -5.168759]), atol=2e-5, rtol=0)
    torch.testing.assert_close((entropy * mask).sum(-1), torch.tensor([2.238785, 1.549622, 5.661491]), atol=2e-5, rtol=0)
    assert features.shape == (3, 128)
    torch.testing.assert_close(features[:, :3].flatten(), torch.tensor(
        [-1.267886, 0.513917, 3.548304, -0.522351, -0.602468, 0.847631, 2.130107, -1.926023, 0.536113]), atol=2e-5, rtol=0)
    assert token_features.shape == (3, 14, 128)
    torch.testing.assert_close(token_features[:, 1, 0], torch.tensor([1.727089, -1.786824, 2.68676]), atol=2e-5, rtol=0)
