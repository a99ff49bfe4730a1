"""Transcripts written while a run trains: a sample of an update's training episodes, and each mid-run evaluation's.

Every ``log.transcripts_every`` updates (updates 0, N, 2N, ...; 0: never) the trainer writes
``log.transcripts_episodes`` of that update's episodes, rewarded and unrewarded half each where both
exist, to ``samples/train_update_NNNNNN.jsonl``; each evaluation every ``eval_every`` updates writes its
``eval_transcripts`` episodes to ``samples/eval_update_NNNNNN.jsonl``. NNNNNN counts the updates applied
to the weights that played them, as a checkpoint's name does: a training sample is named by its own
update (the first, ``train_update_000000``, was played by the untrained adapters), an evaluation by the
updates before it.

One JSON line per episode, in the format of ``marft eval --transcripts`` (``report.check_transcript``),
so ``marft show`` reads every one. A training line adds what the learner saw: ``update``, ``agents``
(each agent's health in this update's metrics: ``report.agent_health``, its advantages' mean and spread
before normalisation among them) and, per step, ``prompt`` and ``response`` (the exact token ids the
update trained on, decoded with their special tokens) and ``return_to_go`` (the team's reward from that
step on, undiscounted, a round's shared reward once: what chain credit sums). A step's own advantage is
not there: each learner computes it inside its update (GAE over its critic's values, standardised per
agent) and hands out only the per-agent figures.

Each file is written whole (``run_files``, through ``report.write_samples``). On ``--resume`` the files
of the updates past the checkpoint are removed (:func:`drop_after`), as ``metrics.jsonl`` drops their
lines: the resumed run plays those updates again and writes them anew; the earlier ones stay.
This module knows the names; it is handed the ``samples/`` folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

TRAIN, EVAL = "train", "eval"
"""The two kinds: a sample of an update's training episodes, a mid-run evaluation's transcripts."""
WHOLE_RUN = ("eval_before", "eval_after")
"""The evaluations before and after training (``report.write_samples`` names them so)."""
_NAME = re.compile(r"(train|eval)_update_(\d{6,})")


def sample_name(kind: str, update: int) -> str:
    """``train_update_000025``: the name (less ``.jsonl``) of ``kind``'s transcripts at ``update``."""
    if kind not in (TRAIN, EVAL):
        raise ValueError(f"kind must be {TRAIN!r} or {EVAL!r}, got {kind!r}")
    return f"{kind}_update_{update:06d}"


def names(folder: Path) -> list[str]:
    """Every transcripts file of a ``samples/`` folder, by name (less ``.jsonl``), sorted; none if it is missing."""
    if not Path(folder).is_dir():
        return []
    return sorted(name[: -len(".jsonl")] for name in os.listdir(folder) if name.endswith(".jsonl"))


def written(folder: Path, kind: str) -> list[int]:
    """The updates with ``kind``'s transcripts in ``folder``, in order."""
    found = (_NAME.fullmatch(name) for name in names(folder))
    return sorted(int(m[2]) for m in found if m and m[1] == kind)


def drop_after(folder: Path, start: int) -> None:
    """On ``--resume`` from the checkpoint after ``start`` updates: remove the training samples of updates from
    ``start`` on and the evaluations after more than ``start`` updates (the resumed run writes them again)."""
    for kind, first in ((TRAIN, start), (EVAL, start + 1)):
        for update in written(folder, kind):
            if update >= first:  # unlink removes a link itself, never what it points at
                (Path(folder) / f"{sample_name(kind, update)}.jsonl").unlink(missing_ok=True)


def resolve(folder: Path, which: str, update: int | None = None) -> str:
    """The name ``marft show --which WHICH [--update N]`` reads in a ``samples/`` folder.

    ``which``: ``eval_before`` or ``eval_after``; ``train`` or ``eval`` (``update`` picks one, else the latest); or a
    whole name such as ``train_update_000025``. A name no run writes is refused (it never becomes a path elsewhere).
    """
    if which not in (*WHOLE_RUN, TRAIN, EVAL) and not _NAME.fullmatch(which):
        raise ValueError(
            f"--which must be eval_before, eval_after, train, eval or a name such as train_update_000025, got {which!r}"
        )
    if which not in (TRAIN, EVAL):
        if update is not None:
            raise ValueError(f"--update {update} picks among --which train or --which eval, not --which {which}")
        return which
    updates = written(folder, which)
    if not updates:
        how = "every log.transcripts_every updates" if which == TRAIN else "at each eval_every evaluation"
        raise FileNotFoundError(f"no {which} transcripts in {folder}: a run writes them {how} (0: never)")
    if update is None:
        return sample_name(which, updates[-1])
    if update not in updates:
        shown = ", ".join(map(str, updates[:8])) + (f", ... {updates[-1]}" if len(updates) > 8 else "")
        raise FileNotFoundError(f"no {which} transcripts of update {update} in {folder}; there are updates {shown}")
    return sample_name(which, update)
