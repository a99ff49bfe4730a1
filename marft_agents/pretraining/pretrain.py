"""Supervised pre-training of the embedded tiny model on the synthetic MATH tasks (``marft pretrain``).

Builds a tokenizer and a tiny Llama (:mod:`marft_agents.models.tiny`), or continues a checkpoint
(``init``), trains it on SFT examples from the real envs (:mod:`marft_agents.pretraining.sft_data`) with
the loop of :mod:`marft_agents.pretraining.sft`, evaluates it on held-out problems
(:mod:`marft_agents.pretraining.sft_eval`) and saves it with a ``pretrain.json`` that records how it was
made (the command, the settings, the library versions, the run it continued) and how it scored.
How the shipped checkpoint was made, and what it measured, is in ``docs/agents.md``.

    python -m marft_agents.pretraining.pretrain --out runs/tiny --seed 0

``--out`` must be a new or empty folder (``--overwrite`` replaces the files a pre-training writes in
a non-empty one), checked before any work; every file is written through ``runs/files.py``: whole
files renamed into place, none through a symbolic link.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import torch
import transformers

from marft_agents.models.policy import EMBEDDED, embedded_model_path, load_base
from marft_agents.models.tiny import build_model, build_tokenizer, count_parameters
from marft_agents.pretraining.pretrain_config import BUILD_FIELDS, PretrainConfig
from marft_agents.pretraining.sft import sft_loss, train
from marft_agents.pretraining.sft_data import (
    ROLES,
    Batch,
    SFTData,
    collate,
    last_value,
    role_examples,
    tokenizer_corpus,
    unfinished,
)
from marft_agents.pretraining.sft_eval import evaluate_chain, evaluate_solo
from marft_agents.runs import files as run_files
from marft_envs.tasks.math.synthetic import LEVELS

__all__ = [
    "PretrainConfig",
    "SFTData",
    "Batch",
    "collate",
    "last_value",
    "unfinished",
    "role_examples",
    "tokenizer_corpus",
    "sft_loss",
    "train",
    "evaluate_chain",
    "evaluate_solo",
    "pretrain",
    "build_parser",
    "main",
]


def pretrain(
    out_dir: str | Path,
    *,
    seconds: float = 330.0,
    seed: int = 0,
    progress_bar: bool = True,
    command: str | None = None,
    overwrite: bool = False,
    **overrides,
) -> dict:
    """Build the tokenizer and the tiny model, SFT them on the synthetic tasks, evaluate, save to ``out_dir``.

    ``overrides`` are :class:`PretrainConfig` fields (``lr``, ``batch_size``, ``level_weights``, ...).
    Writes ``config.json``, ``generation_config.json``, ``model.safetensors``, the tokenizer files and
    ``pretrain.json`` (settings, training statistics, held-out accuracies); returns that summary.
    ``command`` is recorded there as how the run was started (``main`` passes its command line).
    ``out_dir`` must be new or empty unless ``overwrite`` (see :func:`check_out_dir`).
    """
    unknown = set(overrides) - set(PretrainConfig.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown pretrain settings {sorted(unknown)}; see PretrainConfig for the fields")
    config = PretrainConfig(seconds=seconds, seed=seed, **overrides)
    if not 0.0 <= config.unfinished_rate <= 1.0:
        raise ValueError(f"unfinished_rate must be between 0 and 1, got {config.unfinished_rate}")
    at_least = {
        "max_steps": 0,
        "batch_size": 1,
        "warmup_steps": 0,
        "eval_n": 0,
        "hidden_size": 1,
        "num_layers": 1,
        "num_heads": 1,
        "intermediate_size": 1,
        "vocab_size": 1,
    }
    for name, low in at_least.items():
        value = getattr(config, name)
        if value is not None and value < low:
            raise ValueError(f"{name} must be at least {low}, got {value}")
    if not (config.lr > 0 and math.isfinite(config.lr)) or not config.seconds > 0:
        raise ValueError(f"lr and seconds must be positive, got lr={config.lr}, seconds={config.seconds}")
    if config.init is not None:
        fixed = [k for k in BUILD_FIELDS if getattr(config, k) != getattr(PretrainConfig, k)]
        if fixed:
            raise ValueError(
                f"{', '.join(fixed)} cannot be set with init: the model and tokenizer come from {config.init}"
            )
    check_out_dir(Path(out_dir), overwrite=overwrite)
    threads = torch.get_num_threads()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    try:
        return _pretrain(Path(out_dir), config, progress_bar, command)
    finally:
        torch.set_num_threads(threads)


def check_out_dir(out: Path, *, overwrite: bool) -> None:
    """Refuse (ValueError, one line) an ``--out`` that is a file, or a non-empty folder unless ``overwrite``.

    With ``overwrite``, a symbolic link in the folder is refused too: no file is written through one.
    """
    if os.path.lexists(out) and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder: pick a new folder")
    if not out.is_dir():
        return
    entries = sorted(e.name for e in os.scandir(out))
    if entries and not overwrite:
        run = (
            " (a `marft train` run folder)"
            if (out / "metrics.jsonl").exists() or (out / "checkpoints").exists()
            else ""
        )
        raise ValueError(
            f"--out {out} is not empty{run}: it holds {', '.join(entries[:3])}{', ...' if len(entries) > 3 else ''}; "
            "pick a new folder, or pass --overwrite to replace the model files in it"
        )
    for name in entries:
        run_files.refuse_link(out / name)


def _save(out: Path, model, tokenizer, summary: dict) -> None:
    """Save the model, tokenizer and ``pretrain.json`` into ``out`` through ``run_files`` (atomic, no link followed)."""
    with tempfile.TemporaryDirectory(
        prefix="marft-pretrain-"
    ) as tmp:  # transformers writes where it is told: not into ``out``
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        for path in sorted(Path(tmp).rglob("*")):
            if path.is_file():
                with path.open("rb") as source:
                    run_files.write_file(
                        out, path.relative_to(tmp), lambda f, source=source: shutil.copyfileobj(source, f)
                    )
    run_files.write_text(out, "pretrain.json", json.dumps(summary, indent=2) + "\n")


def _pretrain(out: Path, config: PretrainConfig, progress_bar: bool, command: str | None) -> dict:
    torch.manual_seed(config.seed)
    t0 = time.perf_counter()
    if config.init is not None:  # before anything is written: a bad --init leaves no empty folder
        model, tokenizer = load_base(config.init)
    out.mkdir(parents=True, exist_ok=True)
    if config.init is None:
        tokenizer = build_tokenizer(tokenizer_corpus(config.tokenizer_problems, config.seed), config.vocab_size)
        model = build_model(
            tokenizer,
            hidden_size=config.hidden_size,
            num_layers=config.num_layers,
            num_heads=config.num_heads,
            intermediate_size=config.intermediate_size,
            max_position_embeddings=config.max_position_embeddings,
            seed=config.seed,
        )
    setup_seconds = time.perf_counter() - t0
    stats = train(model, tokenizer, config, progress_bar=progress_bar)

    summary: dict = {
        "command": command,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "settings": {
            k: (dict(v) if isinstance(v, Mapping) else v)
            for k, v in asdict(config).items()
            if config.init is None or k not in BUILD_FIELDS
        },
        "model": {
            "architecture": type(model).__name__,
            "parameters": count_parameters(model),
            "vocab_size": len(tokenizer),
            "hidden_size": model.config.hidden_size,
            "num_layers": model.config.num_hidden_layers,
            "num_heads": model.config.num_attention_heads,
            "intermediate_size": model.config.intermediate_size,
            "tied_embeddings": bool(model.config.tie_word_embeddings),
            "dtype": str(model.dtype).split(".")[-1],
        },
        "setup_seconds": round(setup_seconds, 2),
        "training": stats,
        "torch_threads": torch.get_num_threads(),
    }
    source = None if config.init is None else Path(embedded_model_path() if config.init == EMBEDDED else config.init)
    if source is not None and (source.expanduser() / "pretrain.json").is_file():
        # the checkpoint this run continued from, as it was made (its own history included)
        summary["init_pretrain"] = json.loads((source.expanduser() / "pretrain.json").read_text())
    if config.eval_n > 0:
        t1 = time.perf_counter()
        summary["eval_greedy_chain"] = evaluate_chain(model, tokenizer, n=config.eval_n, seed=0)
        summary["eval_greedy_solo"] = evaluate_solo(model, tokenizer, n=config.eval_n, seed=0)
        if config.eval_samples > 0:
            summary["eval_sampled_chain"] = evaluate_chain(
                model, tokenizer, n=config.eval_n, seed=0, temperature=1.0, samples=config.eval_samples
            )
        summary["eval_seconds"] = round(time.perf_counter() - t1, 1)
        # split by arithmetic since issue 53; the shipped checkpoint's pretrain.json predates it (split by uid)
        summary["eval_split"] = "synthetic test split by arithmetic, SyntheticMath(split='test').heldout(n, seed=0)"

    _save(out, model, tokenizer, summary)
    return summary


def _level_weights(text: str) -> dict[int, float]:
    """``"1,1,2,2"`` -> ``{1: 1.0, 2: 1.0, 3: 2.0, 4: 2.0}`` (weights of levels 1-4)."""
    return _weights(text, LEVELS, f"one per level {LEVELS}")


def _role_weights(text: str) -> dict[str, float]:
    """``"1,1,0.5"`` -> weights of reasoner, actor, solver."""
    return _weights(text, ROLES, f"for {', '.join(ROLES)}")


def _weights(text: str, names: Sequence, which: str) -> dict:
    """``text``, comma-separated numbers, as a weight per name (argparse names the option type by its caller)."""
    parts = [float(x) for x in text.split(",")]
    if len(parts) != len(names):
        raise argparse.ArgumentTypeError(f"give {len(names)} comma-separated weights, {which}")
    return dict(zip(names, parts))


def build_parser() -> argparse.ArgumentParser:
    """The options of ``marft pretrain`` (also ``python -m marft_agents.pretraining.pretrain``)."""
    p = argparse.ArgumentParser(prog="marft pretrain", description=__doc__.split("\n")[0])
    d = PretrainConfig()
    p.add_argument("--out", required=True, help="directory to write the checkpoint and pretrain.json to (new or empty)")
    p.add_argument(
        "--overwrite", action="store_true", help="write into a non-empty --out, replacing the files pre-training writes"
    )
    p.add_argument(
        "--init",
        default=None,
        help="continue from this checkpoint (embedded, a folder or a Hub id) instead of building a new model",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=d.max_steps,
        help="optimizer steps (default %(default)s; 0: train for --seconds only)",
    )
    p.add_argument(
        "--seconds", type=float, default=d.seconds, help="wall-clock cap of the training loop (default %(default)s)"
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    p.add_argument("--level-weights", type=_level_weights, default=None, help="weights of levels 1-4, e.g. 1,1,1,1")
    p.add_argument(
        "--role-weights",
        type=_role_weights,
        default=None,
        help="weights of the reasoner, actor and solver examples, e.g. 1,1,1",
    )
    p.add_argument(
        "--unfinished-rate",
        type=float,
        default=d.unfinished_rate,
        help="fraction of the reasoner's multi-step solutions cut short (default %(default)s)",
    )
    p.add_argument("--hidden-size", type=int, default=d.hidden_size)
    p.add_argument("--num-layers", type=int, default=d.num_layers)
    p.add_argument("--num-heads", type=int, default=d.num_heads)
    p.add_argument("--intermediate-size", type=int, default=d.intermediate_size)
    p.add_argument("--vocab-size", type=int, default=d.vocab_size)
    p.add_argument("--eval-n", type=int, default=d.eval_n, help="held-out problems to evaluate on (0: skip)")
    p.add_argument(
        "--eval-every",
        type=float,
        default=0.0,
        help="evaluate the greedy chain every this many training seconds (default: only at the end)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=True, help="show a progress bar (default: yes)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> dict:
    """Pre-train with command-line options and print the key figures of the summary."""
    args = build_parser().parse_args(argv)
    # every option that is a PretrainConfig field; an unset one (None) keeps the field's default
    settings = {k: v for k, v in vars(args).items() if k in PretrainConfig.__dataclass_fields__ and v is not None}
    settings["max_steps"] = args.max_steps or None  # 0: train for --seconds only
    command = "marft pretrain " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    summary = pretrain(args.out, progress_bar=args.progress, command=command, overwrite=args.overwrite, **settings)
    keys = ("model", "training", "eval_greedy_chain", "eval_greedy_solo", "eval_sampled_chain")
    report = {
        k: {f: v for f, v in summary[k].items() if f not in ("examples", "loss_history")} for k in keys if k in summary
    }
    print(json.dumps(report, indent=2))
    return summary


if __name__ == "__main__":
    main()
