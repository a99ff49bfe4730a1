"""A run's parts, checked and built before its first update: :func:`build_run` returns them as :class:`RunParts`.

Two rules hold here. Every check (config values, the run folder, env options, model, learner,
checkpoint, workers) runs before the first file is written, so a refused run leaves ``run_dir`` as it
was. And the parts are built in a fixed order (seeds, the probe env, the model, the learner, the
workers, the other envs, the engine and the rollout, the first evaluation), so a run draws the same random numbers
whatever else changes, and a resumed run plays on as one that was never stopped.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import marft_envs
from marft_agents.algorithms import build_learner, lookup
from marft_agents.algorithms.base import Learner
from marft_agents.algorithms.data_parallel import SINGLE, Ranks
from marft_agents.algorithms.optimizers import attach as attach_schedules
from marft_agents.distributed.pool import WorkerPool
from marft_agents.engines.base import Engine
from marft_agents.engines.seeded import EpisodeSeededEngine
from marft_agents.models.device import resolve_device
from marft_agents.models.protocol import Policy
from marft_agents.rollout.evaluation import OUTCOMES, evaluate, held_out_kwargs
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.rollout.tree import TreeRollout
from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs import files as run_files
from marft_agents.runs import folder as run_folder
from marft_agents.runs import report, transcripts
from marft_agents.runs.lock import RunLock
from marft_agents.runs.metrics import MetricsLog
from marft_agents.runs.trackers import WandbTracker, open_tracker
from marft_agents.runs.trackers import check_available as check_trackers
from marft_agents.settings import agents as agent_section
from marft_agents.signal.collection import BatchCollector
from marft_agents.signal.collection import check as check_signal_options
from marft_agents.training.config import ConfigError, TrainConfig, shown, to_dict, validate
from marft_agents.training.env_options import check_env_kwargs
from marft_agents.training.init_from import load_init_adapters
from marft_agents.training.interrupts import StopOnSignal
from marft_agents.training.launch import agreed, check_world
from marft_agents.training.setup import (
    build_engine,
    build_policy,
    check_models,
    check_resumable,
    context_length,
    learner_temperature,
    longest_response,
    seed_everything,
    signal_options,
    start_workers,
    training_sampling,
)
from marft_envs.core import FlexEnv
from marft_envs.outcomes import reward_structure
from marft_envs.plugins import resolve as resolve_env


@dataclass
class Evaluation:
    """How this run evaluates its policy: in this process or on the workers, on the env options the learner asks for."""

    run: Callable[..., dict]
    """:func:`marft_agents.rollout.evaluation.evaluate`, or the worker pool's ``evaluate`` (same signature and
    result)."""
    policy: Policy
    args: dict[str, Any]
    """``env_id``, ``env_kwargs``, ``n``, ``max_new_tokens``, ``agent_max_new_tokens``, ``sampling``, ``stop``,
    ``agent_stop``, ``engine``: what every evaluation shares."""
    run_dir: Path
    """Where the transcripts go."""
    transcripts: int
    """Transcripts written per evaluation, full or mid-run (``eval_transcripts``)."""
    rounds: int
    """Attempts of the feedback protocol, where the env declares one (``eval_rounds``; 1 or less: none)."""
    tracker: WandbTracker | None = None
    """The run's experiment tracker (``runs/trackers.py``), told each full evaluation; None: none."""

    def midway(self, update: int) -> float:
        """The evaluation after update ``update`` (every ``eval_every``): its single-pass accuracy (``eval/accuracy``),
        its transcripts to ``samples/eval_update_<update + 1>.jsonl`` and the tracker (at ``update``'s step, the row
        its accuracy is logged in)."""
        result = self.run(self.policy, **self.args, samples=self.transcripts)
        self.write_outcomes(transcripts.sample_name(transcripts.EVAL, update + 1), result)
        samples = result.pop("samples", [])
        if samples:  # eval_transcripts=0: none asked for, no file
            report.write_samples(self.run_dir, transcripts.sample_name(transcripts.EVAL, update + 1), samples)
            if self.tracker is not None:
                self.tracker.transcripts(transcripts.EVAL, update, samples)
        return result["accuracy"]

    def write_outcomes(self, name: str, result: dict) -> None:
        """Move ``result``'s per-problem outcomes to ``outcomes/<name>.jsonl`` (the summary keeps the aggregates)."""
        lines = result.pop(OUTCOMES, None)
        if lines is not None:
            report.write_outcomes(self.run_dir, name, lines)

    def full(self, name: str) -> dict:
        """The single-pass evaluation, the attempts protocol where the env declares one, and transcripts as ``name``."""
        result = self.run(self.policy, **self.args, samples=self.transcripts)
        self.write_outcomes(name, result)
        samples = result.pop("samples", [])  # eval_transcripts=0: none asked for
        report.write_samples(self.run_dir, name, samples)
        if self.rounds > 1 and marft_envs.spec(self.args["env_id"]).attempts_option is not None:
            multi = self.run(self.policy, **self.args, rounds=self.rounds)
            self.write_outcomes(f"{name}_within_{self.rounds}_attempts", multi)
            result[f"solved_within_{self.rounds}_attempts_with_feedback"] = multi["accuracy"]
        if self.tracker is not None:
            self.tracker.evaluation(name, result, samples)
        return result


@dataclass
class RunParts:
    """What one run is made of, checked and built by :func:`build_run`; the update loop drives these.

    The *rollout* plays the episodes and the *engine* samples their tokens; the worker pool is both."""

    run_dir: Path
    policy: Policy
    algo: Learner
    """The learner (:class:`marft_agents.algorithms.base.Learner`)."""
    rng: np.random.Generator
    """The generator the learner's updates draw from (checkpointed with Python's and torch's)."""
    envs: list[FlexEnv]
    """The trainer's envs (one when rollout workers play: they have their own)."""
    engine: Engine | WorkerPool
    """What samples tokens, its weights following the learner's (``sync``, ``close``): an in-process engine, or the
    worker pool."""
    rollout: RolloutEngine | TreeRollout | WorkerPool
    """What plays the episodes and times them: the rollout engine (tree sampling wraps it), or the worker pool."""
    batches: BatchCollector
    """What draws each update's batch through ``rollout`` (the ``signal.*`` options: dynamic sampling, curriculum)."""
    evaluation: Evaluation
    signal_options: list[str]
    """The ways to get a reward signal this run does not use yet (named by the warnings)."""
    start: int
    """The first update to run: 0, or the resumed checkpoint's."""
    resumed: bool
    ranks: Ranks
    """The data-parallel ranks of the run (one process: :data:`~marft_agents.algorithms.data_parallel.SINGLE`)."""
    eval_before: dict
    log: MetricsLog | None
    """The metrics log (None on a data-parallel rank other than 0: rank 0 alone writes the run's files)."""
    started: float
    """``time.perf_counter()`` once the config and folder checks had passed (the run's wall time counts from it)."""
    tracker: WandbTracker | None = None
    """The experiment tracker (``log.wandb``; :class:`marft_agents.runs.trackers.WandbTracker`), ended with the run;
    None: none."""


def build_run(
    config: TrainConfig,
    stop: StopOnSignal,
    held: contextlib.ExitStack,
    *,
    resume: bool,
    overwrite: bool,
    ranks: Ranks = SINGLE,
) -> RunParts:
    """Check everything, then open ``run_dir`` (its lock stays in ``held``) and build the run's parts.

    On resume the learner, the batch collector (its curriculum) and the RNG states come from the latest
    checkpoint and the first evaluation from ``eval_before.json``; otherwise the first evaluation runs and is written.
    Data-parallel (``ranks``): every rank checks and builds; rank 0 alone checks and opens the folder,
    reads the checkpoint (sent to the others), evaluates and writes; a refusal on any rank is raised on all.
    """
    with agreed(ranks):  # every rank leaves with the same verdict: none waits for one that failed
        run_dir = _check_config(config, resume=resume and ranks.lead, overwrite=overwrite, folder=ranks.lead)
        if config.threads:
            torch.set_num_threads(config.threads)
        started = time.perf_counter()

        rng = seed_everything(config.seed)
        probe = _probe_env(config)
        policy = _load_policy(config, probe.possible_agents, resume=resume)
        algo = _build_learner(config, policy, probe)
        latest, state = _load_resume_state(run_dir, algo) if resume and ranks.lead else (None, {})
        check_world(state, config, ranks)  # a resume on another number of ranks would sample otherwise
        pool = start_workers(config, policy, algo, state.get("update", 0)) if config.distributed.workers else None
        stop.take_back()  # ray.init replaces the SIGTERM handler with its own exit
        tracker = None
        if ranks.lead:
            # -- every check passed: from here on the run writes into run_dir -----------------------------
            _open_run_dir(run_dir, held, config, resume=resume, overwrite=overwrite, latest=latest)
            tracker = open_tracker(
                config.log, run_dir, to_dict(config), resume=latest is not None, step=state.get("update", 0)
            )
            if tracker is not None:  # ended with the run, marked failed when it raises
                held.push(lambda kind, *_: tracker.close(failed=kind is not None))
    if ranks.parallel:
        latest, state = _same_start(ranks, algo, latest, state)
    start, resumed = state.get("update", 0), latest is not None
    envs, engine, rollout, batches = _collection_parts(
        config, policy, algo, probe, pool, run_dir, stop, ranks, state if resumed else None
    )
    options = signal_options(config, probe, algo.group_size)
    evaluation = _evaluation(config, policy, algo, engine, run_dir)
    evaluation.tracker = tracker
    if resumed:
        ckpt.set_rng_state(state["rng"], rng)  # after everything above that draws random numbers
    if not ranks.lead:  # rank 0 evaluates and writes
        eval_before = {}
    elif resumed:
        eval_before = json.loads((run_dir / "eval_before.json").read_text())
    else:
        eval_before = evaluation.full("eval_before")
        run_files.write_text(run_dir, "eval_before.json", json.dumps(eval_before, indent=2))
    if resumed and ranks.lead:  # the updates past the checkpoint are played again: their transcripts too
        transcripts.drop_after(run_dir / report.SAMPLES, start)
        transcripts.drop_after(run_dir / report.OUTCOMES, start)  # mid-run evaluations' outcomes are named alike
    log = MetricsLog(run_dir, resume_from=start if resumed else None, tracker=tracker) if ranks.lead else None
    return RunParts(
        run_dir=run_dir,
        policy=policy,
        algo=algo,
        rng=rng,
        envs=envs,
        engine=engine,
        rollout=rollout,
        batches=batches,
        evaluation=evaluation,
        signal_options=options,
        start=start,
        resumed=resumed,
        ranks=ranks,
        eval_before=eval_before,
        log=log,
        started=started,
        tracker=tracker,
    )


def _collection_parts(
    config: TrainConfig,
    policy: Policy,
    algo: Learner,
    probe: FlexEnv,
    pool: WorkerPool | None,
    run_dir: Path,
    stop: StopOnSignal,
    ranks: Ranks,
    resumed: dict | None,
) -> tuple[list[FlexEnv], Engine | WorkerPool, RolloutEngine | TreeRollout | WorkerPool, BatchCollector]:
    """The run's envs, its engine, its rollout, and the collector of its batches (``resumed``: the checkpoint's
    state)."""
    n_envs = 1 if pool else min(config.episodes_per_update // ranks.world, 128)  # workers have their own envs
    envs = [probe] + [marft_envs.make(config.env, **config.env_kwargs) for _ in range(n_envs - 1)]
    # closed at the end of the run; a run that fails midway leaves it to the engine's finalizer
    engine = _engine(config, policy, pool, run_dir, seeded=ranks.parallel)
    if resumed is not None:
        engine.sync(resumed.get("update", 0))  # the resumed adapter weights
    rollout = pool if pool else algo.collector(_rollout(config, policy, algo, engine))
    batches = BatchCollector(
        rollout,
        envs,
        engine,
        config.signal,
        seed=config.seed,
        episodes_per_update=config.episodes_per_update,
        updates=config.updates,
        group_size=algo.group_size,
        workers=config.distributed.workers,
        algo=config.algo,
        stopping=lambda: stop.requested is not None,  # a signal ends dynamic sampling's draws
        rank=ranks.rank,
        world=ranks.world,
    )
    if resumed is not None:
        batches.load_state_dict(resumed.get("signal", {}))
    return envs, engine, rollout, batches


def _check_config(config: TrainConfig, *, resume: bool, overwrite: bool, folder: bool = True) -> Path:
    """The checks that need no model: config values, vLLM's presence, the run folder (``folder``), ``--resume``, the env
    and its options."""
    validate(config)
    try:
        resolve_device(config.device)  # a device that is not there is named before any model loads
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if config.generation.engine == "vllm":
        from marft_agents.engines.vllm import check_available

        check_available()  # a missing vLLM is named before any work
    run_dir = Path(config.run_dir)
    if folder:
        run_folder.check_target(run_dir, resume=resume, overwrite=overwrite)
    if resume:
        check_resumable(run_dir, config)
    resolve_env(config.env)  # entry points, ``module:Class`` ids
    check_env_kwargs(config.env, config.env_kwargs)
    try:  # an eval_split the env has no option for, or no such split (a -v0 id), is named before any model loads
        held_out = held_out_kwargs(config.env, marft_envs.spec(config.env).eval_kwargs, config.eval_split)
        if config.eval_split != "test":
            marft_envs.make(config.env, **{**config.env_kwargs, **held_out})
    except ValueError as err:
        said = str(err) if "eval_split" in str(err) else f"eval_split={config.eval_split}: {err}"
        raise ConfigError(said) from None
    check_trackers(config.log)  # wandb installed and logged in (or WANDB_MODE=offline)
    return run_dir


def _same_start(ranks: Ranks, algo, latest: Path | None, state: dict) -> tuple[Path | None, dict]:
    """Every rank starts from rank 0's learner: its checkpoint (resume) and its weights, sent to the others."""
    latest, state = ranks.broadcast((latest, state))
    if state and not ranks.lead:
        algo.load_state_dict(state["algo"])  # rank 0 loaded this very state without error
    ranks.same_weights(algo.learned())
    algo.ranks = ranks
    return latest, state


def _probe_env(config: TrainConfig):
    """The run's first env (its agents name the adapters and the ``agents.*`` sections), checked against the learner's
    needs."""
    try:
        probe = marft_envs.make(config.env, **config.env_kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"env {config.env} refused env_kwargs {shown(config.env_kwargs)}: {err}") from None
    agent_section.check_ids(config.agents, probe.possible_agents, config.env)  # before any model loads
    check_models(config, probe.possible_agents)  # what a team of models (agents.<agent_id>.model) cannot do
    agent_section.frozen_agents(
        config.agents, probe.possible_agents, shared_adapter=config.adapter_mode == "shared"
    )  # one trains
    lookup(config.algo)[1].check_env(config.algo_args, probe, workers=config.distributed.workers)
    return probe


def _load_policy(config: TrainConfig, agents: list[str], *, resume: bool) -> Policy:
    """The model and its adapters (those of ``init_from`` on a fresh run), refused if ``max_new_tokens`` does not
    fit."""
    policy = build_policy(config, agents)
    context = context_length(policy)
    longest = longest_response(config)  # the run's max_new_tokens, or an agent's own
    if context is not None and longest >= context:
        own = agent_section.values(config.agents, "max_new_tokens")
        key = next(
            (f"agents.{a}.max_new_tokens" for a, n in own.items() if n == longest > config.max_new_tokens),
            "max_new_tokens",
        )
        raise ConfigError(
            f"{key}={longest} does not fit the model's context of {context} tokens: use at most {context // 2}"
        )
    if config.init_from is not None and not resume:  # on resume the checkpoint holds the adapters
        load_init_adapters(config, policy)
    return policy


def _build_learner(config: TrainConfig, policy: Policy, probe: FlexEnv) -> Learner:
    """The learner, refused where its groups would split across updates or the ``signal.*`` options cannot work."""
    temperature = learner_temperature(
        config, probe.possible_agents
    )  # each agent's log-probs at its own sampling temperature
    frozen = agent_section.frozen_agents(
        config.agents, probe.possible_agents, shared_adapter=config.adapter_mode == "shared"
    )
    adapters = frozenset(
        policy.adapter_of[a] for a in frozen
    )  # agents.<agent_id>.train=false: adapters no update changes
    algo = build_learner(config.algo, policy, config.algo_args, temperature, config.generation.tis_cap, frozen=adapters)
    algo.reward_structure = reward_structure(probe)  # opponents are scored by their own rewards (GRPO)
    own = {policy.adapter_of[a]: lr for a, lr in agent_section.values(config.agents, "lr").items()}  # agents.*.lr
    schedule = dict(schedule=config.lr_schedule, warmup=config.warmup_updates, updates=config.updates)
    algo.schedulers = attach_schedules(algo.optimizers, own, **schedule)  # before a checkpoint loads their state
    group = algo.group_size
    if config.episodes_per_update % group:
        raise ValueError(
            f"episodes_per_update={config.episodes_per_update} must be a multiple of {config.algo}'s "
            f"group size {group}, so no group of episodes is split across updates"
        )
    check_signal_options(config.signal, probe, group_size=group, workers=config.distributed.workers, algo=config.algo)
    return algo


def _load_resume_state(run_dir: Path, algo) -> tuple[Path, dict]:
    """``--resume``: the latest checkpoint and its state, loaded into ``algo``; refused in one line if it does not
    fit."""
    latest = ckpt.latest_checkpoint(run_dir / "checkpoints")
    if latest is None:
        raise FileNotFoundError(f"--resume: no checkpoint in {run_dir / 'checkpoints'}; start again with --overwrite")
    state = ckpt.load_checkpoint(latest)
    try:
        algo.load_state_dict(state["algo"])
    except (KeyError, RuntimeError, TypeError, ValueError, AttributeError) as err:  # a crafted file's too
        raise ValueError(
            f"{latest} does not fit this run's agents and adapters ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:120]}): resume with the run's own env and model"
        ) from None
    if (run_dir / "metrics.jsonl").exists():
        run_folder.read_metrics(run_dir / "metrics.jsonl", before=state["update"])  # a bad line is named now
    return latest, state


def _open_run_dir(
    run_dir: Path,
    held: contextlib.ExitStack,
    config: TrainConfig,
    *,
    resume: bool,
    overwrite: bool,
    latest: Path | None,
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


def _engine(
    config: TrainConfig, policy: Policy, pool: WorkerPool | None, run_dir: Path, seeded: bool = False
) -> Engine | WorkerPool:
    """The engine that samples the adapters: the worker pool, the episode-seeded engine, or ``generation.engine``.

    ``seeded``: episode-seeded whatever ``distributed.episode_seeds`` says (data-parallel ranks: an
    episode draws the same tokens on whichever rank plays it, as in one process with episode_seeds=true).
    """
    if config.generation.engine == "vllm":  # vllm writes its adapters and cache there: not through a link
        run_files.ensure_folder(run_dir, "engine")
    engine = pool if pool else build_engine(config, policy, run_dir / "engine")
    if not pool and (config.distributed.episode_seeds or seeded):  # the workers' sampling, in this process
        engine = EpisodeSeededEngine(policy)
    return engine


def _rollout(config: TrainConfig, policy: Policy, algo: Learner, engine: Engine) -> RolloutEngine:
    """The in-process rollout engine (a learner may wrap it to collect its own way: tree sampling)."""
    sampling, own = training_sampling(config)
    return RolloutEngine(
        policy,
        sampling,
        record_state=algo.needs_state,
        engine=engine,
        skip_ignored=algo.skips_ignored,
        agent_sampling=own,
    )


def _evaluation(
    config: TrainConfig, policy: Policy, algo: Learner, engine: Engine | WorkerPool, run_dir: Path
) -> Evaluation:
    """The run's evaluation; a learner may evaluate on other env options (CORY: each policy alone, without the
    reference)."""
    args = dict(
        env_id=config.env,
        env_kwargs={**config.env_kwargs, **algo.eval_env_kwargs},
        n=config.eval_episodes,
        max_new_tokens=config.max_new_tokens,
        agent_max_new_tokens=agent_section.values(config.agents, "max_new_tokens"),
        sampling=config.eval,  # greedy unless eval.temperature > 0
        stop=tuple(config.stop),
        agent_stop=agent_section.values(config.agents, "stop"),
        split=config.eval_split,
        outcomes=True,  # every evaluation's per-problem outcomes go to outcomes/ (Evaluation.write_outcomes)
        engine=engine,
    )
    run = engine.evaluate if isinstance(engine, WorkerPool) else evaluate  # the workers play the evaluation too
    return Evaluation(run, policy, args, run_dir, config.eval_transcripts, config.eval_rounds)
