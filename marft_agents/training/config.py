"""Training configuration: dataclasses, read from a JSON/TOML file plus ``key=value`` overrides.

    marft train --config my.toml updates=50 marft.lr=1e-4 env_kwargs.rounds=3

Nested keys use dots. A run's config holds the common fields of :class:`TrainConfig` and the section
of the chosen algorithm only (``algo=grpo`` -> ``grpo.*`` keys, validated against ``GRPOConfig``):
a key of another algorithm's section fails with one line naming the algorithm in use, and a
misspelt key fails with one line naming the closest valid key. ``marft train --help-config --algo
NAME`` prints every key of a run with that algorithm, its default and its one-line docstring.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import json
import shlex
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marft_agents import algorithms
from marft_agents.algorithms.optimizers import SCHEDULES
from marft_agents.algorithms.ppo_settings import check_kl_gate
from marft_agents.distributed.config import DistributedConfig
from marft_agents.distributed.config import check as check_distributed
from marft_agents.engines.config import EngineConfig, EvalSampling
from marft_agents.models.device import DEVICE_CHOICES, DEVICE_SPELLING
from marft_agents.models.dtype import BASE_DTYPES
from marft_agents.models.policy import ADAPTER_MODES, LORA_COMPUTE
from marft_agents.rollout.evaluation import EVAL_SPLITS
from marft_agents.runs.checkpoint import CheckpointConfig
from marft_agents.runs.trackers import LogConfig
from marft_agents.runs.trackers import check as check_log
from marft_agents.settings import agents as agent_section
from marft_agents.settings.agents import AgentSettings
from marft_agents.settings.fields import (
    AT_LEAST_ONE,
    EVAL_EPISODES,
    MAX_EVAL_EPISODES,  # noqa: F401  (cli.py's --episodes bound)
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    TEMPERATURE,
    TOP_P,
    check_stop,
    check_value,
    choice,
    ranged,
    rule_of,
    spelled,
)
from marft_agents.settings.text import ConfigError, check_depth, coerce, cut, flatten, parse_value, read_file, shown
from marft_agents.signal.config import SignalConfig
from marft_agents.signal.config import check as check_signal


@dataclass
class TrainConfig:
    """Everything a ``marft train`` run needs."""

    imports: list[str] = field(default_factory=list)
    """Modules imported before anything else is resolved: they register your envs or algorithms (``--import``)."""
    env: str = "marft/MathChain-v0"
    """Registered env id (``marft envs`` lists them), or ``package.module:ClassName`` of a FlexEnv."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the env (e.g. ``{"rounds": 3}``)."""
    model: str = "embedded"
    """Base model: "embedded" (the shipped tiny model), a named model (``marft models list``), a local folder, or a Hub id."""
    dtype: str = choice("auto", BASE_DTYPES)  # no float16: without loss scaling its small gradients underflow
    """The base model's dtype for training and rollouts: "float32", "bfloat16" or "auto" (bfloat16 on a GPU or CPU with native bf16 for a base of 50 M parameters or more, else float32; LoRA adapters stay float32)."""
    device: str = spelled("auto", DEVICE_SPELLING, DEVICE_CHOICES)
    """Where the model, adapters, critics and every tensor of training live: "auto" (the first GPU torch sees, else the CPU), "cpu", "cuda" or "cuda:N"."""
    lora_compute: str = choice("base", LORA_COMPUTE)
    """The dtype each LoRA branch computes in: "base" (the base's own, bf16 on a bf16 base: its input is used as it is and its matmuls run under autocast; the adapter's weights, gradients' sums and optimizer stay float32) or "float32" (peft's way: a float32 copy of every adapted layer's input, kept for backward). The same on a float32 base."""
    gradient_checkpointing: bool = False
    """Recompute each layer's activations in the backward pass instead of keeping them: less memory for long responses, more learner time (with mmap_threshold_kb=128 a real-model update took about 2x as long, docs/real-models.md)."""
    mmap_threshold_kb: int = ranged(0, NON_NEGATIVE)
    """Hold glibc's mmap threshold at this many KiB, so freed buffers above it go back to the system at once: with gradient_checkpointing, E2's peak 1.9 GB instead of 13 GB, at a cost in time (training/allocator.py); 0 (the default): glibc's own dynamic threshold."""
    adapter_mode: str = choice("lora", ADAPTER_MODES)
    """"lora" (one adapter per agent), "shared" (one adapter for all), or "copies" (full copies)."""
    lora_r: int = ranged(8, AT_LEAST_ONE)
    """LoRA rank (at most the model's hidden size)."""
    lora_alpha: int = ranged(16, POSITIVE)
    """LoRA alpha."""
    lora_targets: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """Module names that get LoRA adapters (every linear layer: on the embedded model, q/v alone barely moved it)."""
    algo: str = "marft"
    """Training algorithm (``marft train --help-config --algo NAME`` lists its keys)."""
    algo_args: Any = None
    """The chosen algorithm's hyper-parameters, its config dataclass; keys ``<algo>.<field>`` (e.g. ``marft.lr``)."""
    seed: int = ranged(0, SEED)
    """Seed for every random generator (problems, sampling, shuffling); 0 to 2**32 - 1."""
    updates: int = ranged(300, NON_NEGATIVE)
    """Number of updates (each collects ``episodes_per_update`` fresh episodes); 0 only evaluates."""
    lr_schedule: str = choice("constant", SCHEDULES)
    """How every adapter's learning rate changes over the run's updates after ``warmup_updates``: "constant", "linear" or "cosine" (both down towards 0 at the run's end); per update, not per optimizer step."""
    warmup_updates: int = ranged(0, NON_NEGATIVE)
    """Updates over which every adapter's learning rate rises linearly from 0 (update t < W steps at (t + 1) / W of it); 0: none."""
    episodes_per_update: int = ranged(64, AT_LEAST_ONE)
    """Episodes collected per update (all envs stepped together)."""
    temperature: float = ranged(0.7, TEMPERATURE, "training samples; greedy decoding is for evaluation")
    """Sampling temperature during training, >= 0.001 (log-probs use the same; 0.7 beat 1.0 on the embedded model)."""
    max_new_tokens: int = ranged(48, AT_LEAST_ONE)
    """Longest response per action, in tokens."""
    top_k: int = ranged(0, NON_NEGATIVE)
    """Draw each token during training among the ``top_k`` likeliest only, 0 all (log-probs use the same truncation)."""
    top_p: float = ranged(1.0, TOP_P)
    """Draw each token during training among the likeliest whose probability reaches ``top_p`` (nucleus), in (0, 1], 1.0 all."""
    stop: list[str] = field(default_factory=list)
    """Strings that end a response at the token completing one (kept in the response), in training and evaluation."""
    agents: dict[str, AgentSettings] = field(default_factory=dict)
    """Each agent's own settings, keys ``agents.<agent_id>.<key>`` (e.g. ``agents.actor_0.temperature=0.3``); a key left unset takes the run's value."""
    eval_episodes: int = ranged(300, EVAL_EPISODES, "the held-out split's draw slows sharply past it")
    """Held-out problems for the greedy evaluation before and after training (at most 10,000)."""
    eval_every: int = ranged(75, NON_NEGATIVE)
    """Also evaluate every N updates, for the curves (0: only before and after)."""
    eval_rounds: int = ranged(3, NON_NEGATIVE)
    """Attempts in the multi-round (feedback) evaluation protocol; 0 skips it."""
    eval_split: str = choice("test", EVAL_SPLITS)
    """The held-out split every evaluation plays: "test", or "validation" (an env whose held-out options set ``split``: the MATH family's -v1 ids, MathJigsaw-v2) to choose settings without reading test."""
    eval_transcripts: int = ranged(6, NON_NEGATIVE)
    """Evaluation episodes saved whole to ``samples/`` each evaluation, rewarded and unrewarded half each where both exist."""
    eval: EvalSampling = field(default_factory=EvalSampling)
    """How evaluation draws actions: greedy by default, or sampled (``eval.temperature=0.7``); each agent's token limit and stop strings hold there too."""
    checkpoint_every: int = ranged(50, NON_NEGATIVE)
    """Write a checkpoint every N updates (and at the end)."""
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Which checkpoints the run keeps (``checkpoints.keep``: the newest 2)."""
    run_dir: str = "runs/default"
    """Where metrics, checkpoints, plots and summary.json go."""
    threads: int = ranged(0, NON_NEGATIVE)
    """torch CPU threads (0: torch's default)."""
    generation: EngineConfig = field(default_factory=EngineConfig)
    """The generation engine and its settings."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """Rollout workers on Ray (``distributed.workers=0``: none, everything in this process)."""
    signal: SignalConfig = field(default_factory=SignalConfig)
    """Ways to get a learning signal when most rewards are 0 (dynamic sampling, a curriculum); all off by default."""
    log: LogConfig = field(default_factory=LogConfig)
    """Experiment trackers the run also logs to (``log.wandb=true``: Weights & Biases); metrics.jsonl and TensorBoard always."""
    init_from: str | None = None
    """An earlier run folder whose latest checkpoint's adapters this run starts from (fresh optimizers; same model and agents; None: the untuned adapters)."""

    def __post_init__(self):
        if self.algo_args is None:
            try:
                self.algo_args = algorithms.config_class(self.algo)()
            except ValueError as err:
                raise ConfigError(str(err)) from None


PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    # The demo: 2-agent MathChain on synthetic problems with the embedded model, MARFT; 100 updates
    # (the fixed MARFT's seed-0 curve at 300 updates had its gain by update 75: docs/agents.md).
    "demo": {"run_dir": "runs/demo", "updates": 100, "eval_every": 25},
}


def to_dict(config: Any) -> dict[str, Any]:
    """A plain dict (JSON-ready) of a config dataclass; a ``TrainConfig``'s section is named by its algorithm."""
    if not isinstance(config, TrainConfig):
        return dataclasses.asdict(config)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == "algo_args":
            out[config.algo] = dataclasses.asdict(value)
        elif f.name == agent_section.SECTION:
            out[f.name] = agent_section.to_plain(value)
        else:
            out[f.name] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return out


def from_dict(data: dict[str, Any], *, other_sections: str = "error") -> TrainConfig:
    """A config from a (nested, or dotted-key) dict; unknown keys raise ConfigError.

    ``other_sections="drop"`` ignores sections of algorithms other than the chosen one (run folders
    written before a config held one section carry every algorithm's defaults).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"a config must be a mapping of keys to values, got {type(data).__name__}")
    check_depth(data, "the config")
    return _build(list(flatten(data).items()), drop_other_sections=other_sections == "drop")


def load(
    path: str | Path | None = None,
    overrides: list[str] = (),
    preset: str = "default",
    algo: str | None = None,
    imports: list[str] = (),
) -> TrainConfig:
    """Defaults, then the preset, then the file, then ``key=value`` overrides, then ``algo`` (``--algo``).

    ``imports`` (``--import``) are added to the config's ``imports`` (each module once).
    """
    items = list(flatten(_preset(preset)).items())
    if path is not None:
        items += flatten(read_file(Path(path))).items()
    return _build(_with_flags([*items, *_override_items(overrides)], algo, imports))


def load_run(
    run_dir: str | Path, overrides: list[str] = (), algo: str | None = None, imports: list[str] = ()
) -> TrainConfig:
    """What ``marft train --resume`` continues: ``run_dir``'s own ``config.json``, then ``key=value`` overrides, then
    ``algo`` (``--algo``) and ``imports`` (``--import``); a key left out keeps the run's value.

    A run folder may be someone else's: the code its config names (``imports``, an env id ``module:Class``) runs only
    when the command names it too (:func:`_check_named`). The run's algorithm stays: another one is refused in one line.
    """
    path = Path(run_dir) / "config.json"
    saved = flatten(read_file(path))
    given = _override_items(overrides)
    _check_named(path, saved, given, imports)
    ran = saved.get("algo", TrainConfig.algo)
    others = [a for a in algorithms.names() if a != ran]  # older run folders hold every algorithm's section
    items = [(k, v) for k, v in saved.items() if k.split(".", 1)[0] not in others]
    items = _with_flags([*items, ("run_dir", str(run_dir)), *given], algo, imports)
    wanted = next((v for k, v in reversed(items) if k == "algo"), ran)
    if wanted != ran:
        raise ConfigError(
            f"--resume: {path} was trained with algo={cut(str(ran))}, not algo={cut(str(wanted))}: continue it with "
            f"its own algorithm, or start a new run_dir"
        )
    return _build(items)


def _check_named(path: Path, saved: dict[str, Any], given: list[tuple[str, Any]], imports: list[str]) -> None:
    """ConfigError (one line, the exact flag to add) for code a run's config names that the command does not: a module
    of its ``imports`` left out of ``--import`` (or an ``imports=`` override), or a ``module:Class`` env id whose module
    is not imported yet, unless ``env=`` is given again."""
    named = [*imports, *(m for k, v in given if k == "imports" and isinstance(v, list) for m in v)]
    recorded = saved.get("imports") if isinstance(saved.get("imports"), list) else []
    unnamed = [str(m) for m in recorded if m not in named]
    if unnamed:
        raise ConfigError(
            f"--resume: {path} records imports={cut(json.dumps(recorded))}, which marft imports from a run folder only "
            f"when you name them: add {' '.join(f'--import {shlex.quote(m)}' for m in unnamed)} if you trust them"
        )
    env = saved.get("env")
    module = env.partition(":")[0] if isinstance(env, str) and ":" in env else None
    if module and module not in sys.modules and "env" not in dict(given):
        raise ConfigError(
            f"--resume: {path} records env={cut(env)!r}, code in module {cut(module)!r}, which marft imports from a "
            f"run folder only when you name it: add {shlex.quote(f'env={env}')} if you trust it"
        )


def run_dir_of(overrides: list[str] = (), preset: str = "default") -> str | None:
    """The run folder the overrides name (``run_dir=``), else the preset's, else the default; None: not a string."""
    named = [v for k, v in _override_items(overrides) if k == "run_dir"]
    run_dir = named[-1] if named else _preset(preset).get("run_dir", TrainConfig.run_dir)
    return run_dir if isinstance(run_dir, str) else None


def _preset(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}: use one of {sorted(PRESETS)}")
    return PRESETS[name]


def _with_flags(items: list[tuple[str, Any]], algo: str | None, imports: list[str]) -> list[tuple[str, Any]]:
    """``items`` then ``--algo`` and ``--import`` (added to the last ``imports`` given, each module once)."""
    if algo is not None:
        items.append(("algo", algo))
    if imports:
        earlier = [v for k, v in items if k == "imports"]
        before = earlier[-1] if earlier else []
        items.append(("imports", [*before, *(m for m in imports if m not in before)]))
    return items


def with_overrides(config: TrainConfig, overrides: list[str]) -> TrainConfig:
    """A copy of ``config`` with ``key=value`` overrides applied, each checked as :func:`load` checks it."""
    return _build([*flatten(to_dict(config)).items(), *_override_items(overrides)])


def _override_items(overrides: list[str]) -> list[tuple[str, Any]]:
    items = []
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value (e.g. marft.lr=1e-4)")
        key, raw = item.split("=", 1)
        items.append((key.strip(), parse_value(raw, key.strip())))
    return items


def _build(items: list[tuple[str, Any]], drop_other_sections: bool = False) -> TrainConfig:
    """Import ``imports``, resolve ``algo`` (the last one given wins), then apply every other key in order."""
    from marft_envs.plugins import PluginError, import_modules

    for key, value in items:
        if key == "imports":
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ConfigError(f"imports must be a list of module names, got {shown(value)}")
            try:
                import_modules(value)  # they may register the algorithm named below
            except PluginError as err:
                raise ConfigError(str(err)) from None
    algo = TrainConfig.algo
    for key, value in items:
        if key == "algo":
            if not isinstance(value, str):
                raise ConfigError(f"algo must be a string, got {shown(value)}")
            algo = value
    config = TrainConfig(algo=algo)
    names = algorithms.names()
    for key, value in items:
        section = key.split(".", 1)[0]
        if key == "algo" or (drop_other_sections and section in names and section != algo):
            continue
        _set(config, key, value)
    return config


# -- validation: one layer for every run's config --------------------------------------------------
# Each field's range or allowed values travel with the field (``ranged(...)``, ``choice(...)``,
# ``marft_agents/settings/fields.py``), so a plugin algorithm's config is checked like the shipped ones;
# only the cross-field rules below are kept here.


def validate(config: TrainConfig) -> None:
    """Refuse values no run can use (ConfigError naming the key): bad choices, non-finite numbers, out-of-range counts."""
    for key, value, f, owner in _fields(config):  # each field alone first: a cross-field rule may read any of them
        try:
            check_value(key, value, *rule_of(owner, f.name))
        except ValueError as err:
            raise ConfigError(str(err)) from None
    try:  # stop strings: a list each, which no range rule checks
        check_stop("stop", config.stop)
        for agent, settings in config.agents.items():
            check_stop(f"{agent_section.SECTION}.{agent}.stop", settings.stop)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if config.generation.engine == "vllm" and config.adapter_mode == "copies":
        raise ConfigError(
            "generation.engine=vllm serves LoRA adapters on one base: use adapter_mode=lora or shared "
            "(or generation.engine=hf with adapter_mode=copies)"
        )
    if config.generation.merge_lora and (config.generation.engine != "hf" or config.distributed.workers > 0):
        raise ConfigError(
            "generation.merge_lora merges adapters for the in-process hf engine: use it with generation.engine=hf "
            "and distributed.workers=0, or set generation.merge_lora=false"
        )
    if (
        config.dtype == "bfloat16" and config.adapter_mode == "copies"
    ):  # bf16 copies would round Adam's small steps away
        raise ConfigError(
            f"dtype={config.dtype} is for LoRA on a frozen base: use adapter_mode=lora or shared with it, "
            "or dtype=float32 with adapter_mode=copies"
        )
    _check_optimization(config)
    try:
        check_distributed(config.distributed, config.generation.engine)
        check_signal(config.signal)
        check_log(config.log)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if config.distributed.overlap and config.generation.tis_cap is None:  # the batch is one update stale
        raise ConfigError(
            "distributed.overlap=true trains on episodes played with the weights of one update before: set "
            "generation.tis_cap (e.g. 2.0), whose importance weights correct for it, or distributed.overlap=false"
        )


def _check_optimization(config: TrainConfig) -> None:
    """The cross-field rules of the learning rates and adapters: ConfigError (one line naming the key)."""
    if 0 < config.updates < config.warmup_updates:
        raise ConfigError(
            f"warmup_updates={config.warmup_updates} is longer than the run (updates={config.updates}): its learning "
            f"rates would never reach their value; use warmup_updates <= {config.updates}"
        )
    args = config.algo_args
    try:
        check_kl_gate(getattr(args, "kl_gate", None), getattr(args, "grad_accumulation", 1), f"{config.algo}.")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    for agent, own in config.agents.items():
        key = f"{agent_section.SECTION}.{cut(agent)}"
        lora = [k for k in agent_section.LORA if getattr(own, k) is not None]
        if lora and config.adapter_mode != "lora":
            raise ConfigError(
                f"{key}.{lora[0]}: adapter_mode={config.adapter_mode} gives the agents no LoRA adapter of their own: "
                "use adapter_mode=lora"
            )
        if own.lr is not None and config.adapter_mode == "shared":
            raise ConfigError(
                f"{key}.lr: with adapter_mode=shared one adapter (one optimizer) serves every agent: use "
                f"{config.algo}.lr, or adapter_mode=lora"
            )
        if own.lr is not None and not own.train:
            raise ConfigError(f"{key}.lr: the agent is frozen ({key}.train=false) and never steps: drop one of them")
        targets = own.lora_targets
        if targets is not None and (not targets or not all(isinstance(t, str) and t for t in targets)):
            raise ConfigError(
                f'{key}.lora_targets must be a non-empty list of module names (e.g. ["q_proj", "v_proj"]), got '
                f"{shown(targets)}"
            )


def _fields(config: TrainConfig) -> list[tuple[str, Any, dataclasses.Field, type]]:
    """Every ``(key, current value, dataclass field, the dataclass holding it)`` of ``config``, dotted keys."""
    rows: list[tuple[str, Any, dataclasses.Field, type]] = []

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.name == "algo_args":
                walk(value, f"{config.algo}.")
            elif obj is config and f.name == agent_section.SECTION:
                rows.extend(agent_section.rows(value))
            elif dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{f.name}.")
            else:
                rows.append((f"{prefix}{f.name}", value, f, type(obj)))

    walk(config, "")
    return rows


def describe(algo: str = TrainConfig.algo) -> list[tuple[str, Any, str]]:
    """``(key, default, docstring)`` of every key of a run with ``algo``, common keys first."""
    return [(key, value, field_docs(owner).get(f.name, "")) for key, value, f, owner in _fields(TrainConfig(algo=algo))]


def field_docs(cls: type) -> dict[str, str]:
    """The one-line docstring written under each field of dataclass ``cls`` (and its bases)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # defined in a REPL or a string: no source to read
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, after in zip(body, body[1:]):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def _valid_keys(config: TrainConfig) -> list[str]:
    return [key for key, _, _ in describe(config.algo)]


def _set(config: TrainConfig, key: str, value: Any) -> None:
    parts = key.split(".")
    if parts[0] == agent_section.SECTION:
        agent_section.set_key(config.agents, key, value)
        return
    if parts[0] == "env_kwargs" and len(parts) > 1:
        config.env_kwargs[".".join(parts[1:])] = value
        return
    target: Any = config
    path = parts[:-1]
    if path and path[0] in (config.algo, "algo_args"):
        target, path = config.algo_args, path[1:]
    elif path and path[0] != config.algo and path[0] in algorithms.names():
        rest = cut(".".join(parts[1:]))
        raise ConfigError(
            f"{cut(key)} is a key of algo={path[0]}, but this run uses algo={config.algo}: "
            f"use {config.algo}.{rest} or set algo={path[0]} "
            f"(`marft train --help-config --algo {config.algo}` lists the keys)"
        )
    for part in path:
        sub = getattr(target, part, None)
        if not dataclasses.is_dataclass(sub):
            _unknown(config, key)
        target = sub
    names = {f.name: f for f in dataclasses.fields(target)}
    if parts[-1] not in names or parts[-1] == "algo_args" or dataclasses.is_dataclass(getattr(target, parts[-1])):
        _unknown(config, key)
    setattr(target, parts[-1], coerce(key, getattr(target, parts[-1]), value))


def _unknown(config: TrainConfig, key: str) -> None:
    probe = key[:100]  # difflib is quadratic in the length; no real key is this long
    close = difflib.get_close_matches(probe, _valid_keys(config), n=1, cutoff=0.6)
    if key.startswith("algo_args."):
        close = close or difflib.get_close_matches(config.algo + probe[len("algo_args") :], _valid_keys(config), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "; run `marft train --help-config` for the keys"
    raise ConfigError(f"unknown config key {shown(key)}{hint}")
