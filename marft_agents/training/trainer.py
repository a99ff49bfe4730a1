"""The training loop behind ``marft train``: collect, update, log, checkpoint, evaluate.

A run folder holds ``config.json``, ``metrics.jsonl`` (one line per update), TensorBoard events in
``tb/``, checkpoints in ``checkpoints/``, ``eval_before.json``, ``summary.json`` and ``curves.png``.
``resume=True`` continues from the latest checkpoint and ends with the same metrics as a run that
was never interrupted (same RNG states, same data position). Every file goes through ``run_files``
(atomic, inside the folder, no symbolic link followed); the run holds the folder's lock
(``run_lock``) from its first write to its end; SIGINT and SIGTERM stop it after the current update
with a checkpoint to resume from (``interrupts``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import marft_envs
from marft_agents.algorithms import build_learner, lookup
from marft_agents.algorithms.tis import recompute_behaviour
from marft_agents.engines.seeded import EpisodeSeededEngine
from marft_agents.models.policy import LaMASPolicy, Sampling
from marft_agents.rollout.evaluation import evaluate, summarize
from marft_agents.rollout.layered import RolloutEngine, check_on_policy
from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs import files as run_files
from marft_agents.runs import folder as run_folder
from marft_agents.runs import report
from marft_agents.runs.lock import RunLock
from marft_agents.runs.metrics import MetricsLog, Timings
from marft_agents.signal import diagnostics as reward_signal
from marft_agents.signal.collection import BatchCollector
from marft_agents.signal.collection import check as check_signal_options
from marft_agents.training import setup as run_setup
from marft_agents.training.config import ConfigError, TrainConfig, shown, to_dict, validate
from marft_agents.training.env_options import check_env_kwargs
from marft_agents.training.init_from import load_init_adapters
from marft_agents.training.interrupts import RunInterrupted, StopOnSignal
from marft_agents.training.setup import build_engine, build_policy, check_resumable, seed_everything, start_workers
from marft_envs.plugins import resolve as resolve_env

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
    """
    with StopOnSignal() as stop, contextlib.ExitStack() as held:  # held: the folder's lock, until the end
        try:
            return _train(config, stop, held, resume=resume, overwrite=overwrite, progress=progress, quiet=quiet)
        except RunInterrupted as err:
            latest = ckpt.latest_checkpoint(Path(config.run_dir) / "checkpoints")
            where = f"resume from the checkpoint {latest}" if latest is not None else "no checkpoint was written yet"
            raise RunInterrupted(err.signum, f"{err}; {where}", checkpoint=latest) from None


def _train(
    config: TrainConfig, stop: StopOnSignal, held: contextlib.ExitStack, *, resume: bool, overwrite: bool, progress: bool, quiet: bool
) -> dict[str, Any]:
    validate(config)
    if config.generation.engine == "vllm":
        from marft_agents.engines.vllm import check_available

        check_available()  # a missing vLLM is named before any work
    run_dir = Path(config.run_dir)
    run_folder.check_target(run_dir, resume=resume, overwrite=overwrite)
    if resume:
        check_resumable(run_dir, config)
    resolve_env(config.env)  # entry points, ``module:Class`` ids
    check_env_kwargs(config.env, config.env_kwargs)
    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()

    rng = seed_everything(config.seed)
    try:
        probe = marft_envs.make(config.env, **config.env_kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"env {config.env} refused env_kwargs {shown(config.env_kwargs)}: {err}") from None
    lookup(config.algo)[1].check_env(config.algo_args, probe, workers=config.distributed.workers)  # e.g. tree sampling
    policy = build_policy(config, probe.possible_agents)
    context = getattr(policy.base.config, "max_position_embeddings", None)
    if context is not None and config.max_new_tokens >= context:
        raise ConfigError(
            f"max_new_tokens={config.max_new_tokens} does not fit the model's context of {context} tokens: use at most {context // 2}"
        )
    if config.init_from is not None and not resume:  # on resume the checkpoint holds the adapters
        load_init_adapters(config, policy)
    algo = build_learner(config.algo, policy, config.algo_args, config.temperature, config.generation.tis_cap)
    group = algo.group_size
    if config.episodes_per_update % group:
        raise ValueError(
            f"episodes_per_update={config.episodes_per_update} must be a multiple of {config.algo}'s "
            f"group size {group}, so no group of episodes is split across updates"
        )
    check_signal_options(config.signal, probe, group_size=group, workers=config.distributed.workers, algo=config.algo)
    latest, state = _load_resume_state(run_dir, algo) if resume else (None, {})
    start = state.get("update", 0)
    pool = start_workers(config, policy, algo, start) if config.distributed.workers else None
    stop.take_back()  # ray.init replaces the SIGTERM handler with its own exit

    # -- every check passed: from here on the run writes into run_dir ---------------------------------
    _open_run_dir(run_dir, held, config, resume=resume, overwrite=overwrite, latest=latest)
    n_envs = 1 if pool else min(config.episodes_per_update, 128)  # workers have their own envs
    envs = [probe] + [marft_envs.make(config.env, **config.env_kwargs) for _ in range(n_envs - 1)]
    # closed at the end of the run; a run that fails midway leaves it to the engine's finalizer
    if config.generation.engine == "vllm":  # vllm writes its adapters and cache there: not through a link
        run_files.ensure_folder(run_dir, "engine")
    generator = pool if pool else build_engine(config, policy, run_dir / "engine")
    if not pool and config.distributed.episode_seeds:  # the workers' sampling, in this process
        generator = EpisodeSeededEngine(policy)
    if latest is not None:
        generator.sync(start)  # the resumed adapter weights
    engine = (
        pool
        if pool
        else algo.collector(
            RolloutEngine(  # a learner may collect its own way (tree sampling)
                policy,
                Sampling(config.temperature, config.max_new_tokens),
                record_state=algo.needs_state,
                engine=generator,
                skip_ignored=algo.skips_ignored,
            )
        )
    )
    collector = BatchCollector(
        engine,
        envs,
        generator,
        config.signal,
        seed=config.seed,
        episodes_per_update=config.episodes_per_update,
        updates=config.updates,
        group_size=group,
        workers=config.distributed.workers,
        algo=config.algo,
        stopping=lambda: stop.requested is not None,  # a signal ends dynamic sampling's draws
    )
    if latest is not None:
        collector.load_state_dict(state.get("signal", {}))
    signal_options = run_setup.signal_options(config, probe, group)
    evaluate_fn = pool.evaluate if pool else evaluate
    # A learner may evaluate on other env options (CORY: each policy alone, without the reference).
    eval_kwargs = {**config.env_kwargs, **algo.eval_env_kwargs}
    eval_args = dict(
        env_id=config.env, env_kwargs=eval_kwargs, n=config.eval_episodes, max_new_tokens=config.max_new_tokens, engine=generator
    )
    if latest is not None:
        ckpt.set_rng_state(state["rng"], rng)  # after everything above that draws random numbers
        eval_before = json.loads((run_dir / "eval_before.json").read_text())
    else:
        eval_before = _evaluate_all(evaluate_fn, policy, config, eval_args, run_dir, "eval_before")
        run_files.write_text(run_dir, "eval_before.json", json.dumps(eval_before, indent=2))
    log = MetricsLog(run_dir, resume_from=start if latest is not None else None)

    bar = _progress(range(start, config.updates), progress, f"{config.algo} updates")
    warnings: list[str] = []
    rewarded = start > 0  # on resume, the earlier updates were checked when they ran
    warned_no_signal = start > 0
    stop.deferring = True  # a signal from here on lets the update finish and checkpoints it
    pending = None  # distributed.overlap: this update's batch, played on the workers while the last one trained
    for update in bar:
        timings = Timings()
        t0 = time.perf_counter()
        engine.reset_timings()
        if pending is not None:  # played with the weights of one update before; TIS corrects for it
            episodes, sampling = pending.result(), {"time/waited_s": time.perf_counter() - t0}
            check_on_policy(episodes, update - 1)
        else:
            algo.before_collect(envs, update)
            episodes, sampling = collector.collect(update)  # signal.* options: marft_agents/signal/collection.py
            check_on_policy(episodes, update)
        due = (config.checkpoint_every and (update + 1) % config.checkpoint_every == 0) or update + 1 == config.updates
        # not across a checkpoint, so a run resumed from it plays on exactly as one that was never stopped
        pending = collector.start(update + 1) if config.distributed.overlap and not due else None
        timings.generation = engine.timings["generate"]
        timings.prompts = engine.timings["prompts"]
        timings.env = engine.timings["env"]
        t1 = time.perf_counter()
        tis = {}
        if config.generation.tis_cap is not None:  # pi_old^trainer for the ratio and the TIS weights
            tis = recompute_behaviour(
                policy, [s for e in episodes for s in (*e.steps, *e.branches)], config.temperature, algo.score_batch_size
            )
        metrics = {**algo.update(episodes, update, rng), **tis}
        timings.training = time.perf_counter() - t1
        t2 = time.perf_counter()
        if pending is not None:  # the workers load them once the batch they are playing is done
            generator.sync(update + 1, wait=False)
        else:
            generator.sync(update + 1)
        timings.sync = time.perf_counter() - t2
        metrics.update(_update_metrics(episodes, timings, engine.timings, time.perf_counter() - t0))
        metrics.update({**reward_signal.signal_metrics(episodes, group), **sampling})
        if config.eval_every and (update + 1) % config.eval_every == 0 and update + 1 < config.updates:
            metrics["eval/accuracy"] = evaluate_fn(policy, **eval_args)["accuracy"]
        log.write(update, metrics)
        rewarded = rewarded or any(s.reward != 0 for e in episodes for s in e.steps)
        if not rewarded and update + 1 == min(ZERO_REWARD_UPDATES, config.updates):
            warnings.append(report.zero_reward_warning(update + 1, config.model, signal_options))
            _say(warnings[-1], bar)
        elif rewarded and not warned_no_signal and reward_signal.no_signal(metrics):  # once per run
            warned_no_signal = True
            warnings.append(reward_signal.no_signal_warning(update, metrics, signal_options))
            _say(warnings[-1], bar)
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(solved=f"{metrics['train/solved']:.2f}", refresh=False)
        if due or stop.requested is not None:
            _save_checkpoint(run_dir, update + 1, algo, rng, config, collector)
        if stop.requested is not None:
            log.close()
            getattr(bar, "close", lambda: None)()  # the one line that follows starts on a line of its own
            raise RunInterrupted(stop.requested, f"stopped by {stop.name} after update {update + 1}")
    stop.deferring = False  # the evaluation after training: a signal stops at once (the last checkpoint is written)
    log.close()
    if stop.requested is not None:  # it came after the last update's own check
        raise RunInterrupted(stop.requested, f"stopped by {stop.name} after update {config.updates}")
    signal_summary = reward_signal.summary_of([json.loads(line) for line in log.path.read_text().splitlines()])

    if config.updates == 0:  # an evaluation-only run: nothing changed since eval_before
        eval_after = eval_before
    else:
        eval_after = _evaluate_all(evaluate_fn, policy, config, eval_args, run_dir, "eval_after")
    generator.close()
    return _finish(
        run_dir,
        quiet,
        {
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
            "wall_time_s": time.perf_counter() - started,
            "resumed_from_update": start if latest is not None else None,
        },
    )


def _load_resume_state(run_dir: Path, algo) -> tuple[Path, dict]:
    """``--resume``: the latest checkpoint and its state, loaded into ``algo``; refused in one line if it does not fit."""
    latest = ckpt.latest_checkpoint(run_dir / "checkpoints")
    if latest is None:
        raise FileNotFoundError(f"--resume: no checkpoint in {run_dir / 'checkpoints'}; start again with --overwrite")
    state = ckpt.load_checkpoint(latest)
    try:
        algo.load_state_dict(state["algo"])
    except (KeyError, RuntimeError) as err:
        raise ValueError(
            f"{latest} does not fit this run's agents and adapters ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:120]}): resume with the run's own env and model"
        ) from None
    if (run_dir / "metrics.jsonl").exists():
        run_folder.read_metrics(run_dir / "metrics.jsonl", before=state["update"])  # a bad line is named now
    return latest, state


def _open_run_dir(
    run_dir: Path, held: contextlib.ExitStack, config: TrainConfig, *, resume: bool, overwrite: bool, latest: Path | None
) -> None:
    """Take the folder's lock (held until the run ends), check it again, clear it if asked, write config.json."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        held.enter_context(RunLock(run_dir))
        # again, now that no other run can write here: one may have started or ended while this one loaded
        run_folder.check_target(run_dir, resume=resume, overwrite=overwrite)
        if resume and ckpt.latest_checkpoint(run_dir / "checkpoints") != latest:
            raise ValueError(
                f"--resume: {run_dir / 'checkpoints' / ckpt.LATEST} changed while this run was loading "
                "(another run wrote into the folder): run the command again"
            )
        if overwrite:
            run_folder.clear(run_dir)
        if latest is not None:
            ckpt.remove_partial_files(latest.parent)  # what a kill during a checkpoint write left
        run_files.write_text(run_dir, "config.json", json.dumps(to_dict(config), indent=2))
    except run_files.RunWriteError:
        raise  # already one line naming the file (and a full disk)
    except OSError as err:
        raise ConfigError(f"cannot write run_dir {run_dir}: {err.strerror or err}") from None


def _save_checkpoint(run_dir: Path, update: int, algo, rng: np.random.Generator, config: TrainConfig, collector) -> None:
    """Everything ``--resume`` needs after ``update`` updates: the learner, the RNG, the config, the sampler's state."""
    signal = collector.state_dict()
    ckpt.save_checkpoint(
        run_dir / "checkpoints",
        update,
        {"algo": algo.state_dict(), "rng": ckpt.rng_state(rng), "config": to_dict(config), **({"signal": signal} if signal else {})},
    )


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


def _update_metrics(episodes: list, timings: Timings, engine_timings: dict[str, float], update_s: float) -> dict[str, float]:
    """An update's ``train/*`` (solve rate, return, tokens, per-role figures) and ``time/*`` metrics."""
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
    metrics.update({f"time/{k}_s": engine_timings[k] for k in ("collect", "gather") if k in engine_timings})
    for agent, r in train_stats["roles"].items():
        if "own_accuracy" in r:
            metrics[f"train/{agent}/own_accuracy"] = r["own_accuracy"]
        metrics[f"train/{agent}/response_length"] = r["mean_response_tokens"]
    return metrics


def _evaluate_all(evaluate, policy: LaMASPolicy, config: TrainConfig, eval_args: dict, run_dir: Path, name: str) -> dict:
    """The single-pass evaluation, the attempts protocol where the env declares one, and transcripts."""
    result = evaluate(policy, **eval_args, samples=config.eval_transcripts)
    report.write_samples(run_dir, name, result.pop("samples"))
    if config.eval_rounds > 1 and marft_envs.spec(config.env).attempts_option is not None:
        multi = evaluate(policy, **eval_args, rounds=config.eval_rounds)
        result[f"solved_within_{config.eval_rounds}_attempts_with_feedback"] = multi["accuracy"]
    return result


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
