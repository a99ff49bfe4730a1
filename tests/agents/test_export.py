"""``marft export``: a run's agents as PEFT adapter folders and merged model folders that load without marft.

Each export is checked against marft's own policy (``policy_from_run``, the policy ``marft eval --run``
plays): the logits of a few of the env's prompts, the adapter folder loaded by peft on the agent's
base and the merged folder loaded by transformers, within 1e-4 in float32. The runs' adapters are
moved well off the few small steps a short run takes (:func:`perturb_checkpoint`), so an adapter lost
or swapped on the way shows in the logits (each test checks that the untuned base is far off).
Then teams of models (each agent against its own base), the shared and copies adapter modes, and a
one-line refusal for each bad input, with nothing left half-written.
"""

import json
import os
import shutil

import pytest
import torch
from agent_helpers import base_args, one_line
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

import marft_envs
from marft_agents import embedded_model_path, export, load_base
from marft_agents.cli import main as cli
from marft_agents.models.chat import prompt_ids
from marft_agents.runs import checkpoint as ckpt
from marft_agents.training.export import ADAPTER_FILES, CARD, COPIES
from marft_agents.training.from_run import policy_from_run

TOLERANCE = 1e-4
"""Largest logit gap between an exported agent and marft's policy, both float32 (measured on the embedded model: 0 for
the adapter, the same computation; about 2e-5 for the merged weights, the merge's rounding)."""
FAR = 100 * TOLERANCE
"""The least gap between an agent and its untuned base: its adapter shows in the logits."""
SEEDS = (0, 1, 2)
"""The env resets whose prompts are compared."""


def perturb_checkpoint(run, scale: float = 0.05) -> None:
    """Add seeded noise to every adapter weight of ``run``'s latest checkpoint (B too, which a LoRA starts at 0)."""
    path = ckpt.latest_checkpoint(run / "checkpoints")
    state = torch.load(path, weights_only=True)
    generator = torch.Generator().manual_seed(0)
    for weights in state["algo"]["adapters"].values():
        for tensor in weights.values():
            if tensor.is_floating_point():
                tensor.add_(scale * torch.randn(tensor.shape, generator=generator))
    torch.save(state, path)


def short_run(tiny_model_dir, run, *overrides: str):
    """A one-update ``marft train`` run of the tiny model into ``run``, its adapters perturbed; returns ``run``.

    With ``algo=`` among ``overrides``, the run takes none of MARFT's keys (another algorithm's section is refused)."""
    args = [a for a in base_args(tiny_model_dir, run) if not any(o.startswith("algo=") for o in overrides) or not a.startswith("marft.")]
    assert cli(["train", "--no-progress", *args, "updates=1", *overrides]) == 0
    perturb_checkpoint(run)
    return run


def prompts(policy, agent: str, env_id: str = "marft/MathChain-v0") -> list[list[int]]:
    """``agent``'s chat prompts (its own tokenizer's) at the first round of a few episodes."""
    env = marft_envs.make(env_id)
    out = []
    for seed in SEEDS:
        env.reset(seed=seed)
        out.append(policy.prompt(env.observe(agent), agent))
    return out


@torch.no_grad()
def logits(model, ids: list[int]) -> torch.Tensor:
    return model(torch.tensor([ids])).logits[0].float()  # (T, V)


def own_logits(policy, agent: str, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``agent``'s logits under marft's policy (its adapter active), and its untuned base's."""
    member = policy.members[policy.model_of[agent]] if policy.is_team else policy
    with member.active(member.adapter_of[agent]) as model:
        trained = logits(model, ids)
    with member.reference() as model:
        untuned = logits(model, ids)
    return trained, untuned


def assert_same_logits(policy, agent: str, model) -> None:
    for ids in prompts(policy, agent):
        trained, untuned = own_logits(policy, agent, ids)
        assert (logits(model, ids) - trained).abs().max() <= TOLERANCE
        assert (untuned - trained).abs().max() > FAR  # the adapter matters: a lost one would show


def adapter_model(base_dir, folder):
    """``folder``'s adapter on a fresh float32 copy of the base at ``base_dir``, as a user loads it."""
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    return PeftModel.from_pretrained(base, str(folder)).eval()


@pytest.fixture(scope="module")
def trained(finished_run, tmp_path_factory):
    """:func:`finished_run` (MathChain, MARFT, the tiny model) with its adapters perturbed."""
    run = tmp_path_factory.mktemp("perturbed") / "run"
    shutil.copytree(finished_run, run)
    perturb_checkpoint(run)
    return run


@pytest.fixture(scope="module")
def policy(trained):
    """marft's own policy of :func:`trained`: what ``marft eval --run`` plays."""
    return policy_from_run(str(trained))[0]


def test_each_adapter_folder_loads_with_peft_on_the_base_and_gives_marfts_logits(trained, policy, tiny_model_dir, tmp_path):
    folders = export(trained, tmp_path / "out")
    assert folders == {a: tmp_path / "out" / a for a in ("reasoner_0", "actor_0")}
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary folder left beside it
    for agent, folder in folders.items():
        assert sorted(os.listdir(folder)) == sorted([*ADAPTER_FILES, CARD])
        saved = json.loads((folder / "adapter_config.json").read_text())
        assert saved["peft_type"] == "LORA" and saved["r"] == 8 and saved["task_type"] == "CAUSAL_LM"
        assert_same_logits(policy, agent, adapter_model(tiny_model_dir, folder))
    reasoner, actor = (adapter_model(tiny_model_dir, folders[a]) for a in ("reasoner_0", "actor_0"))
    ids = prompts(policy, "actor_0")[0]
    assert (logits(reasoner, ids) - logits(actor, ids)).abs().max() > FAR  # each agent its own adapter


def test_a_merged_folder_loads_with_transformers_alone_and_gives_marfts_logits(trained, policy, tmp_path):
    assert cli(["export", "--run", str(trained), "--out", str(tmp_path / "merged"), "--merged"]) == 0
    for agent in ("reasoner_0", "actor_0"):
        folder = tmp_path / "merged" / agent
        assert "model.safetensors" in os.listdir(folder) and not any(n.endswith((".bin", ".pt")) for n in os.listdir(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
        assert model.dtype == torch.float32 and not any("lora" in n for n, _ in model.named_parameters())
        assert_same_logits(policy, agent, model)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        assert tokenizer.chat_template == policy.tokenizer.chat_template
        env = marft_envs.make("marft/MathChain-v0")
        env.reset(seed=0)
        assert prompt_ids(tokenizer, env.observe(agent)) == policy.prompt(env.observe(agent), agent)
    load_base(str(tmp_path / "merged" / "actor_0"))  # marft's own checks of a model folder pass: model=DIR trains from it


def test_the_model_card_names_the_run_its_scores_and_holds_its_config(trained, tmp_path):
    export(trained, tmp_path / "out", ["actor_0"])
    card = (tmp_path / "out" / "actor_0" / CARD).read_text()
    summary = json.loads((trained / "summary.json").read_text())
    assert "library_name: peft" in card and "`marft/MathChain-v0`" in card and "`marft`" in card
    assert "| updates done | 2 of 2 (checkpoint `update_000002.pt`) |" in card
    before, after = summary["eval_before"]["accuracy"], summary["eval_after"]["accuracy"]
    assert f"{before:.1%} before, {after:.1%} after" in card
    config = json.loads(card.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert config == json.loads((trained / "config.json").read_text())


def test_a_run_stopped_early_has_only_its_evaluation_before_on_the_card(run_copy, tmp_path):
    (run_copy / "summary.json").unlink()  # stopped before its end: eval_before.json only
    export(run_copy, tmp_path / "out", ["reasoner_0"])
    card = (tmp_path / "out" / "reasoner_0" / CARD).read_text()
    assert "| after | not evaluated at this checkpoint |" in card


def test_a_team_of_models_exports_each_agent_against_its_own_base(tiny_model_dir, tmp_path):
    team_args = ["algo=grpo", "grpo.group_size=2", "model=embedded", f"agents.actor_0.model={tiny_model_dir}"]
    run = short_run(tiny_model_dir, tmp_path / "run", *team_args)
    team = policy_from_run(str(run))[0]
    assert team.is_team
    folders = export(run, tmp_path / "out")
    for agent, base in (("reasoner_0", embedded_model_path()), ("actor_0", tiny_model_dir)):
        assert_same_logits(team, agent, adapter_model(base, folders[agent]))
        model = "embedded" if agent == "reasoner_0" else str(tiny_model_dir)
        assert f"| base model | `{model}` |" in (folders[agent] / CARD).read_text()
    with pytest.raises(RuntimeError, match="size mismatch"):  # the reasoner's adapter fits only its own (wider) base
        adapter_model(tiny_model_dir, folders["reasoner_0"])
    assert cli(["export", "--run", str(run), "--out", str(tmp_path / "merged"), "--merged", "--agent", "actor_0"]) == 0
    assert os.listdir(tmp_path / "merged") == ["actor_0"]
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged" / "actor_0"))
    assert merged.config.hidden_size == 32
    assert_same_logits(team, "actor_0", merged)


def test_a_shared_adapter_is_exported_into_every_agents_folder(tiny_model_dir, tmp_path):
    run = short_run(tiny_model_dir, tmp_path / "run", "adapter_mode=shared")
    policy = policy_from_run(str(run))[0]
    folders = export(run, tmp_path / "out")
    weights = {a: (f / ADAPTER_FILES[1]).read_bytes() for a, f in folders.items()}
    assert weights["reasoner_0"] == weights["actor_0"]
    for agent, folder in folders.items():
        assert "the one adapter every agent of the run shares (adapter_mode=shared)" in (folder / CARD).read_text()
        assert_same_logits(policy, agent, adapter_model(tiny_model_dir, folder))


def test_full_copies_export_merged_only(tiny_model_dir, tmp_path, capsys):
    run = short_run(tiny_model_dir, tmp_path / "run", "adapter_mode=copies")
    capsys.readouterr()  # the run's own warnings
    with pytest.raises(ValueError, match="adapter_mode=copies trains a full copy"):
        export(run, tmp_path / "out")
    assert cli(["export", "--run", str(run), "--out", str(tmp_path / "out")]) == 2
    assert one_line(capsys) == f"marft export: error: {COPIES}"
    assert not (tmp_path / "out").exists()
    policy = policy_from_run(str(run))[0]
    folders = export(run, tmp_path / "out", merged=True)
    for agent, folder in folders.items():
        model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
        for ids in prompts(policy, agent):
            with policy.active(agent) as own:
                assert (logits(model, ids) - logits(own, ids)).abs().max() <= TOLERANCE
        assert "the agent's own fully trained copy" in (folder / CARD).read_text()


# -- bad input: one line, nothing written --------------------------------------------------------------------------


def refused(capsys, tmp_path, *args: str) -> str:
    """``marft export ARGS``'s one-line error, checked to exit 2 and leave ``tmp_path`` with no export in it."""
    before = sorted(os.listdir(tmp_path))
    assert cli(["export", *args]) == 2
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, no temporary folder left
    return one_line(capsys)


def test_no_such_run(tmp_path, capsys):
    err = refused(capsys, tmp_path, "--run", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"))
    assert err == f"marft export: error: no run at {tmp_path / 'nowhere'}: expected {tmp_path / 'nowhere' / 'config.json'}"


def test_a_run_without_a_checkpoint(run_copy, tmp_path, capsys):
    shutil.rmtree(run_copy / "checkpoints")
    err = refused(capsys, tmp_path, "--run", str(run_copy), "--out", str(tmp_path / "out"))
    assert err == f"marft export: error: no checkpoint in {run_copy}/checkpoints"


def test_an_unknown_agent_is_named_with_the_runs_agents(trained, tmp_path, capsys):
    args = ["--run", str(trained), "--out", str(tmp_path / "out"), "--agent", "actor_0", "--agent", "critic_9"]
    err = refused(capsys, tmp_path, *args)
    assert err == f"marft export: error: --agent critic_9: the run {trained} has no such agent; its agents are ['reasoner_0', 'actor_0']"


def test_a_non_empty_out_is_refused_unless_overwrite_and_then_replaced_whole(trained, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    err = refused(capsys, tmp_path, "--run", str(trained), "--out", str(out))
    assert err.endswith(f"--out {out} is not empty (it holds notes.txt): pick a new folder, or pass --overwrite to replace it")
    assert (out / "notes.txt").read_text() == "mine"
    assert cli(["export", "--run", str(trained), "--out", str(out), "--overwrite", "--agent", "actor_0"]) == 0
    assert os.listdir(out) == ["actor_0"] and sorted(os.listdir(tmp_path)) == ["out"]
    (tmp_path / "empty").mkdir()  # an empty folder is as good as a new one
    assert export(trained, tmp_path / "empty", ["actor_0"]) == {"actor_0": tmp_path / "empty" / "actor_0"}


def test_an_out_that_is_a_file_a_link_or_the_run_itself_is_refused(run_copy, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert "is a file, not a folder" in refused(capsys, tmp_path, "--run", str(run_copy), "--out", str(tmp_path / "file"))
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    assert "is a symbolic link" in refused(capsys, tmp_path, "--run", str(run_copy), "--out", str(tmp_path / "link"))
    for out in (run_copy, tmp_path):
        err = refused(capsys, tmp_path, "--run", str(run_copy), "--out", str(out), "--overwrite")
        assert err.endswith(f"holds the run {run_copy} itself, which --overwrite would delete: pick another folder")


def test_a_failure_midway_leaves_no_half_written_folder_and_the_old_export_intact(trained, tmp_path, monkeypatch):
    from marft_agents.training import export as export_module

    out = tmp_path / "out"
    export(trained, out, ["reasoner_0"])
    before = (out / "reasoner_0" / ADAPTER_FILES[1]).read_bytes()
    written = export_module._write_adapter

    def fail_on_the_actor(policy, agent, folder):
        written(policy, agent, folder)
        if agent == "actor_0":
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_module, "_write_adapter", fail_on_the_actor)
    for target, overwrite in ((tmp_path / "new", False), (out, True)):
        with pytest.raises(OSError, match="No space left"):
            export(trained, target, overwrite=overwrite)
        assert sorted(os.listdir(tmp_path)) == ["out"]  # no partial folder beside it, nothing at the new name
    assert os.listdir(out) == ["reasoner_0"] and (out / "reasoner_0" / ADAPTER_FILES[1]).read_bytes() == before


def test_export_help():
    with pytest.raises(SystemExit) as stopped:
        cli(["export", "--help"])
    assert stopped.value.code == 0
