"""The training loop behind ``marft train``: collect, update, log, checkpoint, evaluate.

A run folder holds ``config.json``, ``metrics.jsonl`` (one line per update), TensorBoard events in
``tb/``, checkpoints in ``checkpoints/``, ``eval_before.json``, ``summary.json``, ``curves.png``, transcripts in
``samples/`` (the evaluations', and a sample of every ``log.transcripts_every``-th update's episodes:
``runs/transcripts.py``), every evaluation's per-problem outcomes in ``outcomes/`` (``eval_before.jsonl``,
``eval_update_NNNNNN.jsonl``, ``eval_after.jsonl``: ``evaluation.problem_outcomes``), and, with ``log.wandb=true``, the
W&B run in ``trackers/`` (``runs/trackers.py``).
``resume=True`` continues from the latest checkpoint and ends with the same metrics as a run that
was never interrupted (same RNG states, same data position). Every file goes through ``run_files``
(atomic, inside the folder, no symbolic link followed); the run holds the folder's lock
(``run_lock``) from its first write to its end; SIGINT and SIGTERM stop it after the current update
with a checkpoint to resume from (``interrupts``). ``run_parts.build_run`` checks the run and builds its
parts; this module loops over them and writes the summary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marft_agents.algorithms.data_parallel import Ranks
from marft_agents.algorithms.optimizers import advance as advance_schedules
from marft_agents.algorithms.optimizers import rates as lr_rates
from marft_agents.algorithms.tis import recompute_behaviour
from marft_agents.models.protocol import Policy
from marft_agents.rollout.episode import check_on_policy, to_device
from marft_agents.rollout.evaluation import pick_transcripts, summarize, training_transcript
from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs import files as run_files
from marft_agents.runs import report, transcripts
from marft_agents.runs.metrics import Timings
from marft_agents.signal import diagnostics as reward_signal
from marft_agents.training.config import TrainConfig, to_dict
from marft_agents.training.interrupts import RunInterrupted, StopOnSignal
from marft_agents.training.launch import check as check_data_parallel
from marft_agents.training.launch import process_group, ranks_from_env, same_config
from marft_agents.training.run_parts import RunParts, build_run
from marft_agents.training.setup import build_engine, build_policy, training_sampling

__all__ = ["ZERO_REWARD_UPDATES", "RewardWatch", "RunInterrupted", "build_engine", "build_policy", "train"]

ZERO_REWARD_UPDATES = 10
"""Warn when every reward of this many first updates (or of a shorter run) was exactly 0."""


def train(
    config: TrainConfig, *, resume: bool = False, overwrite: bool = False, progress: bool = True, quiet: bool = False
) -> dict[str, Any]:
    """Run (or resume) training as configured; returns the summary written to ``summary.json``.

    Every check (config values, the run folder, env options, model, learner, checkpoint) runs before
    the first file is written: a refused run leaves ``run_dir`` as it was. ``overwrite`` replaces an
    earlier run in ``run_dir``; without it (or ``resume``) a folder holding a run is refused. SIGINT
    or SIGTERM raises :class:`RunInterrupted` naming the checkpoint to resume from.

    Under ``torchrun`` (``RANK``/``WORLD_SIZE`` set) this process is one data-parallel rank
    (``training/launch.py``): it plays its share of every batch and takes part in every update; rank 0
    alone writes the run folder, prints, evaluates and checkpoints; every rank returns rank 0's summary.
    The ranks' configs must agree (``launch.same_config``). Stopped by a signal, rank 0 names the
    checkpoint; the others wait for it to be written, then leave with ``SystemExit(128 + signal)`` and
    no word of their own about it.
    """
    ranks = ranks_from_env(device=config.device)
    check_data_parallel(config, ranks)  # before any process group: every rank refuses alike, none waits
    if ranks.parallel and ranks.device.startswith("cuda"):  # each rank on its own GPU, cuda:LOCAL_RANK
        config = dataclasses.replace(config, device=ranks.device)
    if not ranks.lead:
        progress, quiet = False, True
    with (
        StopOnSignal(announce=ranks.lead) as stop,
        contextlib.ExitStack() as held,
        process_group(ranks),
    ):  # held: the folder's lock, until the end
        try:
            same_config(config, ranks, resume=resume, overwrite=overwrite)  # before any collective they could miss
            return _train(config, stop, held, ranks, resume=resume, overwrite=overwrite, progress=progress, quiet=quiet)
        except RunInterrupted as err:
            if not ranks.lead:  # rank 0 alone speaks about the checkpoint (this rank may not even see its folder)
                raise SystemExit(err.exit_code) from None
            latest = ckpt.latest_checkpoint(Path(config.run_dir) / "checkpoints")
            where = f"resume from the checkpoint {latest}" if latest is not None else "no checkpoint was written yet"
            raise RunInterrupted(err.signum, f"{err}; {where}", checkpoint=latest) from None


def _train(
    config: TrainConfig,
    stop: StopOnSignal,
    held: contextlib.ExitStack,
    ranks: Ranks,
    *,
    resume: bool,
    overwrite: bool,
    progress: bool,
    quiet: bool,
) -> dict[str, Any]:
    run = build_run(
        config, stop, held, resume=resume, overwrite=overwrite, ranks=ranks
    )  # every check, then the run's parts
    warnings = _run_updates(config, run, stop, progress)
    if not ranks.lead:  # rank 0 evaluates and writes; the others wait for its summary
        run.engine.close()
        return ranks.broadcast(None)
    logged = [json.loads(line) for line in run.log.path.read_text().splitlines()]
    signal_summary = reward_signal.summary_of(logged)
    # updates=0: an evaluation-only run, nothing changed since eval_before
    eval_after = run.eval_before if config.updates == 0 else run.evaluation.full("eval_after")
    run.engine.close()
    summary = _summary(config, run, eval_after, warnings, signal_summary)
    summary["agents"] = report.agent_health(
        logged[-1] if logged else {}, run.policy.adapter_of
    )  # the last update's, per agent
    frozen = getattr(run.algo, "frozen", frozenset())  # agents.<agent_id>.train=false
    summary["frozen_agents"] = [agent for agent, adapter in run.policy.adapter_of.items() if adapter in frozen]
    if run.policy.is_team:  # a team of models (agents.<agent_id>.model): each agent's
        summary["agent_models"] = dict(run.policy.model_of)
    if run.tracker is not None:
        run.tracker.finish(summary)
    return ranks.broadcast(_finish(run.run_dir, quiet, summary))


def _run_updates(config: TrainConfig, run: RunParts, stop: StopOnSignal, progress: bool) -> list[str]:
    """Updates ``run.start`` to ``config.updates``: collect, learn, sync, log, warn, checkpoint; returns the warnings.

    A signal during an update lets it finish and checkpoints it, then raises :class:`RunInterrupted`.
    """
    bar = _progress(range(run.start, config.updates), progress, f"{config.algo} updates")
    limits = _token_limits(config, run.policy)  # for signal/<agent>/truncated_frac
    watch = RewardWatch(run.start, config.updates, config.model, run.signal_options, limits)
    stop.deferring = True  # a signal from here on lets the update finish and checkpoints it
    pending = None  # distributed.overlap: this update's batch, played on the workers while the last one trained
    for update in bar:
        timings = Timings()
        t0 = time.perf_counter()
        run.rollout.reset_timings()
        if pending is not None:  # played with the weights of one update before; TIS corrects for it
            episodes, sampling = pending.result(), {"time/waited_s": time.perf_counter() - t0}
            check_on_policy(episodes, update - 1)
        else:
            run.algo.before_collect(run.envs, update)
            episodes, sampling = run.batches.collect(update)  # signal.* options: marft_agents/signal/collection.py
            check_on_policy(episodes, update)
        due = (config.checkpoint_every and (update + 1) % config.checkpoint_every == 0) or update + 1 == config.updates
        # not across a checkpoint, so a run resumed from it plays on exactly as one that was never stopped
        pending = run.batches.start(update + 1) if config.distributed.overlap and not due else None
        timings.generation = run.rollout.timings["generate"]
        timings.prompts = run.rollout.timings["prompts"]
        timings.env = run.rollout.timings["env"]
        t1 = time.perf_counter()
        metrics = run.ranks.mean_metrics(_learn(config, run, episodes, update))  # data-parallel: the ranks' mean
        timings.training = time.perf_counter() - t1
        played = episodes  # with their tokens: a transcript sample decodes them (data-parallel: this rank's share)
        episodes = _whole_batch(run.ranks, episodes)  # what the batch's metrics and warnings read
        t2 = time.perf_counter()
        if pending is not None:  # the workers load them once the batch they are playing is done
            run.engine.sync(update + 1, wait=False)
        else:
            run.engine.sync(update + 1)
        timings.sync = time.perf_counter() - t2
        metrics.update(_update_metrics(episodes, timings, run.rollout.timings, time.perf_counter() - t0))
        metrics.update({**reward_signal.signal_metrics(episodes, run.algo.group_size, limits), **sampling})
        evaluate = config.eval_every and (update + 1) % config.eval_every == 0 and update + 1 < config.updates
        if evaluate and run.ranks.lead:
            metrics["eval/accuracy"] = run.evaluation.midway(update)
        warning = watch.check(update, episodes, metrics)
        requested = _stop_requested(run.ranks, stop)  # data-parallel: every rank stops after the same update
        if run.ranks.lead:
            every = config.log.transcripts_every
            if every and update % every == 0:
                _write_transcripts(run, played, update, metrics, config.log.transcripts_episodes)
            run.log.write(update, metrics)
            if warning is not None:
                _say(warning, bar)
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(solved=f"{metrics['train/solved']:.2f}", refresh=False)
            if due or requested is not None:
                _save_checkpoint(config, run, update + 1)
        if requested is not None:
            run.ranks.broadcast(None)  # no rank leaves (and no launcher tears rank 0 down) before the checkpoint is in
            if run.log is not None:
                run.log.close()
            getattr(bar, "close", lambda: None)()  # the one line that follows starts on a line of its own
            name = signal.Signals(requested).name
            raise RunInterrupted(requested, f"stopped by {name} after update {update + 1}")
    stop.deferring = False  # the evaluation after training: a signal stops at once (the last checkpoint is written)
    if run.log is not None:
        run.log.close()
    if stop.requested is not None:  # it came after the last update's own check
        raise RunInterrupted(stop.requested, f"stopped by {stop.name} after update {config.updates}")
    return watch.warnings


def _write_transcripts(run: RunParts, episodes: list, update: int, metrics: dict[str, float], n: int) -> None:
    """``n`` of ``update``'s episodes (rewarded and unrewarded half each where both exist; no random draw, so the run
    plays on as without them) to ``samples/train_update_<update>.jsonl`` and the tracker, with each agent's health in
    this update's metrics (``runs/transcripts.py``)."""
    health = report.agent_health(metrics, run.policy.adapter_of)
    decode = _decoder(run.policy)
    lines = [
        {"update": update, **training_transcript(e, decode), "agents": health} for e in pick_transcripts(episodes, n)
    ]
    report.write_samples(run.run_dir, transcripts.sample_name(transcripts.TRAIN, update), lines)
    if run.tracker is not None:  # before the update's metrics: the same step, one row
        run.tracker.transcripts(transcripts.TRAIN, update, lines)


def _decoder(policy: Policy):
    """``decode(agent, ids)``: token ids as text with the agent's own tokenizer (a team of models: its model's), the
    special tokens kept: the exact ids an update trains on."""

    def decode(agent: str, ids: list[int]) -> str:
        model = policy.member(policy.adapter_of[agent]) if policy.is_team else policy
        return model.tokenizer.decode(list(ids), skip_special_tokens=False)

    return decode


def _stop_requested(ranks: Ranks, stop: StopOnSignal) -> int | None:
    """The signal that asked this run to stop after this update, on any rank (the first in rank order), or None."""
    if not ranks.parallel:
        return stop.requested
    return next((r for r in ranks.gather(stop.requested) if r is not None), None)


def _whole_batch(ranks: Ranks, episodes: list) -> list:
    """Every rank's episodes of this update, in index order, without their token tensors (for the batch's metrics)."""
    if not ranks.parallel:
        return episodes
    light = [dataclasses.replace(e, steps=[_light(s) for s in e.steps], branches=[]) for e in episodes]
    return sorted((e for part in ranks.gather(light) for e in part), key=lambda e: e.index)


def _light(step):
    """An agent-step without what the batch's metrics do not read (prompt, log-probs, state, observation)."""
    return dataclasses.replace(
        step, prompt=[], token_logps=torch.zeros(0, device="cpu"), engine_logps=None, state=None, observation=None
    )


def _learn(config: TrainConfig, run: RunParts, episodes: list, update: int) -> dict[str, float]:
    """The learner's update on ``episodes`` and its metrics, after the TIS recompute when ``generation.tis_cap`` is
    set."""
    to_device(episodes, run.policy.device)  # a vllm engine's or a worker's are on the CPU
    tis = {}
    if config.generation.tis_cap is not None:  # pi_old^trainer for the ratio and the TIS weights
        steps = [s for e in episodes for s in (*e.steps, *e.branches)]
        tis = recompute_behaviour(
            run.policy, steps, run.algo.temperature, run.algo.score_batch_size
        )  # each agent's own T
    rates = lr_rates(run.algo.optimizers)  # <adapter>/lr: the rate this update's steps take
    metrics = {**run.algo.update(episodes, update, run.rng), **tis, **rates}
    advance_schedules(run.algo.schedulers)  # the next update steps at the next rate of lr_schedule
    return metrics


class RewardWatch:
    """The run's warnings about its reward: every reward 0 in the first updates, or (once) no learning signal left.

    Each names the agent to look at first where one stands out (``signal.diagnostics.agent_to_look_at``): from the
    means of the updates seen, or from the update without signal."""

    def __init__(
        self,
        start: int,
        updates: int,
        model: str,
        signal_options: list[str],
        limits: dict[str, reward_signal.TokenLimit] | None = None,
    ):
        self.updates, self.model, self.signal_options = updates, model, signal_options
        self.limits = dict(limits or {})
        """Each agent's token limit, named by the warnings."""
        self.rewarded = start > 0  # on resume, the earlier updates were checked when they ran
        self.warned_no_signal = start > 0
        self.unrewarded: list[dict[str, float]] = []  # the metrics of the updates so far while every reward was 0
        self.warnings: list[str] = []

    def check(self, update: int, episodes: list, metrics: dict[str, float]) -> str | None:
        """The warning ``update`` (its episodes and metrics) gives, if any; it is also kept in ``warnings``."""
        self.rewarded = self.rewarded or any(s.reward != 0 for e in episodes for s in e.steps)
        if not self.rewarded and update + 1 <= ZERO_REWARD_UPDATES:
            self.unrewarded.append(metrics)
        if not self.rewarded and update + 1 == min(ZERO_REWARD_UPDATES, self.updates):
            look_at = reward_signal.agent_to_look_at(reward_signal.means(self.unrewarded), self.limits)
            warning = report.zero_reward_warning(update + 1, self.model, self.signal_options, look_at)
        elif self.rewarded and not self.warned_no_signal and reward_signal.no_signal(metrics):  # once per run
            self.warned_no_signal = True
            look_at = reward_signal.agent_to_look_at(metrics, self.limits)
            warning = reward_signal.no_signal_warning(update, metrics, self.signal_options, look_at)
        else:
            return None
        self.warnings.append(warning)
        return warning


def _token_limits(config: TrainConfig, policy: Policy) -> dict[str, reward_signal.TokenLimit]:
    """Each agent's training token limit (its own ``agents.<agent_id>.max_new_tokens``, else the run's) and its
    model's end-of-turn token (a team of models: each agent's own)."""
    sampling, own = training_sampling(config)
    out = {}
    for agent, adapter in policy.adapter_of.items():
        model = policy.member(adapter) if policy.is_team else policy
        limit = own.get(agent, sampling).max_new_tokens
        out[agent] = reward_signal.TokenLimit(limit, getattr(model, "eos_token_id", None))
    return out


def _save_checkpoint(config: TrainConfig, run: RunParts, update: int) -> None:
    """Everything ``--resume`` needs after ``update`` updates: the learner, the RNG, the config, the sampler's state."""
    signal = run.batches.state_dict()
    ckpt.save_checkpoint(
        run.run_dir / "checkpoints",
        update,
        {
            "algo": run.algo.state_dict(),
            "rng": ckpt.rng_state(run.rng),
            "config": to_dict(config),
            "world": run.ranks.world,  # how the episodes were sampled (launch.check_world)
            **({"signal": signal} if signal else {}),
        },
        keep=config.checkpoints.keep,
    )


def _summary(
    config: TrainConfig, run: RunParts, eval_after: dict, warnings: list[str], signal_summary: dict
) -> dict[str, Any]:
    """What ``summary.json`` holds: the run, both evaluations and the change between them, warnings, signal, wall
    time."""
    eval_before = run.eval_before
    return {
        "env": config.env,
        "algo": config.algo,
        "model": config.model,
        "updates": config.updates,
        "episodes_per_update": config.episodes_per_update,
        "eval_before": eval_before,
        "eval_after": eval_after,
        "headline": dict(zip(("metric", "label"), report.headline(eval_before))),
        "improvement": eval_after["accuracy"] - eval_before["accuracy"],
        "improvement_mean_return": eval_after["mean_return"] - eval_before["mean_return"],
        "warnings": warnings,
        "signal": signal_summary,
        "wall_time_s": time.perf_counter() - run.started,
        "resumed_from_update": run.start if run.resumed else None,
    }


def _finish(run_dir: Path, quiet: bool, summary: dict[str, Any]) -> dict[str, Any]:
    """Write summary.json and the curves, print the results table (unless ``quiet``); returns the summary."""
    run_files.write_text(run_dir, "summary.json", json.dumps(summary, indent=2))
    try:
        from marft_agents.runs.plots import plot_run

        plot_run(run_dir)
    except ImportError:  # matplotlib is optional
        pass
    if not quiet:
        print(report.summary_table(summary))
    return summary


def _update_metrics(
    episodes: list, timings: Timings, rollout_timings: dict[str, float], update_s: float
) -> dict[str, float]:
    """An update's ``train/*`` (solve rate, return, tokens, per-role figures) and ``time/*`` metrics.

    Per agent (``train/<agent>/*``), where the env reports what they need: its own accuracy, the answering
    agent's accuracy when this agent was right or wrong, its copy rate (its answer one of the teammates'
    it saw), and its response length; ``train/agreement``: the share of episodes whose answers all agree.
    """
    train_stats = summarize(episodes)
    metrics = {
        "train/solved": train_stats["accuracy"],
        "train/return": train_stats["mean_return"],
        "train/response_tokens": float(np.mean([len(s.response) for e in episodes for s in e.steps])),
        "time/generation_s": timings.generation,
        "time/prompts_s": timings.prompts,
        "time/env_s": timings.env,
        "time/training_s": timings.training,
        "time/sync_s": timings.sync,
        "time/update_s": update_s,
    }
    metrics.update({f"time/{k}_s": rollout_timings[k] for k in ("collect", "gather") if k in rollout_timings})
    for agent, r in train_stats["roles"].items():
        for key in ("own_accuracy", "answer_accuracy_when_right", "answer_accuracy_when_wrong", "copy_rate"):
            if r.get(key) is not None:
                metrics[f"train/{agent}/{key}"] = r[key]
        metrics[f"train/{agent}/response_length"] = r["mean_response_tokens"]
    if "agreement" in train_stats:
        metrics["train/agreement"] = train_stats["agreement"]
    return metrics


def _say(message: str, bar) -> None:
    """Print to stderr without breaking the progress bar."""
    (bar.write if hasattr(bar, "write") else print)(message, file=sys.stderr)


def _progress(iterable, enabled: bool, desc: str):
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm

        return tqdm(iterable, desc=desc, dynamic_ncols=True)
    except ImportError:
        return iterable
