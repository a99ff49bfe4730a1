"""RL from a checkpoint: ``init_from=RUN_DIR`` starts a run from the adapters of an earlier one.

The earlier run is a ``marft train`` run folder (``config.json`` and ``checkpoints/``), whatever it
trained on: an RL run, a run with a format warm start (``env_kwargs.format_reward``), or a supervised
warm start saved with :func:`save_adapters_run`. Only the adapters are taken (from its latest
checkpoint): optimizers, critics, RNG states and the data position start fresh, as in a new run.
The adapters loaded are also the run's KL reference (``LaMASPolicy.freeze_reference``): a penalty
with ``kl_coef > 0`` keeps the policy near where this run started, not near the untuned base; the
run's checkpoints carry that reference, so ``--resume`` compares with the same starting adapters.

The two runs must build the same adapters on the same base: the same ``model``, ``adapter_mode``,
``lora_r``, ``lora_alpha`` and ``lora_targets``, each agent on the same model (``agents.<agent_id>.model``),
and a checkpoint with an adapter for each of this run's. Anything else is refused in one line before
the run writes a file. A folder written by ``marft pretrain`` is a whole model, not adapters: start
from it with ``model=DIR``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from marft_agents.models.policy import LaMASPolicy
from marft_agents.runs import checkpoint as ckpt
from marft_agents.runs import folder as run_folder
from marft_agents.settings import agents as agent_section
from marft_agents.training.config import ConfigError, TrainConfig, to_dict

MATCHING_KEYS = ("model", "adapter_mode", "lora_r", "lora_alpha", "lora_targets")
"""Config keys that must be equal in both runs: they decide the adapters' shapes and what they adapt."""


def load_init_adapters(config: TrainConfig, policy: LaMASPolicy) -> dict[str, Any]:
    """Load the adapters of ``config.init_from``'s latest checkpoint into ``policy``, frozen copies of them as
    its KL reference; returns what was used.

    Raises :class:`ConfigError` (one line) for a folder that is not a run, a different base or adapter
    layout, or missing adapters.
    """
    if not isinstance(config.init_from, str) or not config.init_from:
        raise ConfigError(f"init_from must be a run folder (a path), got {config.init_from!r}")
    run = Path(config.init_from).expanduser()
    if (run / "pretrain.json").is_file():
        raise ConfigError(
            f"init_from={run} is a whole model written by `marft pretrain` (an SFT of every weight), "
            f"not a run's adapters: start from it with model={run}"
        )
    saved = run_folder.read_config(
        run,
        missing=ConfigError(f"init_from={run} is not a run folder (no config.json): give a `marft train` run_dir"),
        refuse=lambda message: ConfigError(f"init_from: {message}"),
        hint=": give a `marft train` run_dir",
    )
    ours = to_dict(config)
    for key in MATCHING_KEYS:
        theirs = saved.get(key)
        if theirs != ours[key]:
            raise ConfigError(
                f"init_from={run} was trained with {key}={theirs!r}, this run has {key}={ours[key]!r}: "
                f"set {key} to the earlier run's, or drop init_from"
            )
    sections = saved.get("agents") if isinstance(saved.get("agents"), dict) else {}
    for agent in getattr(policy, "agents", []):  # each agent's own model (agents.<agent_id>.model), else the run's
        section = sections.get(agent) if isinstance(sections.get(agent), dict) else {}
        theirs = section.get("model") or saved.get("model")
        ours = getattr(config.agents.get(agent), "model", None) or config.model
        if theirs != ours:
            raise ConfigError(
                f"init_from={run} trained agent {agent} on model {theirs!r}, this run gives it {ours!r}: "
                f"set agents.{agent}.model to the earlier run's, or drop init_from"
            )
        for key in agent_section.LORA:  # its adapter's own shape (an alpha of its own scales the same weights)
            theirs = section[key] if section.get(key) is not None else saved.get(key)
            mine = getattr(config.agents.get(agent), key, None)
            mine = mine if mine is not None else getattr(config, key)
            if theirs != mine:
                raise ConfigError(
                    f"init_from={run} trained agent {agent} with {key}={theirs!r}, this run gives it {mine!r}: "
                    f"set agents.{agent}.{key} to the earlier run's, or drop init_from"
                )
    try:
        latest = ckpt.checkpoint_inside(run / "checkpoints", f"init_from={run}")
    except ckpt.CheckpointError as err:
        raise ConfigError(str(err)) from None
    if latest is None and ckpt.newest_checkpoint_hint(run / "checkpoints"):
        raise ConfigError(f"init_from={run}: {ckpt.newest_checkpoint_hint(run / 'checkpoints')}")
    if latest is None:
        raise ConfigError(
            f"init_from={run} has no checkpoint in {run / 'checkpoints'}: let that run finish (it writes one at its "
            "end)"
        )
    try:
        ckpt.load_adapters(policy, latest)
    except ckpt.CheckpointError as err:
        raise ConfigError(f"init_from={run}: {err}") from None
    except ckpt.AdaptersMismatch as err:
        if err.cause is not None:
            cause = f"{type(err.cause).__name__}: {str(err.cause).splitlines()[0][:120]}"
            raise ConfigError(f"init_from={run}: the adapters of {latest} do not fit this model ({cause})") from None
        raise ConfigError(
            f"init_from={run} has adapters {err.held}, this run's env needs {policy.adapters}: "
            "start from a run of an env with the same agents"
        ) from None
    policy.freeze_reference()  # the KL penalty keeps the policy near these adapters, not near the untuned base
    return {"run": str(run), "checkpoint": latest.name}


def save_adapters_run(run_dir: str | Path, config: TrainConfig, policy: LaMASPolicy) -> Path:
    """Write ``policy``'s adapters as a run folder ``init_from`` reads (``config.json``, one checkpoint).

    For adapters trained outside ``marft train`` (a supervised warm start such as
    ``benchmarks/real_model.py``'s control): ``config`` must describe how ``policy`` was built.
    """
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(to_dict(config), indent=2))
    state = {"algo": {"adapters": {a: policy.adapter_state(a) for a in policy.adapters}}, "config": to_dict(config)}
    return ckpt.save_checkpoint(run / "checkpoints", 0, state)
