"""A run folder's trained policy, for ``marft eval --run`` and scripts: nothing the folder names is run.

A run folder may come from someone else. Its checkpoints are read with ``torch.load(weights_only=True)``
(no code runs when they load), and its ``config.json`` is read as data: its ``imports`` are not
imported, and an env id ``module:Class`` whose module is not imported yet is refused, unless the
user names the module (``--import``). Torch is imported only when a policy is built.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def policy_from_run(run_dir: str, env: str | None = None, overrides: list[str] = (), imports: list[str] = ()):
    """The policy of a run folder with its latest checkpoint's trained adapters loaded, and the run's config.

    ``overrides`` (``marft eval``'s keys: generation.*, threads, ...) apply to the run's config before
    the model loads; the run's ``threads`` hold unless overridden. No code a run folder names is run:
    its config's ``imports`` are not imported and a ``module:Class`` env id of a module not imported
    yet is refused; ``imports`` (the user's ``--import``) are imported and become the config's.
    """
    import torch

    import marft_envs
    from marft_agents.runs import checkpoint as ckpt
    from marft_agents.runs.folder import read_config
    from marft_agents.settings.agents import check_ids
    from marft_agents.training.config import from_dict, validate, with_overrides
    from marft_agents.training.setup import build_policy
    from marft_envs.plugins import import_modules

    import_modules(list(imports))

    saved = Path(run_dir) / "config.json"
    missing = FileNotFoundError(f"no run at {run_dir}: expected {saved}")
    data = read_config(Path(run_dir), missing=missing, refuse=ValueError)
    named = data.pop("imports", None)
    hint = (
        f" ({saved} names imports={json.dumps(named)[:120]}, which marft eval does not import from a run folder: "
        "pass --import MODULE for each one you trust)"
        if named
        else ""
    )
    try:
        config = with_overrides(from_dict(data, other_sections="drop"), list(overrides))
    except ValueError as err:
        raise ValueError(f"{saved}: {_line(err)}{hint}") from None
    config.imports = list(imports)
    validate(config)
    if env:
        config.env = env
    else:
        _refuse_run_code(config.env, saved)
    try:
        check_env_id(config.env)
    except KeyError as err:
        raise KeyError(f"{_line(err)}{hint}") from None
    if config.threads:
        torch.set_num_threads(config.threads)
    latest = ckpt.checkpoint_inside(Path(run_dir) / "checkpoints", f"--run {run_dir}")
    if latest is None:
        hint = ckpt.newest_checkpoint_hint(Path(run_dir) / "checkpoints")
        raise FileNotFoundError(f"--run {run_dir}: {hint}" if hint else f"no checkpoint in {run_dir}/checkpoints")
    agents = marft_envs.make(config.env, **config.env_kwargs).possible_agents
    check_ids(config.agents, agents, config.env)  # agents.<agent_id>.* of an agent the env has, before the model loads
    policy = build_policy(config, agents)
    try:
        ckpt.load_adapters(policy, latest)  # evaluate the trained adapters, not the untuned base
    except ckpt.AdaptersMismatch as err:
        if err.cause is not None:
            raise ValueError(f"{latest}: its adapters do not fit {config.model} ({_line(err.cause)})") from None
        raise ValueError(
            f"{latest} has adapters {err.held}, but {config.env} needs {policy.adapters}: "
            "evaluate the run on its own env (drop --env) or on one with the same agents"
        ) from None
    return policy, config


def _refuse_run_code(env_id: str, saved: Path) -> None:
    """Refuse a ``module:Class`` env id from a run's config whose module is not imported yet: importing it would run its
    code."""
    module = env_id.partition(":")[0] if ":" in env_id else None
    if module and module not in sys.modules:
        raise ValueError(
            f"{saved} names env={env_id!r}, code in module {module!r}, which marft eval does not import from a run "
            f"folder: pass --import {module} if you trust it, or --env ID"
        )


def check_env_id(env_id: str) -> None:
    """Raise KeyError (naming the closest id) unless ``env_id`` is a known env, after entry points and ``module:Class``
    ids."""
    import marft_envs
    from marft_envs.plugins import resolve

    marft_envs.spec(resolve(env_id))


def _line(err: BaseException) -> str:
    """The first line of an error's message (a KeyError's without its quotes)."""
    text = str(err.args[0] if err.args else type(err).__name__)
    return text.splitlines()[0] if text.strip() else type(err).__name__
