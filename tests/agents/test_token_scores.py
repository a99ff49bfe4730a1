"""Scoring and generation without vocabulary-wide tensors per position: the numbers of the unchunked paths.

The references below are the code ``LaMASPolicy.score`` ran before the chunking (the output layer on every
response position at once) and, for ``lm.generate``, one full forward pass per response.
"""

import pytest
import torch

import marft_envs
from marft_agents.models import lm, token_scores
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.models.truncation import truncate

TOL = dict(atol=1e-6, rtol=1e-6)


def unchunked_score(policy, prompts, responses, adapter, temperature):
    """``LaMASPolicy.score`` as it was: ``(B, R, V)`` logits, log-softmax and its exponential at once."""
    P, ids, attn, mask = lm.score_layout(prompts, responses, policy.pad_token_id)
    S, R = ids.shape[1], mask.shape[1]
    ctx = policy.reference() if adapter is None else policy.active(adapter)
    with ctx as model:
        logits = lm.forward_after_prefix(model, prompts[0][:P], ids, attn, logits_to_keep=R + 1).logits  # (B, R + 1, V)
    logits = logits[:, :R].float() / temperature  # (B, R, V)
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, ids[:, S - R :].unsqueeze(-1)).squeeze(-1)  # (B, R)
    entropy = -(logp_all.exp() * logp_all).sum(-1)  # (B, R)
    return logp, entropy, mask


def chain_policy(model_dir, mode="lora"):
    env = marft_envs.make("marft/MathChain-v0")
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, env.possible_agents, mode=mode)
    torch.manual_seed(3)
    with torch.no_grad():
        for name in policy.adapters:
            for p in policy.parameters(name):
                p.add_(0.05 * torch.randn_like(p))  # non-identity adapters, so their gradients matter
    prompts = []
    for seed in range(4):
        env.reset(seed=seed)
        prompts.append(policy.prompt(env.observe("reasoner_0")))
    return policy, prompts


def test_chunks_give_the_unchunked_numbers_and_gradients():
    torch.manual_seed(0)
    B, R, d, V, T = 3, 5, 16, 50, 0.7
    head = torch.nn.Linear(d, V, bias=False)
    hidden = torch.randn(B, R, d, requires_grad=True)
    targets = torch.randint(0, V, (B, R))
    weights = torch.randn(B, R)  # a loss that weighs every position differently

    logp_all = torch.log_softmax(head(hidden).float() / T, dim=-1)  # (B, R, V)
    logp = logp_all.gather(-1, targets[..., None])[..., 0]
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    ((logp + entropy) * weights).sum().backward()
    grads = hidden.grad.clone(), head.weight.grad.clone()
    hidden.grad, head.weight.grad = None, None

    # 2 positions per chunk: 8 chunks, the last one short
    c_logp, c_entropy = token_scores.chosen_logps_and_entropy(hidden, targets, head, T, chunk_logits=2 * V)
    ((c_logp + c_entropy) * weights).sum().backward()
    torch.testing.assert_close(c_logp, logp, **TOL)
    torch.testing.assert_close(c_entropy, entropy, **TOL)
    torch.testing.assert_close(hidden.grad, grads[0], **TOL)
    torch.testing.assert_close(head.weight.grad, grads[1], **TOL)


def test_a_chunk_keeps_no_vocabulary_wide_tensor_for_backward():
    torch.manual_seed(0)
    B, R, d, V = 4, 6, 8, 40
    head = torch.nn.Linear(d, V, bias=False)
    hidden = torch.randn(B, R, d, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(tuple(t.shape)) or t, lambda t: t):
        logp, entropy = token_scores.chosen_logps_and_entropy(hidden, torch.zeros(B, R, dtype=torch.long), head, 1.0, chunk_logits=2 * V)
    assert not [s for s in saved if s and s[-1] == V], saved  # the unchunked path keeps (B, R, V) log-probs and their exp
    (logp.sum() + entropy.sum()).backward()  # recomputed chunk by chunk
    assert hidden.grad.abs().sum() > 0


def test_no_positions_still_give_a_graph():
    head = torch.nn.Linear(4, 10)
    hidden = torch.randn(2, 0, 4, requires_grad=True)
    logp, entropy = token_scores.chosen_logps_and_entropy(hidden, torch.zeros(2, 0, dtype=torch.long), head, 1.0)
    assert logp.shape == entropy.shape == (2, 0)
    (logp.sum() + entropy.sum()).backward()  # a loss over no tokens backpropagates zeros, as before


def test_a_logit_soft_cap_is_refused_in_one_line(tiny_model_dir):
    model, _ = load_base(str(tiny_model_dir))
    model.config.final_logit_softcapping = 30.0
    with pytest.raises(ValueError, match="final_logit_softcapping"):
        token_scores.decoder_and_head(model)


@pytest.mark.parametrize("mode, adapter, temperature", [("lora", "reasoner_0", 0.7), ("lora", None, 1.3), ("copies", "actor_0", 0.7)])
def test_score_equals_the_unchunked_path_with_the_same_gradients(tiny_model_dir, monkeypatch, mode, adapter, temperature):
    policy, prompts = chain_policy(tiny_model_dir, mode)
    responses = [[5, 6, 7, 8, 9, 10], [9], [10, 11], [12, 13, 14]]
    monkeypatch.setattr(token_scores, "CHUNK_LOGITS", 5 * policy.tokenizer.vocab_size)  # a few positions per chunk
    params = policy.parameters(adapter) if adapter else [p for p in policy.base.parameters() if p.requires_grad]
    weights = torch.randn(4, 6)

    def run(score):
        logp, entropy, mask = score(policy, prompts, responses, adapter, temperature)
        for p in params:
            p.grad = None
        if adapter is not None:
            ((logp + 0.1 * entropy) * weights * mask).sum().backward()
        return logp.detach(), entropy.detach(), mask, [None if p.grad is None else p.grad.clone() for p in params]

    new = run(LaMASPolicy.score)
    old = run(unchunked_score)
    torch.testing.assert_close(new[0], old[0], **TOL)  # every position, padding included
    torch.testing.assert_close(new[1], old[1], **TOL)
    assert torch.equal(new[2], old[2])
    if adapter is not None:
        assert all(g is not None for g in new[3])
        for a, b in zip(new[3], old[3]):
            torch.testing.assert_close(a, b, **TOL)


def teacher_forced_logps(model, prompts, responses, temperature, top_k=None, top_p=None):
    """Each response's log-probs from one full forward pass per row: the numbers ``lm.generate`` must have recorded."""
    out = []
    for prompt, response in zip(prompts, responses):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1].float()  # (R, V)
        target = torch.tensor(response)
        logits = truncate(logits / temperature, top_k, top_p, keep=target)
        out.append(torch.log_softmax(logits, -1).gather(-1, target[:, None])[:, 0])
    return out


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, None, None), (0.7, None, None), (0.7, 4, None), (0.9, None, 0.7)])
def test_generate_records_the_logps_of_the_distribution_it_draws_from(temperature, top_k, top_p):
    policy, prompts = chain_policy("embedded")  # trained: its rows end at different lengths
    prompts = [prompts[0], prompts[1][:-3] + prompts[1][-1:], prompts[2], prompts[3]]  # unequal widths: left padding
    pad, eos = policy.pad_token_id, policy.eos_token_id
    with torch.no_grad(), policy.active("reasoner_0") as model:
        torch.manual_seed(11)
        responses, logps = lm.generate(
            model,
            prompts,
            temperature=temperature,
            max_new_tokens=20,
            pad_token_id=pad,
            eos_token_id=eos,
            top_k=top_k or 0,
            top_p=top_p or 1.0,
        )
        reference = teacher_forced_logps(model, prompts, responses, temperature, top_k, top_p)
    assert len({len(r) for r in responses}) > 1  # some rows stopped early and left the batch
    assert all(eos not in r[:-1] for r in responses)
    for a, b in zip(logps, reference):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-5)


def test_generate_never_calls_transformers_generate(tiny_model_dir, monkeypatch):
    # transformers' generate fills None knobs with its global top_k=50 and a checkpoint's settings: it would sample
    # from another distribution than the recorded log-probs (and it keeps every step's logits when asked)
    policy, prompts = chain_policy(tiny_model_dir)
    with policy.active("reasoner_0") as model:
        monkeypatch.setattr(model, "generate", lambda **kw: pytest.fail("model.generate was called"))
        gen = policy.generate(prompts, "reasoner_0", Sampling(0.7, 6))
    assert [len(t) for t in gen.token_logps] == [len(r) for r in gen.responses]
