"""TRL's GRPOTrainer trains on marft envs: the rollout_func over MathChain, and the one-agent reward function."""

from __future__ import annotations

import json
import os
from importlib import resources

import pytest

pytestmark = pytest.mark.adapters
trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import marft_envs  # noqa: E402
from marft_agents.rollout.trl import MarftRollout, agent_step_dataset, env_reward, parse_slot, slot_prompt, solo_dataset, solo_reward  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def tiny_model():
    """A tiny randomly initialised Llama with the embedded model's tokenizer: near-uniform sampling, so the
    generations of a group differ and the update is non-zero."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(resources.files("marft_agents").joinpath("assets/tiny-math")))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return transformers.LlamaForCausalLM(config), tokenizer


def token_reward(completion_ids, **kwargs):
    """A reward with spread inside every group (the ids differ), so the update is non-zero whatever the env gave."""
    return [sum(ids) % 97 / 97.0 for ids in completion_ids]


def grpo_config(tmp_path, **overrides):
    args = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=2,
        max_completion_length=8,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        shuffle_dataset=False,
        use_cpu=True,
        seed=0,
        temperature=1.0,
        dataloader_num_workers=0,
    )
    return trl.GRPOConfig(**{**args, **overrides})


def test_slots_round_trip_and_a_plain_prompt_is_refused_in_one_line():
    assert parse_slot(slot_prompt(3, "actor_0", 1)) == (3, "actor_0", 1)
    with pytest.raises(ValueError, match="agent_step_dataset"):
        parse_slot("What is 2 + 2?")
    rows = agent_step_dataset("marft/MathChain-v0", seeds=[5, 6])["prompt"]
    assert [parse_slot(r) for r in rows] == [(5, "reasoner_0", 0), (5, "actor_0", 0), (6, "reasoner_0", 0), (6, "actor_0", 0)]


def test_grpo_trains_on_a_two_agent_env_through_rollout_func(tmp_path):
    model, tokenizer = tiny_model()
    seen = []

    def recorded_env_reward(completions, **kwargs):
        seen.append({k: kwargs[k] for k in ("marft_reward", "marft_agent", "marft_round")})
        return env_reward(completions, **kwargs)

    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=grpo_config(tmp_path),
        reward_funcs=[recorded_env_reward, token_reward],
        train_dataset=agent_step_dataset("marft/MathChain-v0", seeds=range(4)),
        rollout_func=MarftRollout("marft/MathChain-v0"),
    )
    trainer.train()

    changed = [n for n, p in model.named_parameters() if n in before and not torch.equal(before[n], p.detach())]
    assert set(changed) == set(before), f"unchanged: {sorted(set(before) - set(changed))}"
    # Each generation batch (4 rows) is one seed's 2 slots x 2 generations: the env's rewards reach the reward function.
    assert len(seen) == 2
    for call in seen:
        assert call["marft_agent"] == ["reasoner_0", "reasoner_0", "actor_0", "actor_0"]
        assert call["marft_round"] == [0, 0, 0, 0]
        assert all(isinstance(r, float) for r in call["marft_reward"])


class FakeTrainer:
    """Just what MarftRollout reads: a tokenizer and a generate stand-in (patched below)."""

    def __init__(self, tokenizer):
        self.processing_class = tokenizer


def test_rollout_rows_follow_the_prompts_and_mask_slots_the_episode_never_reached(monkeypatch, tmp_path):
    import marft_agents.rollout.trl as adapter

    _, tokenizer = tiny_model()
    answers = {"reasoner_0": "think", "actor_0": "\\boxed{0}"}
    calls = []

    def fake_generate(trainer, observations):
        calls.append(len(observations))
        # Answers by role: the reasoner's prompt mentions its role prompt, the actor's sees the reasoner's text.
        return [
            adapter.Step(
                prompt_ids=[1, 2], completion_ids=[3], logprobs=[-0.5], text=answers["actor_0" if "think" in o["text"] else "reasoner_0"]
            )
            for o in observations
        ]

    monkeypatch.setattr(adapter, "generate", fake_generate)
    rollout = MarftRollout("marft/MathChain-v0")
    prompts = [
        slot_prompt(7, "reasoner_0"),
        slot_prompt(7, "reasoner_0"),
        slot_prompt(7, "actor_0"),
        slot_prompt(7, "actor_0"),
        slot_prompt(7, "actor_0", round=1),
        slot_prompt(7, "actor_0", round=1),
    ]
    out = rollout(prompts, FakeTrainer(tokenizer))
    assert calls == [2, 2]  # 2 episodes of seed 7, played together: one layer per agent of the chain
    assert {k: len(v) for k, v in out.items()} == dict.fromkeys(out, 6)
    assert out["marft_agent"] == ["reasoner_0"] * 2 + ["actor_0"] * 4 and out["marft_round"] == [0] * 4 + [1] * 2
    env = marft_envs.make("marft/MathChain-v0")
    env.reset(seed=7)
    env.step({"reasoner_0": answers["reasoner_0"]})
    expected = env.step({"actor_0": answers["actor_0"]}).rewards
    assert out["marft_reward"][:4] == [expected["reasoner_0"]] * 2 + [expected["actor_0"]] * 2
    assert out["marft_reward"][4:] == [None, None] and out["env_mask"][4:] == [[0], [0]]
    assert out["env_mask"][:4] == [[1]] * 4 and out["logprobs"][0] == [-0.5]


def test_solo_reward_grades_completions_with_the_env(tmp_path):
    data = solo_dataset("marft/MathSolo-v0", seeds=[0, 1])
    assert data["seed"] == [0, 1] and data["prompt"][0][-1]["role"] == "user"
    env = marft_envs.make("marft/MathSolo-v0")
    env.reset(seed=0)
    right = f"\\boxed{{{env.problem.answer}}}"
    reward = solo_reward("marft/MathSolo-v0")
    got = reward(completions=[[{"role": "assistant", "content": right}], "no idea", right], seed=[0, 0, 0])
    assert got == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="one-agent"):
        solo_reward("marft/MathChain-v0")


def test_grpo_trains_with_the_solo_reward(tmp_path):
    model, tokenizer = tiny_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=grpo_config(tmp_path, max_steps=1),
        reward_funcs=[solo_reward("marft/MathSolo-v0"), token_reward],
        train_dataset=solo_dataset("marft/MathSolo-v0", seeds=range(4)),
    )
    trainer.train()
    changed = [n for n, p in model.named_parameters() if n in before and not torch.equal(before[n], p.detach())]
    assert set(changed) == set(before)
    assert json.loads(json.dumps(trainer.state.log_history[0]))["rewards/marft_MathSolo_v0/mean"] >= 0.0


def test_logprobs_are_the_sampling_distributions(tmp_path):
    import marft_agents.rollout.trl as adapter

    model, tokenizer = tiny_model()
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[token_reward],
        args=grpo_config(tmp_path, temperature=0.7),
        train_dataset=agent_step_dataset("marft/MathChain-v0", seeds=range(2)),
        rollout_func=MarftRollout("marft/MathChain-v0"),
    )
    env = marft_envs.make("marft/MathChain-v0")
    env.reset(seed=0)
    env.step({"reasoner_0": "a long line of reasoning that makes the actor's prompt longer"})
    # prompts of different lengths: the batch is left-padded, each row must still match its own forward pass
    steps = adapter.generate(trainer, [env.observe("reasoner_0"), env.observe("actor_0"), env.observe("reasoner_0")])
    assert len(steps[1].prompt_ids) > len(steps[0].prompt_ids)
    for step in steps:
        assert len(step.logprobs) == len(step.completion_ids) >= 1
        ids = torch.tensor([step.prompt_ids + step.completion_ids])
        with torch.no_grad():
            logits = model(ids).logits[0, len(step.prompt_ids) - 1 : -1] / 0.7  # (T, V): what each token was drawn from
        expected = logits.log_softmax(-1).gather(-1, torch.tensor(step.completion_ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(step.logprobs), expected, atol=1e-4, rtol=1e-4)
        assert step.text == tokenizer.decode(step.completion_ids, skip_special_tokens=True)


def test_the_adapters_venv_keeps_the_cpu_torch_and_no_vision_audio_packages():
    import importlib.util

    assert torch.__version__ == "2.13.0+cpu"
    assert [m for m in ("torchvision", "torchaudio", "torchcodec") if importlib.util.find_spec(m)] == []


def test_a_rows_reward_is_the_agents_return_from_its_round_on():
    from marft_agents.rollout.trl import Episode, Step

    episode = Episode(seed=0)
    for (agent, round), reward in {("a_0", 0): 0.5, ("b_0", 0): 1.0, ("a_0", 1): 2.0, ("b_0", 1): -1.0}.items():
        episode.steps[(agent, round)] = Step([1], [2], [0.0], "x", reward=reward)
    assert [episode.return_from("a_0", 0), episode.return_from("a_0", 1), episode.return_from("b_0", 0)] == [2.5, 2.0, 0.0]
    with pytest.raises(KeyError, match="unknown env id"):
        MarftRollout("marft/MathChian-v0")
