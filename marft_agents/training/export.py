"""``marft export``: a run's trained agents as folders other tools load, one per agent.

By default each agent's folder is a plain PEFT adapter (``adapter_config.json`` and
``adapter_model.safetensors``) that ``peft.PeftModel.from_pretrained(base, folder)`` reads on the
agent's own base model (``agents.<agent_id>.model``, else the run's ``model``), and that vLLM serves
as a LoRA adapter. With ``merged`` it is a whole model folder (safetensors weights, the tokenizer and
its chat template) that ``AutoModelForCausalLM.from_pretrained(folder)`` reads and ``model=DIR``
trains from: the agent's adapter merged into a copy of its base, in float32 (the base is loaded in
float32, so a bf16 run's adapter is not rounded away in the merge). Every folder holds a
short ``README.md``: the env, the algorithm, the updates done, the evaluation before and after where
the run has one, and the run's config.

The adapter modes: ``lora`` exports each agent's own adapter; ``shared`` exports the one adapter
every agent shares into each agent's folder (the card says so); ``copies`` trains a full copy of the
model per agent, which has no adapter to export: it is exported with ``merged`` (the copy itself)
and refused without. The run is read as ``marft eval --run`` reads it (:func:`policy_from_run`:
nothing the folder names is run), on the CPU and in float32 (4 bytes a parameter of the base,
whatever the run's ``dtype``; the adapters are float32 in any run). Everything is written into a
temporary folder beside ``out`` and renamed into place at the end, so a failure or a kill leaves no
half-written ``out``.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs.folder import read_config
from marft_agents.runs.report import headline
from marft_agents.settings.agents import per_agent
from marft_agents.training.from_run import policy_from_run

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""What an adapter export writes in an agent's folder (besides ``README.md``): what ``PeftModel.from_pretrained``
reads."""
CARD = "README.md"
"""The model card in each agent's folder."""


def export(
    run_dir: str | Path,
    out: str | Path,
    agents: list[str] | None = None,
    *,
    merged: bool = False,
    overwrite: bool = False,
    imports: list[str] = (),
) -> dict[str, Path]:
    """Write ``out/<agent_id>/`` for each of ``agents`` (None: every agent of the run); returns agent -> folder.

    ``merged``: a whole model folder (the adapter merged into a copy of the agent's base) instead of an
    adapter folder. ``out`` must be new or empty unless ``overwrite`` (then it is replaced whole, once
    the new one is written). ``imports``: modules to import first (``--import``, for a run on a
    ``module:Class`` env). Bad input is a one-line ValueError or FileNotFoundError, raised before
    anything is written.
    """
    run_dir, out = Path(run_dir), Path(out)
    missing = FileNotFoundError(f"no run at {run_dir}: expected {run_dir / 'config.json'}")
    data = read_config(run_dir, missing=missing, refuse=ValueError)
    if data.get("adapter_mode") == "copies" and not merged:
        raise ValueError(COPIES)
    check_out(out, run_dir, overwrite=overwrite)
    # on the CPU: a GPU run exports anywhere; a float32 base: a merge rounds none of the adapter away
    policy, config = policy_from_run(str(run_dir), overrides=["device=cpu", "dtype=float32"], imports=list(imports))
    chosen = chosen_agents(policy.agents, agents, run_dir)
    models = per_agent(config.agents, "model", config.model, policy.agents)
    facts = run_facts(run_dir, data)
    write = _write_merged if merged else _write_adapter
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        for agent in chosen:
            write(policy, agent, partial / agent)
            (partial / agent / CARD).write_text(model_card(agent, models[agent], _kind(policy.mode, merged), facts))
        _move_into_place(partial, out)
    except BaseException:  # a failure or Ctrl-C: nothing half-written is left beside out
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return {agent: out / agent for agent in chosen}


COPIES = (
    "adapter_mode=copies trains a full copy of the model per agent, not an adapter: export it with --merged "
    "(merged=True), a whole model folder per agent"
)
"""The refusal of an adapter export of a run that has no adapters."""


def check_out(out: Path, run_dir: Path, *, overwrite: bool) -> None:
    """Refuse (ValueError, one line) an ``out`` that is a link or a file, or a non-empty folder unless ``overwrite``;
    with ``overwrite``, one that holds the run being exported."""
    if out.is_symlink():
        raise ValueError(f"--out {out} is a symbolic link: pick a real folder (the export replaces what is at --out)")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder: pick a new folder")
    entries = sorted(e.name for e in os.scandir(out)) if out.is_dir() else []
    if not entries:
        return
    if not overwrite:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise ValueError(
            f"--out {out} is not empty (it holds {shown}): pick a new folder, or pass --overwrite to replace it"
        )
    held = out.resolve()
    if held == run_dir.resolve() or held in run_dir.resolve().parents:
        raise ValueError(
            f"--out {out} holds the run {run_dir} itself, which --overwrite would delete: pick another folder"
        )


def chosen_agents(agents: list[str], asked: list[str] | None, run_dir: Path) -> list[str]:
    """``asked`` in order without repeats (every agent of the run when None or empty), each an agent of the run."""
    if not asked:
        return list(agents)
    unknown = [a for a in asked if a not in agents]
    if unknown:
        raise ValueError(f"--agent {unknown[0]}: the run {run_dir} has no such agent; its agents are {agents}")
    return list(dict.fromkeys(asked))


def _member(policy, agent: str):
    """The :class:`LaMASPolicy` that holds ``agent``'s adapter: the policy itself, or its model's in a team."""
    return policy.members[policy.model_of[agent]] if policy.is_team else policy


def _write_adapter(policy, agent: str, folder: Path) -> None:
    """``agent``'s adapter as a PEFT folder: its ``LoraConfig`` and its weights under peft's saved names."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    member = _member(policy, agent)
    adapter = member.adapter_of[agent]
    config = copy.deepcopy(member.base.peft_config[adapter])
    # a causal LM's adapter, as AutoPeftModelForCausalLM expects it (the saved weights are the same either way)
    config.task_type = config.task_type or "CAUSAL_LM"
    config.inference_mode = True
    folder.mkdir()
    config.save_pretrained(str(folder))
    state = get_peft_model_state_dict(member.base, adapter_name=adapter)  # peft's saved names: no adapter name in them
    save_file(
        {k: v.detach().cpu().contiguous() for k, v in state.items()},
        str(folder / ADAPTER_FILES[1]),
        metadata={"format": "pt"},
    )


def _write_merged(policy, agent: str, folder: Path) -> None:
    """``agent``'s whole model: its adapter merged into a copy of its base (or its own full copy), and the tokenizer."""
    member = _member(policy, agent)
    if member.mode == "copies":
        model, scratch = member.models[agent], None
    else:  # a copy: the policy's base keeps its adapters for the next agent
        scratch = copy.deepcopy(member.base)
        model = scratch.merge_and_unload(adapter_names=[member.adapter_of[agent]])
    model.save_pretrained(str(folder))
    member.tokenizer.save_pretrained(str(folder))  # its chat template with it
    del scratch, model


def run_facts(run_dir: Path, data: dict[str, Any]) -> dict[str, Any]:
    """What the model card says of the run: its config, the update its latest checkpoint holds, its evaluations."""
    latest = ckpt.checkpoint_inside(run_dir / "checkpoints", f"--run {run_dir}")
    update = ckpt.load_checkpoint(latest, mmap=True)["update"]
    summary = _json(run_dir / "summary.json")
    if summary is not None and summary.get("updates") == update:
        before, after = summary.get("eval_before"), summary.get("eval_after")
    else:  # the run stopped before its end (or goes on): the evaluation after is not of this checkpoint
        before, after = _json(run_dir / "eval_before.json"), None
    return {
        "config": data,
        "update": update,
        "checkpoint": latest.name,
        "before": before,
        "after": after,
        "run": str(run_dir),
    }


def _json(path: Path) -> dict | None:
    """A JSON object file of the run, or None when it is missing or is not one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _kind(mode: str, merged: bool) -> str:
    """What the folder holds, in words, for the model card."""
    if mode == "copies":
        return "a whole model: the agent's own fully trained copy of its base (adapter_mode=copies)"
    shared = ", the one adapter every agent of the run shares (adapter_mode=shared)" if mode == "shared" else ""
    if merged:
        return f"a whole model: the agent's LoRA adapter{shared} merged into its base, in float32"
    return f"a PEFT LoRA adapter{shared}, to load on its base model"


def model_card(agent: str, model: str, kind: str, facts: dict[str, Any]) -> str:
    """The ``README.md`` of one agent's folder (Markdown, with the Hub's front matter)."""
    config, whole = facts["config"], kind.startswith("a whole model")
    rows = [
        ("agent", f"`{agent}`"),
        ("what", kind),
        ("base model", f"`{model}`"),
        ("env", f"`{config.get('env')}` with `{json.dumps(config.get('env_kwargs', {}))}`"),
        ("algorithm", f"`{config.get('algo')}`"),
        ("updates done", f"{facts['update']} of {config.get('updates')} (checkpoint `{facts['checkpoint']}`)"),
        ("run", f"`{facts['run']}`"),
        *_evaluation_rows(facts["before"], facts["after"]),
    ]
    return "\n".join(
        [
            "---",
            f"library_name: {'transformers' if whole else 'peft'}",
            "tags: [marft, multi-agent, reinforcement-learning]",
            "---",
            "",
            f"# `{agent}`, trained with marft",
            "",
            "| | |",
            "|---|---|",
            *(f"| {name} | {value} |" for name, value in rows),
            "",
            "## Loading it",
            "",
            "```python",
            *(_load_whole(agent) if whole else _load_adapter(agent, model)),
            "```",
            "",
            "## The run's config",
            "",
            "```json",
            json.dumps(config, indent=2),
            "```",
            "",
        ]
    )


def _load_whole(agent: str) -> list[str]:
    """The card's lines that load a whole model folder."""
    return [
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f'model = AutoModelForCausalLM.from_pretrained("{agent}")',
        f'tokenizer = AutoTokenizer.from_pretrained("{agent}")  # with the chat template the agent was trained with',
    ]


def _load_adapter(agent: str, model: str) -> list[str]:
    """The card's lines that load an adapter folder on its base."""
    return [
        "from peft import PeftModel",
        "",
        "from marft_agents import load_base",
        "",
        f"base, tokenizer = load_base({json.dumps(model)})  # the agent's base, as marft's model= names it",
        f'model = PeftModel.from_pretrained(base, "{agent}")',
        "# without marft: AutoModelForCausalLM.from_pretrained(the base_model_name_or_path of adapter_config.json)",
    ]


def _evaluation_rows(before: dict | None, after: dict | None) -> list[tuple[str, str]]:
    """The card's rows of the held-out evaluation: the headline number before and after training where the run has
    them."""
    if not before:
        return [("evaluation", "none in the run folder")]
    key, label = headline(before)
    shown = "{:.1%}" if key == "accuracy" else "{:.2f}"
    if after is None or key not in after:
        return [(f"{label}, before", shown.format(before[key])), ("after", "not evaluated at this checkpoint")]
    return [
        (
            label,
            f"{shown.format(before[key])} before, {shown.format(after[key])} after ({before.get('episodes')} episodes)",
        )
    ]


def _move_into_place(partial: Path, out: Path) -> None:
    """Rename the finished ``partial`` folder to ``out``: at once when ``out`` is missing or empty; else the old
    ``out`` is moved aside first and deleted once the new one is in place."""
    if not out.is_dir() or not any(os.scandir(out)):
        os.replace(partial, out)  # an empty folder is replaced in one rename
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.replace(out, aside)
    try:
        os.replace(partial, out)
    except BaseException:
        os.replace(aside, out)  # the old export comes back
        raise
    shutil.rmtree(aside)
