"""Experiment trackers a run also logs to (``log.*`` keys): Weights & Biases with ``log.wandb=true``.

A run always writes ``metrics.jsonl`` and TensorBoard events; a tracker receives the same numbers
(each update's metrics at step ``update``, per agent where the learner reports them per agent, e.g.
``reasoner_0/loss``), the run's config, each full evaluation (``eval_before``, ``eval_after``) as its
numbers and a table of them, and that evaluation's transcripts (the ones written to ``samples/``) as a
table of agent-steps, then the summary's before/after change. The transcripts written while training
(``runs/transcripts.py``) go in as tables too, ``train/transcripts`` and ``eval/transcripts``, each at
its update's step. ``WANDB_MODE=offline`` writes the W&B run under ``run_dir/trackers/wandb`` with no
network (``wandb sync`` uploads it later). wandb is an optional dependency (``pip install
'marft[trackers]'``), imported only when a run asks for it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marft_agents.runs import files as run_files
from marft_agents.settings.fields import AT_LEAST_ONE, NON_NEGATIVE, ranged
from marft_agents.settings.text import ConfigError, shown

TRACKERS = "trackers"
"""The run folder's subfolder of the trackers' own files (W&B's run, and the id a resumed run continues)."""
WANDB_STATE = "wandb.json"
"""``trackers/wandb.json``: the W&B run's id and project, so ``--resume`` continues the same W&B run."""
OFFLINE_MODES = ("offline", "dryrun", "disabled")
"""``WANDB_MODE`` values that need no login."""
TRANSCRIPT_COLUMNS = ["episode", "solved", "return", "round", "agent", "observation", "action", "reward"]
"""The transcripts table: one row per agent-step of each transcript."""
TRAIN_TRANSCRIPT_COLUMNS = [
    "update",
    "episode",
    "solved",
    "return",
    "round",
    "agent",
    "prompt",
    "response",
    "reward",
    "return_to_go",
]
"""The training transcripts table (``train/transcripts``): one row per agent-step of each sampled training episode."""
SOLVED = {True: "yes", False: "no", None: "not reported"}
"""A transcript's ``solved`` in the tables: one column type, as ``marft show`` says it."""


@dataclass
class LogConfig:
    """Experiment trackers the run also logs to, and its training transcripts (``log.*`` keys; docs/adapters.md,
    "Experiment trackers"; docs/agents.md, "Training transcripts")."""

    wandb: bool = False
    """Also log to Weights & Biases (pip install 'marft[trackers]'); WANDB_MODE=offline needs no network."""
    project: str = "marft"
    """The W&B project the run is logged to."""
    run_name: str = ""
    """The W&B run's name ("": the run folder's name)."""
    transcripts_every: int = ranged(25, NON_NEGATIVE)
    """A sample of every Nth update's training episodes to samples/train_update_NNNNNN.jsonl (0, N, 2N...; 0: never)."""
    transcripts_episodes: int = ranged(4, AT_LEAST_ONE)
    """Training episodes in each sample, rewarded and unrewarded half each where both exist."""


def check(settings: LogConfig) -> None:
    """Refuse values no run can use, in one line naming the key."""
    if not isinstance(settings.project, str) or not settings.project or len(settings.project) > 128:
        raise ValueError(
            f"log.project must be a W&B project name of 1 to 128 characters, got {shown(settings.project)}"
        )
    if re.search(r"[/\\#?%:]", settings.project):
        raise ValueError(
            f"log.project {shown(settings.project)} holds a character W&B refuses (/ \\ # ? % :): pick another name"
        )
    if not isinstance(settings.run_name, str) or len(settings.run_name) > 128:
        raise ValueError(f"log.run_name must be at most 128 characters, got {shown(settings.run_name)}")


def check_available(settings: LogConfig) -> None:
    """Before any file is written: wandb is importable and, unless ``WANDB_MODE`` is offline, logged in (ConfigError
    otherwise)."""
    if not settings.wandb:
        return
    try:
        import wandb
    except ImportError:
        raise ConfigError(
            "log.wandb=true needs wandb: pip install 'marft[trackers]' (or set log.wandb=false)"
        ) from None
    if os.environ.get("WANDB_MODE", "").lower() not in OFFLINE_MODES:
        try:
            wandb.login(verify=False)
        except Exception as err:  # wandb's UsageError and the like: one line, before the run starts
            raise ConfigError(
                f"log.wandb=true: wandb cannot log in ({str(err).splitlines()[0][:160]}): run `wandb login`, "
                "or set WANDB_MODE=offline to write the W&B run into the run folder and `wandb sync` it later"
            ) from None


class WandbTracker:
    """One run's metrics, config, evaluations and transcripts in a W&B run whose files live in ``run_dir/trackers``."""

    def __init__(self, run_dir: Path, project: str, run_name: str, config: dict[str, Any], *, resume: bool, step: int):
        import wandb

        self.wandb = wandb
        folder = run_files.ensure_folder(run_dir, TRACKERS)  # checked not to be a link; W&B writes inside it
        state = folder / WANDB_STATE
        saved = json.loads(state.read_text()) if resume and state.is_file() else {}
        # None: wandb draws one (a new project: a new W&B run)
        run_id = saved["id"] if saved.get("project") == project else None
        try:
            self.run = wandb.init(
                project=project,
                name=run_name or Path(run_dir).resolve().name,
                id=run_id,
                resume="allow" if run_id else None,
                dir=str(folder),
                config=config,
            )
        except Exception as err:  # wandb's own errors (network, permissions): one line naming the way out
            raise ConfigError(
                f"log.wandb=true: wandb could not start its run ({str(err).splitlines()[0][:160]}); "
                "set WANDB_MODE=offline to log without a network, or log.wandb=false"
            ) from None
        run_files.write_text(run_dir, Path(TRACKERS, WANDB_STATE), json.dumps({"id": self.run.id, "project": project}))
        self.step = step
        """The step the next evaluation is logged at: the update it comes before (its metrics share the row)."""

    def log(self, update: int, metrics: dict[str, Any]) -> None:
        """An update's metrics, the numbers TensorBoard gets, at step ``update``."""
        self.run.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=update)
        self.step = update + 1

    def evaluation(self, name: str, result: dict[str, Any], samples: list[dict]) -> None:
        """A full evaluation: its numbers (``<name>/accuracy``, ``<name>/<agent>/own_accuracy``, ...) in the
        history and the summary, a table of them (``<name>/results``), and its transcripts (``<name>/transcripts``)."""
        numbers = evaluation_numbers(name, result)
        tables = {
            f"{name}/results": self.wandb.Table(columns=["metric", "value"], data=[[k, v] for k, v in numbers.items()])
        }
        if samples:
            tables[f"{name}/transcripts"] = self.wandb.Table(columns=TRANSCRIPT_COLUMNS, data=transcript_rows(samples))
        self.run.log({**numbers, **tables}, step=self.step)
        self.run.summary.update(numbers)

    def transcripts(self, name: str, step: int, transcripts: list[dict]) -> None:
        """Transcripts written while training, as the table ``<name>/transcripts`` at ``step`` (the row of the update
        they belong to): ``train``, a sample of an update's episodes (:data:`TRAIN_TRANSCRIPT_COLUMNS`), or ``eval``,
        a mid-run evaluation's (:data:`TRANSCRIPT_COLUMNS`); the rows of the ``samples/`` file they were written to."""
        if name == "train":
            table = self.wandb.Table(columns=TRAIN_TRANSCRIPT_COLUMNS, data=train_transcript_rows(transcripts))
        else:
            table = self.wandb.Table(columns=TRANSCRIPT_COLUMNS, data=transcript_rows(transcripts))
        self.run.log({f"{name}/transcripts": table}, step=step)

    def finish(self, summary: dict[str, Any]) -> None:
        """The summary's change between the evaluations and the run's wall time, in the W&B run's summary."""
        keys = ("improvement", "improvement_mean_return", "wall_time_s")
        self.run.summary.update({k: summary[k] for k in keys if isinstance(summary.get(k), (int, float))})

    def close(self, failed: bool = False) -> None:
        """End the W&B run (marked failed when the run raised)."""
        self.run.finish(exit_code=1 if failed else 0)


def open_tracker(
    settings: LogConfig, run_dir: Path, config: dict[str, Any], *, resume: bool, step: int
) -> WandbTracker | None:
    """The run's tracker (None: ``log.wandb=false``), after :func:`check_available` passed."""
    if not settings.wandb:
        return None
    return WandbTracker(run_dir, settings.project, settings.run_name, config, resume=resume, step=step)


def evaluation_numbers(name: str, result: dict[str, Any]) -> dict[str, float]:
    """An evaluation's numbers under ``name``: top-level ones, then each agent's (``<name>/<agent>/<key>``)."""
    out = {f"{name}/{k}": v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for agent, stats in (result.get("roles") or {}).items():
        out.update(
            {
                f"{name}/{agent}/{k}": v
                for k, v in stats.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
        )
    return out


def transcript_rows(samples: list[dict]) -> list[list[Any]]:
    """One row per agent-step of each transcript (:data:`TRANSCRIPT_COLUMNS`); an observation's fields joined as
    ``marft show`` prints them."""
    rows = []
    for t in samples:
        for s in t["steps"]:
            seen = "\n".join(f"[{field}]\n{text}" for field, text in (s.get("observation") or {}).items() if text)
            solved = SOLVED[t["solved"]]
            rows.append([t["episode"], solved, t["return"], s["round"], s["agent"], seen, s["action"], s["reward"]])
    return rows


def train_transcript_rows(transcripts: list[dict]) -> list[list[Any]]:
    """One row per agent-step of each training transcript (:data:`TRAIN_TRANSCRIPT_COLUMNS`): what the model read and
    wrote, token for token (``prompt``, ``response``), its reward and the team's return from that step on."""
    rows = []
    for t in transcripts:
        solved = SOLVED[t["solved"]]
        for s in t["steps"]:
            head = [t["update"], t["episode"], solved, t["return"], s["round"], s["agent"]]
            rows.append([*head, s["prompt"], s["response"], s["reward"], s["return_to_go"]])
    return rows
