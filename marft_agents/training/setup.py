"""From a run's config to its parts: the seeds, the policy, the generation engine, the Ray workers.

These read the config and hand each component only the values it uses. Also the checks that refuse
a run before it writes anything: ``--resume`` with a config that changes what the earlier updates
did. ``run_parts.build_run`` calls these in order.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marft_agents.distributed.worker import WorkerSpec
from marft_agents.engines import Engine, make_engine
from marft_agents.models import dtype as base_dtype
from marft_agents.models.device import bf16_native, resolve_device
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.recompute import checkpoint_activations
from marft_agents.models.sampling import Sampling, Temperature, agent_sampling
from marft_agents.models.team import TeamPolicy
from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs import folder as run_folder
from marft_agents.settings import agents as agent_section
from marft_agents.signal import diagnostics as reward_signal
from marft_agents.signal.collection import declared_levels
from marft_agents.training import allocator
from marft_agents.training.config import ConfigError, TrainConfig, from_dict, to_dict


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, torch and a NumPy generator (returned) from one number."""
    random.seed(seed)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def build_policy(config: TrainConfig, agents: list[str]) -> LaMASPolicy | TeamPolicy:
    """The base model and one adapter per agent, as the config says, on the config's ``device``.

    The adapters are made on the CPU and then moved with the base, so a run starts from the same
    weights on every device (a GPU would draw them from its own random generator). Agents with a model
    of their own (``agents.<agent_id>.model``) make a :class:`TeamPolicy`: one base per model, in the
    order the agents first name them, each with its agents' adapters.
    """
    try:
        device = resolve_device(config.device)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    models = agent_section.per_agent(config.agents, "model", config.model, agents)
    if len(set(models.values())) == 1:  # one model for every agent (the run's, or one they all name): no team
        return _model_policy(config, models[agents[0]], agents, device)
    check_models(config, agents)
    members = {
        m: _model_policy(config, m, [a for a in agents if models[a] == m], device)
        for m in dict.fromkeys(models.values())
    }
    return TeamPolicy(members, agents)


def _model_policy(config: TrainConfig, model_name: str, agents: list[str], device: torch.device) -> LaMASPolicy:
    """``model_name``'s base with one adapter per agent of ``agents``, on ``device``."""
    model, tokenizer, dtype, parameters = _base(config, model_name, device)
    if config.generation.merge_lora and dtype != "float32" and config.generation.tis_cap is None:
        # a LoRA delta merged into bf16 weights is rounded away (about 40 % of an update, measured): the rollouts
        # would come from a policy part of the way back to the base, which only importance weights correct
        raise ConfigError(
            f"generation.merge_lora=true on a {dtype} base rounds the merged adapter weights: set generation.tis_cap "
            "(e.g. 2.0: the learner weights each term by the gap) or dtype=float32"
        )
    policy = LaMASPolicy(
        model,
        tokenizer,
        agents,
        mode=config.adapter_mode,
        lora_r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_targets=tuple(config.lora_targets),
        agent_lora={a: own for a, own in agent_section.lora_values(config.agents).items() if a in agents},
        lora_compute=config.lora_compute,
        lean_decode=config.generation.lean_decode,
    ).to(device)
    if config.gradient_checkpointing:
        checkpoint_activations([policy.base, *policy.models.values()])
    if config.mmap_threshold_kb:  # memory for time: every freed buffer above it is unmapped, the next faulted in
        allocator.hold_mmap_threshold(config.mmap_threshold_kb * 1024)
    return policy


def _base(config: TrainConfig, model_name: str, device: torch.device) -> tuple[torch.nn.Module, Any, str, int]:
    """``(model, tokenizer, dtype, parameters)``: the base in the dtype ``config.dtype`` resolves to, and its size."""
    # copies train every weight: bf16 would round Adam's small steps away, so auto means float32 there
    dtype = "float32" if config.dtype == "auto" and config.adapter_mode == "copies" else config.dtype
    gpu_bf16 = bf16_native(device) if device.type == "cuda" else None
    model, tokenizer = load_base(model_name, dtype=torch.float32 if dtype == "auto" else getattr(torch, dtype))
    parameters = sum(p.numel() for p in model.parameters())
    if dtype != "auto":
        return model, tokenizer, base_dtype.resolve_dtype(dtype, gpu_bf16=gpu_bf16), parameters
    # the base's size decides too (models/dtype.py): loaded in float32, counted, converted where bf16 pays
    dtype = base_dtype.resolve_dtype("auto", gpu_bf16=gpu_bf16, parameters=parameters)
    if parameters >= base_dtype.AUTO_BF16_MIN_PARAMETERS:  # a small base is float32 everywhere: nothing to say
        print(f"marft: {model_name}: {base_dtype.auto_choice(dtype, parameters, gpu_bf16)}", file=sys.stderr)
    return model.to(getattr(torch, dtype)), tokenizer, dtype, parameters


def context_length(policy: LaMASPolicy | TeamPolicy) -> int | None:
    """The longest sequence every agent's model takes (its ``max_position_embeddings``); None: not stated."""
    members = policy.members.values() if isinstance(policy, TeamPolicy) else [policy]
    sizes = [getattr(p.base.config, "max_position_embeddings", None) for p in members]
    return min((n for n in sizes if n is not None), default=None)


TEAM_REFUSALS = {
    "cory": "CORY swaps the pioneer and observer roles between its two agents, which needs one model for both"
}
"""The shipped learners that cannot train a team of models, and why (the others: a value head per model or per agent,
or no critic)."""


def check_models(config: TrainConfig, agents: Sequence[str]) -> None:
    """ConfigError (one line) for what a team of models (``agents.<agent_id>.model``) cannot do; nothing when every
    agent of ``agents`` acts with one model (the run's, or one every agent names)."""
    models = agent_section.per_agent(config.agents, "model", config.model, agents)
    if len(set(models.values())) < 2:
        return
    first = next(a for a in agents if models[a] != config.model)
    key = f"{agent_section.SECTION}.{first}.model={models[first]}"
    refused = [
        (config.algo in TEAM_REFUSALS, f"algo={config.algo}: {TEAM_REFUSALS.get(config.algo)}"),
        (
            config.adapter_mode != "lora",
            f"adapter_mode={config.adapter_mode}: a team of models takes adapter_mode=lora",
        ),
        (
            config.generation.engine != "hf",
            f"generation.engine={config.generation.engine} serves one base: use generation.engine=hf",
        ),
        (
            bool(config.distributed.workers),
            "distributed.workers: rollout workers load one model: use distributed.workers=0",
        ),
        (bool(config.distributed.episode_seeds), "distributed.episode_seeds samples one model: leave it off"),
    ]
    for refuse, why in refused:
        if refuse:
            raise ConfigError(f"{key} makes a team of models, which {why}")


def training_sampling(config: TrainConfig) -> tuple[Sampling, dict[str, Sampling]]:
    """The run's training sampling, and each agent's own where ``agents.<agent_id>.*`` sets one."""
    sampling = Sampling(config.temperature, config.max_new_tokens, config.top_k, config.top_p, tuple(config.stop))
    return sampling, agent_sampling(sampling, **agent_section.sampling_values(config.agents))


def learner_temperature(config: TrainConfig, agents: list[str]) -> Temperature:
    """The distribution the learner scores under: the run's temperature, or every agent's own (agent id -> T) when one
    has its own, or every agent's whole :class:`Sampling` when the run or an agent truncates (``top_k``/``top_p``), so
    that scoring truncates as sampling did."""
    sampling, own = training_sampling(config)
    if any(s.truncated for s in [sampling, *own.values()]):
        return {agent: own.get(agent, sampling) for agent in agents}
    if not agent_section.values(config.agents, "temperature"):
        return config.temperature
    return agent_section.per_agent(config.agents, "temperature", config.temperature, agents)


def longest_response(config: TrainConfig) -> int:
    """The most tokens any agent may generate in one action: the run's ``max_new_tokens`` or an agent's own."""
    return max([config.max_new_tokens, *agent_section.values(config.agents, "max_new_tokens").values()])


def build_engine(config: TrainConfig, policy: LaMASPolicy, work_dir: Path | None) -> Engine:
    """The generation engine ``config.generation`` asks for, sampling ``policy``'s adapters.

    ``work_dir`` holds what the engine writes (vllm: adapters, its cache); None: a temporary folder.
    """
    g = config.generation
    return make_engine(
        g.engine,
        policy,
        model=config.model,
        work_dir=work_dir,
        dtype=g.dtype,
        kv_cache_gb=g.kv_cache_gb,
        threads=g.threads,
        max_loras=g.max_loras,
        seed=config.seed,
        max_new_tokens=longest_response(config),
        merge_lora=g.merge_lora,
    )


def signal_options(config: TrainConfig, env, group: int) -> list[str]:
    """The ways to get a reward signal that the warnings name: those this run does not use yet."""
    return reward_signal.options_to_try(
        model=config.model,
        env_kwargs=config.env_kwargs,
        dynamic_sampling=config.signal.dynamic_sampling,
        curriculum=config.signal.curriculum,
        init_from=config.init_from,
        grouped=group >= 2,
        has_difficulties=bool(declared_levels(env, strict=False)),
        has_format_reward=hasattr(env, "format_reward"),
    )


def check_resumable(run_dir: Path, config: TrainConfig) -> None:
    """Refuse ``--resume`` with a config that changes what the earlier updates did, or a checkpoint it cannot continue.

    The latest checkpoint's update number must lie within ``updates`` with every earlier update in
    ``metrics.jsonl``, and its RNG states must restore (``checkpoint.check_resume_state``).
    """
    try:
        saved = to_dict(from_dict(json.loads((run_dir / "config.json").read_text()), other_sections="drop"))
    except ValueError as err:
        raise ConfigError(f"--resume: cannot read {run_dir / 'config.json'}: {err}") from None
    changed = run_folder.changed_keys(saved, to_dict(config))
    if changed:
        raise ConfigError(
            "--resume: the config differs from the run's in "
            f"{run_folder.describe_changes(saved, to_dict(config), changed)}; only "
            f"{', '.join(run_folder.SAFE_ON_RESUME)} may change on resume"
        )
    if saved["updates"] != config.updates and config.lr_schedule != "constant":  # its decay spans the run's updates
        raise ConfigError(
            f"--resume: lr_schedule={config.lr_schedule} decays the learning rates over the run's updates="
            f"{saved['updates']}: resume with updates={saved['updates']} (a run of more updates is a new run)"
        )
    latest = ckpt.latest_checkpoint(run_dir / "checkpoints")
    if latest is None:
        raise FileNotFoundError(f"--resume: no checkpoint in {run_dir / 'checkpoints'}; start again with --overwrite")
    start = ckpt.check_resume_state(ckpt.load_checkpoint(latest, mmap=True), latest, updates=config.updates)
    metrics = run_dir / "metrics.jsonl"
    if metrics.exists():  # every update the checkpoint counts ran and was logged: a run reports no update it never ran
        logged = {json.loads(line)["update"] for line in run_folder.read_metrics(metrics, before=start)}
        missing = [u for u in range(start) if u not in logged]
        if missing:
            raise ckpt.CheckpointError(
                f"{latest} counts {start} updates, but {metrics} logs no update {missing[0]} ({len(missing)} missing): "
                f"point {latest.parent / ckpt.LATEST} at an earlier checkpoint, or start again with --overwrite"
            )


def start_workers(config: TrainConfig, policy: LaMASPolicy, algo, version: int):
    """The Ray rollout workers of ``distributed.*``, serving ``policy``'s current weights as ``version``."""
    from marft_agents.algorithms.base import Learner
    from marft_agents.distributed.pool import WorkerPool, close_open_pools

    if type(algo).before_collect is not Learner.before_collect:
        raise ConfigError(
            f"algo={config.algo} changes the envs before each collection, which rollout workers do not do yet: use "
            "distributed.workers=0"
        )
    close_open_pools()  # one run at a time: the workers of a run that failed midway in this process end now
    return WorkerPool(
        worker_spec(config, record_state=algo.needs_state, skip_ignored=algo.skips_ignored),
        config.distributed,
        policy,
        version,
    )


def worker_spec(config: TrainConfig, record_state: bool, skip_ignored: bool = True) -> WorkerSpec:
    """What each rollout worker builds and plays with: the run's model, adapters, env and sampling."""
    return WorkerSpec(
        env=config.env,
        env_kwargs=dict(config.env_kwargs),
        model=config.model,
        adapter_mode=config.adapter_mode,
        lora_r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_targets=tuple(config.lora_targets),
        temperature=config.temperature,
        max_new_tokens=config.max_new_tokens,
        top_k=config.top_k,
        top_p=config.top_p,
        stop=tuple(config.stop),
        agents=copy.deepcopy(config.agents),
        seed=config.seed,
        threads=max(1, int(config.distributed.cpus_per_worker)),
        record_state=record_state,
        skip_ignored=skip_ignored,
        imports=tuple(config.imports),
        engine=dataclasses.asdict(config.generation),
    )
