"""What a run records per update: where its time went, and ``metrics.jsonl`` (plus TensorBoard and a tracker)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from marft_agents.runs import files as run_files

from marft_agents.runs import folder as run_folder


@dataclass
class Timings:
    """Seconds spent in each part of one update."""

    generation: float = 0.0
    """Batched generate calls."""
    prompts: float = 0.0
    """Observations rendered through the chat template and tokenised."""
    env: float = 0.0
    """Env steps, rewards included."""
    training: float = 0.0
    """The algorithm's update, critic features included."""
    sync: float = 0.0
    """Handing the updated adapter weights to the generation engine."""


class MetricsLog:
    """``metrics.jsonl`` plus TensorBoard (and a tracker, ``runs/trackers.py``); on resume, drops lines past the checkpoint."""

    NAME = "metrics.jsonl"

    def __init__(self, run_dir: Path, resume_from: int | None, tracker=None):
        self.run_dir, self.path, self.tracker = run_dir, run_dir / self.NAME, tracker
        if resume_from is not None and self.path.exists():
            kept = run_folder.read_metrics(self.path, before=resume_from)
            run_files.write_text(run_dir, self.NAME, "".join(line + "\n" for line in kept))
        elif resume_from is None:
            run_files.write_text(run_dir, self.NAME, "")
        self.tb = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            # tensorboard opens its own event files (new, uniquely named) in a folder checked not to be a link
            self.tb = SummaryWriter(str(run_files.ensure_folder(run_dir, "tb")), purge_step=resume_from)
        except ImportError:  # tensorboard is optional; the JSONL log is the record
            pass

    def write(self, update: int, metrics: dict[str, float]) -> None:
        run_files.append_text(self.run_dir, self.NAME, json.dumps({"update": update, **metrics}) + "\n")
        if self.tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)):
                    self.tb.add_scalar(k, v, update)
        if self.tracker is not None:  # the same numbers TensorBoard gets
            self.tracker.log(update, metrics)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
