"""The stack on a real pretrained model (SmolLM2-135M-Instruct, by name): prompts, EOS, LoRA, scoring, training.

Every test here is marked ``real_model`` (select or skip them with ``-m``). They run on one torch
thread: on shared cores two threads were up to 10x slower than one (measured; see docs/real-models.md).
"""

import json

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards
from real_model_helpers import REAL, real_model_cache

import marft_envs
from marft_agents.algorithms.grpo import GRPO, GRPOConfig
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.cli import main as cli
from marft_agents.models import named
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import TrainConfig
from marft_agents.training.trainer import build_policy

pytestmark = pytest.mark.real_model
LAYERS = 30  # SmolLM2-135M's decoder layers
TARGETS = TrainConfig().lora_targets  # the default: every linear layer of a Llama block


@pytest.fixture(scope="module", autouse=True)
def real_cache():
    """The converted model in the checkout's cache, found by name through ``MARFT_CACHE``; one torch thread."""
    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MARFT_CACHE", str(real_model_cache()))
        torch.set_num_threads(1)
        yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def chain_policy(real_cache):
    """A 2-agent MathChain policy on the real model, for tests that only generate and score."""
    model, tokenizer = load_base(REAL)
    return LaMASPolicy(model, tokenizer, marft_envs.make("marft/MathChain-v0").possible_agents, lora_targets=tuple(TARGETS))


def observations(n: int) -> list[dict]:
    """Reasoner observations of ``n`` problems (prompts of different lengths)."""
    env = marft_envs.make("marft/MathChain-v0")
    out = []
    for seed in range(n):
        env.reset(seed=seed)
        out.append(env.observe("reasoner_0"))
    return out


def snapshot(policy):
    models = {id(m): m for m in [policy.base, *policy.models.values()]}.values()
    return {(id(m), n): (p.detach().clone(), p.requires_grad) for m in models for n, p in m.named_parameters()}


def assert_trained_exactly_the_trainable(before, after):
    trainable = {k for k, (_, grad) in before.items() if grad}
    assert trainable, "no trainable parameters"
    unchanged = [k[1] for k in trainable if torch.equal(before[k][0], after[k][0])]
    assert not unchanged, f"trainable parameters that did not change: {unchanged[:5]}"
    changed_frozen = [k[1] for k in before.keys() - trainable if not torch.equal(before[k][0], after[k][0])]
    assert not changed_frozen, f"frozen parameters that changed: {changed_frozen[:5]}"


# -- prompts and tokens ---------------------------------------------------------------------------


def test_the_role_prompt_is_the_system_turn_of_the_models_chat_template(chain_policy):
    tok = chain_policy.tokenizer
    obs = observations(1)[0]
    assert obs["instructions"] and obs["text"]
    text = tok.decode(chain_policy.prompt(obs))
    assert text == (
        f"<|im_start|>system\n{obs['instructions']}<|im_end|>\n<|im_start|>user\n{obs['text']}<|im_end|>\n<|im_start|>assistant\n"
    )
    # The template's own default system prompt appears only when the env gives none.
    assert "SmolLM" not in text
    assert "You are a helpful AI assistant named SmolLM" in tok.decode(chain_policy.prompt({"text": "hi"}))


def test_the_end_of_turn_token_is_eos_and_ends_responses(chain_policy):
    tok = chain_policy.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert chain_policy.eos_token_id == im_end
    assert chain_policy.pad_token_id is not None
    prompts = [chain_policy.prompt({"text": "What is the capital of France?"}), chain_policy.prompt({"text": "Hi!"})]
    gen = chain_policy.generate(prompts, "reasoner_0", Sampling(0.0, 24))  # greedy: ~10-token answers
    for response, text in zip(gen.responses, gen.texts):
        assert response[-1] == im_end and im_end not in response[:-1] and len(response) < 24, (response, text)
        assert text and "<|im_end|>" not in text


def test_the_default_lora_targets_match_every_linear_layer(chain_policy):
    names = [n for n, _ in chain_policy.base.named_modules()]
    for adapter in chain_policy.adapters:
        for target in TARGETS:
            wrapped = [n for n in names if n.endswith(f"{target}.lora_A.{adapter}")]
            assert len(wrapped) == LAYERS, (adapter, target, len(wrapped))
    # each adapter: r * (in + out) per linear layer, 7 per block
    r, h, i, kv = 8, 576, 1536, 192
    per_block = r * ((h + h) * 2 + (h + kv) * 2 + (h + i) * 2 + (i + h))
    assert sum(p.numel() for p in chain_policy.parameters("reasoner_0")) == LAYERS * per_block


# -- scoring ---------------------------------------------------------------------------------------


def test_left_padded_prefix_shared_batches_score_like_plain_forwards(chain_policy):
    prompts = [chain_policy.prompt(o) for o in observations(3)]
    assert len({len(p) for p in prompts}) == 3  # different lengths: the batch needs padding
    responses = [[28120, 905, 2], [57, 48, 59, 38, 28], [30]]
    logp, _, mask = chain_policy.score(prompts, responses, "reasoner_0", 0.7)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        with torch.no_grad(), chain_policy.active("reasoner_0") as model:  # one unpadded sequence, no shared prefix
            logits = model(input_ids=torch.tensor([p + r])).logits[0, len(p) - 1 : -1].float() / 0.7  # (len(r), V)
        plain = torch.log_softmax(logits, -1).gather(-1, torch.tensor(r).unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(logp[i][mask[i]].detach(), plain, atol=1e-4, rtol=1e-4)


def test_behaviour_log_probs_equal_a_recompute(chain_policy):
    prompts = [chain_policy.prompt(o) for o in observations(3)]
    torch.manual_seed(0)
    gen = chain_policy.generate(prompts, "reasoner_0", Sampling(0.7, 12))
    logp, _, mask = chain_policy.score(prompts, gen.responses, "reasoner_0", 0.7)
    for i, response in enumerate(gen.responses):
        assert gen.token_logps[i].shape == (len(response),)
        torch.testing.assert_close(logp[i][mask[i]], gen.token_logps[i], atol=1e-4, rtol=1e-4)


# -- training ------------------------------------------------------------------------------------


def test_a_marft_update_changes_every_trainable_parameter_and_no_frozen_one(real_cache):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    model, tokenizer = load_base(REAL)
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents, lora_targets=tuple(TARGETS))
    algo = MARFT(policy, MARFTConfig(minibatch_size=2), temperature=0.7)  # 2 steps per adapter: A moves once B has
    torch.manual_seed(0)
    episodes = plant_rewards(RolloutEngine(policy, Sampling(0.7, 8)).collect(envs, range(4)))  # 8 tokens solve nothing
    critic_before = {n: p.detach().clone() for n, p in algo.critic.head.named_parameters()}
    before = snapshot(policy)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert_trained_exactly_the_trainable(before, snapshot(policy))
    assert all(not torch.equal(critic_before[n], p) for n, p in algo.critic.head.named_parameters())


def test_in_bfloat16_a_marft_update_changes_every_trainable_parameter_and_no_frozen_one(real_cache):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    policy = build_policy(TrainConfig(model=REAL, dtype="bfloat16"), envs[0].possible_agents)
    dtypes = {n: p.dtype for n, p in policy.base.named_parameters()}
    assert {d for n, d in dtypes.items() if "lora_" in n} == {torch.float32}  # the adapters stay float32
    assert {d for n, d in dtypes.items() if "lora_" not in n} == {torch.bfloat16}
    algo = MARFT(policy, MARFTConfig(minibatch_size=2), temperature=0.7)
    torch.manual_seed(0)
    episodes = plant_rewards(RolloutEngine(policy, Sampling(0.7, 8)).collect(envs, range(4)))
    before = snapshot(policy)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert_trained_exactly_the_trainable(before, snapshot(policy))


def test_grpo_updates_change_every_trainable_parameter_and_no_frozen_one(real_cache):
    G = 2
    envs = [marft_envs.make("marft/MathSolo-v0") for _ in range(4)]
    model, tokenizer = load_base(REAL)
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents, lora_targets=tuple(TARGETS))
    algo = GRPO(policy, GRPOConfig(group_size=G, minibatch_size=2), temperature=0.7)
    torch.manual_seed(0)
    episodes = RolloutEngine(policy, Sampling(0.7, 8)).collect(envs, range(4), seed_of=lambda i: i // G)
    for e in episodes:  # the untuned model solves nothing: give each group a spread of rewards
        for s in e.steps:
            s.reward = float(e.index % 2)
    before = snapshot(policy)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert metrics["grpo/zero_advantage_frac"] == 0.0
    assert_trained_exactly_the_trainable(before, snapshot(policy))


@pytest.mark.timeout(900)  # three short runs: ~90 s on busy shared cores, more on a busier machine
def test_marft_train_by_name_offline_and_resume_bit_identical(tmp_path, monkeypatch):
    def no_download(*args):
        raise AssertionError("the cached model must be used: no download")

    monkeypatch.setattr(named, "_download", no_download)
    args = [
        f"model={REAL}",
        "episodes_per_update=2",
        "eval_episodes=1",
        "eval_rounds=0",
        "eval_every=0",
        "max_new_tokens=8",
        "threads=1",
        "checkpoint_every=1",
        "marft.minibatch_size=2",
    ]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert cli(["train", *args, "updates=2", f"run_dir={straight}", "--no-progress"]) == 0
    assert cli(["train", *args, "updates=1", f"run_dir={resumed}", "--no-progress"]) == 0  # "interrupted"
    assert cli(["train", *args, "updates=2", f"run_dir={resumed}", "--no-progress", "--resume"]) == 0

    def metrics(run):
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]

    assert len(metrics(straight)) == 2 and metrics(straight) == metrics(resumed)
    from marft_agents.runs import checkpoint as ckpt

    a, b = (ckpt.load_checkpoint(ckpt.latest_checkpoint(run / "checkpoints"))["algo"]["adapters"] for run in (straight, resumed))
    for adapter in a:
        for name in a[adapter]:
            torch.testing.assert_close(a[adapter][name], b[adapter][name], rtol=0, atol=0)
    summary = json.loads((straight / "summary.json").read_text())
    assert summary["model"] == REAL and summary["updates"] == 2
