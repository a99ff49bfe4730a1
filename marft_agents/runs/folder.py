"""A run folder: whether a command may write into it, what may change on resume, and its metrics log.

``marft train`` refuses a folder that already holds a run unless it is told what to do with it
(``--resume`` continues it, ``--overwrite`` replaces it), and every check runs before the first
file is written, so a refused command leaves the folder exactly as it was. A symbolic link where a
run writes (a run file or folder, or an entry in a run folder's subfolders) is refused whatever
the mode: a run never writes through one (``run_files``), and a dangling link counts as present.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from marft_agents.runs import files as run_files
from marft_agents.runs.lock import LOCK

RUN_FILES = ("config.json", "metrics.jsonl", "eval_before.json", "summary.json", "curves.png")
"""Files a run writes at the top of its folder."""
RUN_DIRS = ("checkpoints", "tb", "samples", "engine", "trackers")
"""Folders a run writes inside its folder."""
# The three generation keys are, like ``threads``, the resources the vllm engine runs on (KV-cache
# memory, cores, adapter slots), not what the run samples from or optimises; as with ``threads``, a
# change may move float rounding, so the continuation is faithful but not bit-identical to a straight
# run. ``generation.engine`` and ``generation.dtype`` change the numbers that sample (bf16 is off by up
# to 0.2 per token) and the random stream, and ``generation.tis_cap`` changes the loss: those are refused.
# The distributed keys other than ``workers`` say where and with what resources the same episodes are
# played (each episode's sampling seed does not depend on the worker that plays it).
# ``gradient_checkpointing`` recomputes the same activations and ``mmap_threshold_kb`` says where freed memory
# goes (memory, not numbers); ``lora_compute`` moves only the rounding of the LoRA branches on a bf16 base, as
# ``threads`` moves the rounding of sums (a run written before the key ran "float32"), and so does
# ``generation.lean_decode`` (the same computation, projections fused); ``device`` is
# refused: a GPU samples from its own random generator, so the continuation would play other episodes.
# The ``log.*`` keys say what is written about the run (trackers, transcripts), never what it plays or learns.
SAFE_ON_RESUME = (
    "updates",
    "eval_every",
    "checkpoint_every",
    "checkpoints.keep",
    "threads",
    "gradient_checkpointing",
    "mmap_threshold_kb",
    "lora_compute",
    "generation.lean_decode",
    "run_dir",
    "generation.kv_cache_gb",
    "generation.threads",
    "generation.max_loras",
    "distributed.address",
    "distributed.cpus_per_worker",
    "distributed.gpus_per_worker",
    "distributed.timeout_s",
    "distributed.start_timeout_s",
    "distributed.max_restarts",
    "distributed.temp_dir",
    "log.wandb",
    "log.project",
    "log.run_name",
    "log.transcripts_every",
    "log.transcripts_episodes",
)
"""Config keys that may change on ``--resume``: they do not change what the earlier updates did."""


def holds_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` has files of an earlier run (a link, even a dangling one, counts)."""
    return any(os.path.lexists(run_dir / name) for name in (*RUN_FILES, *RUN_DIRS))


def read_config(
    run_dir: Path, *, missing: Exception, refuse: Callable[[str], Exception], hint: str = ""
) -> dict[str, Any]:
    """``run_dir``'s ``config.json``, read as data (a run folder may be someone else's: nothing it names runs).

    Raises ``missing`` when there is none, and ``refuse(message + hint)`` when it is not a JSON object: each caller
    names its own exception and says what to do next."""
    path = run_dir / "config.json"
    if not path.is_file():
        raise missing
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise refuse(f"cannot read {path}: {err}{hint}") from None
    if not isinstance(data, dict):
        raise refuse(f"{path} holds {type(data).__name__}, not a run's config (a JSON object){hint}")
    return data


def check_links(run_dir: Path) -> None:
    """Refuse (:class:`run_files.LinkError`) a symbolic link where a run writes.

    That is a run file or folder, the lock, or an entry of one of the run's subfolders.
    """
    for name in (*RUN_FILES, *RUN_DIRS, LOCK):
        run_files.refuse_link(run_dir / name)
    for name in RUN_DIRS:
        if (run_dir / name).is_dir():
            for entry in sorted(os.scandir(run_dir / name), key=lambda e: e.name):
                if entry.is_symlink():
                    run_files.refuse_link(Path(entry.path))


def check_target(run_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Raise ValueError (one line) when a run may not start in ``run_dir`` as asked."""
    if resume and overwrite:
        raise ValueError("pass --resume (continue the run) or --overwrite (replace it), not both")
    if run_dir.exists() and not run_dir.is_dir():
        raise ValueError(f"run_dir {run_dir} is a file, not a folder: pick another run_dir")
    if run_dir.is_dir():
        check_links(run_dir)
    if resume:
        if not (run_dir / "config.json").is_file():
            raise FileNotFoundError(
                f"--resume: no checkpoint in {run_dir / 'checkpoints'} (no run in {run_dir}); start without --resume"
            )
        hint = _newest_checkpoint_hint(run_dir / "checkpoints")
        if hint:
            raise FileNotFoundError(f"--resume: {hint}, or start again with --overwrite (which deletes the run)")
        if not (run_dir / "eval_before.json").is_file():
            raise FileNotFoundError(
                f"--resume: {run_dir / 'eval_before.json'} is missing, so the run cannot "
                "report its before/after table; start again with --overwrite"
            )
    elif holds_run(run_dir) and not overwrite:
        raise ValueError(
            f"run_dir {run_dir} already holds a run: continue it with --resume, pick a new run_dir, or replace it "
            "with --overwrite"
        )


def _newest_checkpoint_hint(folder: Path) -> str:
    """``checkpoint.newest_checkpoint_hint`` when ``latest`` names no file ("" otherwise): ``--resume`` then says how
    to continue from the newest ``update_*.pt``, not only ``--overwrite``, which deletes the run."""
    from marft_agents.runs import checkpoint as ckpt  # imports torch: only for a --resume, which loads it anyway

    return ckpt.newest_checkpoint_hint(folder) if ckpt.latest_checkpoint(folder) is None else ""


def clear(run_dir: Path) -> None:
    """Remove an earlier run's files and folders (only those a run writes; anything else stays)."""
    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)
    for name in RUN_DIRS:
        if (run_dir / name).is_dir() and not (run_dir / name).is_symlink():  # a link's target is not the run's
            shutil.rmtree(run_dir / name)


def changed_keys(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two config dicts, except :data:`SAFE_ON_RESUME`.

    A value equal to the saved one is no change. When ``algo`` differs, the algorithms' own sections (``marft.*``,
    ``grpo.*``) are left out: ``algo`` alone names the change (each side holds only its own algorithm's section).
    """
    a, b = _flat(saved), _flat(current)
    algos = {a.get("algo"), b.get("algo")}
    sections = tuple(f"{x}." for x in algos if isinstance(x, str)) if len(algos) > 1 else ()
    return sorted(
        k
        for k in set(a) | set(b)
        if k not in SAFE_ON_RESUME and not k.startswith(sections) and a.get(k, _UNSET) != b.get(k, _UNSET)
    )


def describe_changes(saved: dict[str, Any], current: dict[str, Any], keys: list[str]) -> str:
    """``seed (0 -> 1), marft.lr (0.0003 -> 0.001)`` for the given keys (``unset`` where one side has no such key)."""
    a, b = _flat(saved), _flat(current)
    return ", ".join(f"{k} ({_shown(a.get(k, _UNSET))} -> {_shown(b.get(k, _UNSET))})" for k in keys)


_UNSET = object()
"""A key one config has and the other does not (``agents.<agent_id>.*`` set on one side only)."""


def _shown(value: Any) -> str:
    return "unset" if value is _UNSET else json.dumps(value)


def read_metrics(path: Path, before: int) -> list[str]:
    """The lines of a ``metrics.jsonl`` for updates ``< before``; blank lines skipped, a bad line named."""
    kept = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            update = json.loads(line)["update"]
            if type(update) is not int:
                raise TypeError(update)
        except (ValueError, KeyError, TypeError):
            raise ValueError(
                f"{path}:{number}: not a metrics line (expected JSON with an integer 'update'); fix or delete that "
                "line, then resume"
            ) from None
        if update < before:
            kept.append(line)
    return kept


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k != "env_kwargs":
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
