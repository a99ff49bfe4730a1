"""The embedded tiny model: the shipped checkpoint loads and behaves, and ``pretrain`` writes a loadable one."""

import copy
import importlib.resources as resources
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from marft_agents.models.chat import messages, prompt_ids
from marft_agents.pretraining.pretrain import PretrainConfig, SFTData, last_value, main, pretrain, role_examples, unfinished
from marft_agents.pretraining.sft import sft_loss
from marft_agents.pretraining.sft_data import collate
from marft_agents.pretraining.sft_eval import evaluate_chain, evaluate_solo
from marft_envs.tasks.math import MathChain, MathSolo
from marft_envs.tasks.math.problems import Problem

ASSET = resources.files("marft_agents").joinpath("assets/tiny-math")


@pytest.fixture(scope="module")
def shipped():
    path = str(ASSET)
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def test_checkpoint_files_are_package_data():
    names = {p.name for p in ASSET.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "pretrain.json",
    } <= names


def test_size_and_special_ids(shipped):
    model, tok = shipped
    n = sum(p.numel() for p in model.parameters())
    assert 1_000_000 <= n <= 3_000_000
    assert model.config.tie_word_embeddings
    cfg, gen = model.config, model.generation_config
    assert cfg.pad_token_id == gen.pad_token_id == tok.pad_token_id is not None
    assert cfg.eos_token_id == gen.eos_token_id == tok.eos_token_id is not None
    assert cfg.bos_token_id == gen.bos_token_id == tok.bos_token_id is not None
    assert len({tok.pad_token_id, tok.eos_token_id, tok.bos_token_id}) == 3


def test_chat_template_ends_with_assistant_header(shipped):
    _, tok = shipped
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}]
    text = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|assistant|>")
    assert "Be brief." in text and "1+1?" in text
    ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if not isinstance(ids, list) else ids
    assert tok.convert_ids_to_tokens(ids[-1]) == "<|assistant|>"
    done = tok.apply_chat_template(chat + [{"role": "assistant", "content": "2"}], tokenize=False)
    assert done.endswith("2" + tok.eos_token)


def test_digits_are_one_token_each(shipped):
    _, tok = shipped
    for text in ("12345", "x=907+18", " 2024 ", "3/4*12=9"):
        digit_tokens = [t for t in tok.tokenize(text) if any(c.isdigit() for c in t)]
        assert all(len(t.lstrip("Ġ")) == 1 for t in digit_tokens), tok.tokenize(text)
        assert sum(len(t.lstrip("Ġ")) for t in digit_tokens) == sum(c.isdigit() for c in text)


@pytest.mark.parametrize(
    "text",
    ["héllo wörld — 数学 😀", "\x00\x01\x07\t\r\n\x7f", "\u200b\ufeff\U0010ffff", "a" * 10_000, "".join(chr(i) for i in range(1, 2000))],
)
def test_any_string_encodes(shipped, text):
    _, tok = shipped
    ids = tok.encode(text, add_special_tokens=False)
    assert ids
    assert tok.unk_token_id is None or tok.unk_token_id not in ids
    assert tok.decode(ids) == text


def test_ascii_round_trip(shipped):
    _, tok = shipped
    text = "Problem: 23 + 15 = 38\n  38-7=31 \\boxed{\\frac{7}{3}} {x}  ~!@#$%^&*()_+`\t end"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_a_tokenizer_without_a_chat_template_gets_the_observation_as_plain_text(shipped):
    # A base model's tokenizer has no template: the role prompt and the text, a blank line apart, with its BOS.
    _, tok = shipped
    bare = copy.deepcopy(tok)
    bare.chat_template = None
    obs = {"instructions": "You add.", "text": "What is 2 + 2?"}
    assert prompt_ids(bare, obs) == bare("You add.\n\nWhat is 2 + 2?", add_special_tokens=True)["input_ids"]
    assert prompt_ids(bare, {"instructions": "", "text": "x"}) == bare("x", add_special_tokens=True)["input_ids"]


def test_greedy_generation_on_a_real_observation(shipped):
    model, tok = shipped
    env = MathChain()
    env.reset(seed=0)
    obs = env.observe("reasoner_0")
    ids = prompt_ids(tok, obs)
    assert tok.decode(ids) == tok.apply_chat_template(messages(obs), add_generation_prompt=True, tokenize=False)
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=48,
            pad_token_id=tok.pad_token_id,
        )
    text = tok.decode(out[0, len(ids) :], skip_special_tokens=True)
    assert text.strip()


def test_last_value():
    assert last_value("2*8=16\n16+24=40") == "40"
    assert last_value("7/3-1/2=11/6\n") == "11/6"
    assert last_value("no steps") is None
    assert last_value("") is None


class _FixedDraw:
    """Stands in for a numpy Generator: ``integers`` returns a set value, ``random`` a set float
    (or fails the test when ``u`` is None: nothing should be drawn)."""

    def __init__(self, k=1, u=0.0):
        self.k, self.u = k, u

    def integers(self, low, high):
        assert low <= self.k < high
        return self.k

    def random(self):
        assert self.u is not None, "a draw was made where none should be"
        return self.u


@pytest.mark.parametrize(
    "steps, k, expected", [("5+3=8\n8-2=6", 1, "5+3=8"), ("2*4=8\n8+1=9\n9-3=6", 1, "2*4=8"), ("2*4=8\n8+1=9\n9-3=6", 2, "2*4=8\n8+1=9")]
)
def test_unfinished_cuts_after_k_lines(steps, k, expected):
    assert unfinished(steps, _FixedDraw(k)) == expected


def test_unfinished_keeps_one_line_solutions_whole():
    assert unfinished("23+15=38", _FixedDraw()) == "23+15=38"


@pytest.mark.parametrize(
    "u, rate, reasoner_target",
    [
        (0.3, 0.5, "6/2=3"),  # drawn below the rate: cut
        (0.7, 0.5, "6/2=3\n3+16=19"),  # drawn above it: whole
        (None, 0.0, "6/2=3\n3+16=19"),  # rate 0 never cuts, nor draws
    ],
)
def test_role_examples_cut_only_the_reasoner(u, rate, reasoner_target):
    problem = Problem(question="Split 6 in two, then add 16.", answer="19", level=3, solution="6/2=3\n3+16=19")
    out = role_examples(problem, MathChain(), MathSolo(), ["reasoner", "actor", "solver"], unfinished_rate=rate, rng=_FixedDraw(1, u))
    assert [target for _, target in out] == [reasoner_target, "\\boxed{19}", "6/2=3\n3+16=19\n\\boxed{19}"]


def test_role_examples_need_an_rng_to_cut():
    problem = Problem(question="q", answer="19", level=3, solution="6/2=3\n3+16=19")
    with pytest.raises(ValueError, match="needs an rng"):
        role_examples(problem, MathChain(), MathSolo(), ["reasoner"], unfinished_rate=0.5)


@pytest.mark.parametrize("rate, cut", [(1.0, True), (0.0, False)])
def test_sft_data_cuts_the_reasoners_two_step_solutions(shipped, rate, cut):
    _, tok = shipped
    config = PretrainConfig(
        unfinished_rate=rate, role_weights={"reasoner": 1.0, "actor": 0.0, "solver": 0.0}, level_weights={1: 0.0, 2: 1.0, 3: 1.0, 4: 0.0}
    )
    targets = [tok.decode(r[:-1]) for _, _, r in SFTData(tok, config, seed=0).examples(24)]
    assert len(targets) == 24 and all("=" in t for t in targets)
    assert all(("\n" not in t) == cut for t in targets), targets


def test_pretrain_smoke(tmp_path):
    threads = torch.get_num_threads()
    summary = pretrain(
        tmp_path, seconds=5, progress_bar=False, eval_n=8, eval_samples=2, tokenizer_problems=300, batch_size=16, chunk_problems=64
    )
    assert torch.get_num_threads() == threads
    assert summary["training"]["steps"] > 0
    saved = json.loads((tmp_path / "pretrain.json").read_text())
    assert saved["eval_greedy_chain"]["n"] == 8
    model = AutoModelForCausalLM.from_pretrained(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    assert model.config.vocab_size == len(tok)
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False).endswith(
        "<|assistant|>"
    )

    # --init continues from that checkpoint: same tokenizer, weights moved, its history kept
    more = pretrain(
        tmp_path / "more",
        init=str(tmp_path),
        max_steps=2,
        unfinished_rate=0.5,
        progress_bar=False,
        eval_n=4,
        eval_samples=0,
        batch_size=16,
        chunk_problems=64,
    )
    assert more["training"]["steps"] == 2
    assert more["init_pretrain"]["training"]["steps"] == summary["training"]["steps"]
    assert AutoTokenizer.from_pretrained(tmp_path / "more").get_vocab() == tok.get_vocab()
    moved = AutoModelForCausalLM.from_pretrained(tmp_path / "more")
    assert not torch.equal(moved.model.layers[0].mlp.up_proj.weight, model.model.layers[0].mlp.up_proj.weight)


def test_pretrain_names_a_missing_init_and_writes_nothing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model at"):
        pretrain(tmp_path / "out", init=str(tmp_path / "nope"), max_steps=1, progress_bar=False, eval_n=0)
    assert not (tmp_path / "out").exists()


def test_pretrain_refuses_shape_settings_with_init(tmp_path):
    with pytest.raises(ValueError, match="hidden_size cannot be set with init"):
        pretrain(tmp_path / "out", init="embedded", hidden_size=64, progress_bar=False)


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_pretrain_rejects_an_unfinished_rate_outside_0_1(tmp_path, rate):
    with pytest.raises(ValueError, match="unfinished_rate must be between 0 and 1"):
        pretrain(tmp_path, unfinished_rate=rate, progress_bar=False)


def test_held_out_evaluation_of_the_shipped_model(shipped):
    # Pinned 2026-12-06 on the test split by arithmetic (issue 53; the split by uid gave 0.3333 on its 24): the
    # shipped model was pretrained on the old split's train set, which holds most of these problems' arithmetic
    model, tok = shipped
    greedy = evaluate_chain(model, tok, n=24, seed=0)
    assert (greedy["n"], greedy["episodes"], greedy["temperature"]) == (24, 24, 0.0)
    assert round(greedy["accuracy"], 4) == 0.25
    assert greedy["accuracy_by_level"] == {"1": 1.0, "2": 0.0, "3": 0.0, "4": 0.5}
    assert (greedy["reasoner_finished"], greedy["accuracy_when_finished"]) == (0.7083, 0.3529)
    assert greedy["examples"][0] == {"gold": "31", "reasoner_0": "18-3=15", "actor_0": "\\boxed{15}", "solved": False}
    # the metric names of marft eval (evaluation.summarize)
    assert {"accuracy", "accuracy_stderr", "mean_return", "roles"} <= set(greedy)
    assert {"own_accuracy", "answer_accuracy_when_right", "mean_response_tokens"} <= set(greedy["roles"]["reasoner_0"])
    assert "team_accuracy" not in greedy

    sampled = evaluate_chain(model, tok, n=12, seed=0, temperature=1.0, samples=3)  # marft's decode loop's draws
    assert (sampled["episodes"], sampled["samples"], sampled["pass@1"], sampled["pass@3"]) == (36, 3, 0.1667, 0.3333)
    assert sampled["accuracy_by_level"] == {"1": 0.3333, "2": 0.0833, "3": 0.1667, "4": 0.2}
    assert (sampled["reasoner_finished"], sampled["accuracy_when_finished"]) == (0.7222, 0.1923)

    solo = evaluate_solo(model, tok, n=24, seed=0)
    assert solo["n"] == 24 and round(solo["accuracy"], 4) == 0.3333
    assert solo["accuracy_by_level"] == {"1": 1.0, "2": 0.125, "3": 0.1429, "4": 0.5}


def test_sft_loss_equals_the_plain_loss_on_full_sequences(tiny_model_dir):
    # sft_loss runs the shared prefix once and the output layer on response positions only; loss and
    # gradients must be those of the plain causal-LM loss over each whole sequence.
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prefix = list(range(30, 42))
    examples = [(prefix + [50, 51], [60, 61, 62]), (prefix + [52], [63]), (prefix + [53, 54, 55], [64, 65])]
    batch = collate(examples, pad_id=0)
    assert len(batch.prefix) == 12 and batch.input_ids.shape == (3, 5)  # the longest rest: 3 + 2 tokens
    loss = sft_loss(model, batch)
    loss.backward()
    fast = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logps = []
    for prompt, response in examples:
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1]  # (R, V)
        logps.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(response)[:, None])[:, 0])
    plain = -torch.cat(logps).mean()  # mean over the 6 response tokens
    plain.backward()
    torch.testing.assert_close(loss, plain, atol=1e-6, rtol=1e-6)
    for a, p in zip(fast, model.parameters()):
        torch.testing.assert_close(a, p.grad, atol=1e-6, rtol=1e-5)


def test_pretrain_json_records_the_command(tmp_path):
    out = tmp_path / "m"
    main(["--init", "embedded", "--out", str(out), "--max-steps", "1", "--batch-size", "8", "--eval-n", "0", "--no-progress"])
    saved = json.loads((out / "pretrain.json").read_text())
    assert saved["command"] == f"marft pretrain --init embedded --out {out} --max-steps 1 --batch-size 8 --eval-n 0 --no-progress"
    assert saved["versions"]["torch"] == torch.__version__
    assert saved["training"]["steps"] == 1
