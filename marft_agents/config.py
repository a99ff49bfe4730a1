"""Training configuration: dataclasses, read from a JSON/TOML file plus ``key=value`` overrides.

    marft train --config my.toml updates=50 marft.lr=1e-4 env_kwargs.rounds=3

Nested keys use dots. A misspelt key fails with one line naming the closest valid key.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marft_agents.algorithms.marft import MARFTConfig
from marft_agents.algorithms.marft_token import MARFTTokenConfig
from marft_agents.algorithms.cory import CORYConfig
from marft_agents.algorithms.grpo import GRPOConfig
from marft_agents.algorithms.ippo_mappo import IPPOConfig, MAPPOConfig
from marft_agents.algorithms.ppo import PPOConfig


class ConfigError(ValueError):
    """A config file or override that cannot be applied."""


@dataclass
class TrainConfig:
    """Everything a ``marft train`` run needs."""

    env: str = "marft/MathChain-v0"
    """Registered env id (``marft envs`` lists them)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the env (e.g. ``{"rounds": 3}``)."""
    model: str = "embedded"
    """Base model: "embedded" (the shipped tiny model), a local directory, or a Hub id."""
    adapter_mode: str = "lora"
    """"lora" (one adapter per agent), "shared" (one adapter for all), or "copies" (full copies)."""
    lora_r: int = 8
    """LoRA rank."""
    lora_alpha: int = 16
    """LoRA alpha."""
    lora_targets: list[str] = field(default_factory=lambda: [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    """Module names that get LoRA adapters (every linear layer: on the embedded model, q/v alone barely moved it)."""
    algo: str = "marft"
    """Training algorithm."""
    marft: MARFTConfig = field(default_factory=MARFTConfig)
    """MARFT hyper-parameters."""
    marft_token: MARFTTokenConfig = field(default_factory=MARFTTokenConfig)
    """Token-level MARFT hyper-parameters (``algo = "marft_token"``)."""
    cory: CORYConfig = field(default_factory=CORYConfig)
    """CORY hyper-parameters (``algo = "cory"``; use with ``env = "marft/MathCORY-v0"``)."""
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """Multi-agent GRPO hyper-parameters (``algo=grpo``)."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """Single-agent PPO hyper-parameters (``algo=ppo``, a one-agent env such as marft/MathSolo-v0)."""
    ippo: IPPOConfig = field(default_factory=IPPOConfig)
    """IPPO hyper-parameters (``algo=ippo``): per-agent critics on each agent's observation."""
    mappo: MAPPOConfig = field(default_factory=MAPPOConfig)
    """MAPPO hyper-parameters (``algo=mappo``): one centralised critic on the env's global state."""
    seed: int = 0
    """Seed for every random generator (problems, sampling, shuffling)."""
    updates: int = 300
    """Number of updates (each collects ``episodes_per_update`` fresh episodes)."""
    episodes_per_update: int = 64
    """Episodes collected per update (all envs stepped together)."""
    temperature: float = 0.7
    """Sampling temperature during training (log-probs use the same; 0.7 beat 1.0 on the embedded model)."""
    max_new_tokens: int = 48
    """Longest response per action, in tokens."""
    eval_episodes: int = 300
    """Held-out problems for the greedy evaluation before and after training."""
    eval_every: int = 75
    """Also evaluate every N updates, for the curves (0: only before and after)."""
    eval_rounds: int = 3
    """Attempts in the multi-round (feedback) evaluation protocol; 0 skips it."""
    checkpoint_every: int = 50
    """Write a checkpoint every N updates (and at the end)."""
    run_dir: str = "runs/default"
    """Where metrics, checkpoints, plots and summary.json go."""
    threads: int = 0
    """torch CPU threads (0: torch's default)."""


PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    # The demo: 2-agent MathChain on synthetic problems with the embedded model, MARFT, < 12 min on 2 cores.
    "demo": {"run_dir": "runs/demo"},
}


def to_dict(config: Any) -> dict[str, Any]:
    """A plain dict (JSON-ready) of a config dataclass."""
    return dataclasses.asdict(config)


def from_dict(data: dict[str, Any], base: TrainConfig | None = None) -> TrainConfig:
    """Apply a (nested) dict onto ``base`` (defaults when None); unknown keys raise ConfigError."""
    config = base or TrainConfig()
    for key, value in _flatten(data).items():
        _set(config, key, value)
    return config


def load(path: str | Path | None = None, overrides: list[str] = (), preset: str = "default") -> TrainConfig:
    """Defaults, then the preset, then the file, then ``key=value`` overrides."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}: use one of {sorted(PRESETS)}")
    config = from_dict(PRESETS[preset])
    if path is not None:
        config = from_dict(_read(Path(path)), config)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value (e.g. marft.lr=1e-4)")
        key, raw = item.split("=", 1)
        _set(config, key.strip(), _parse(raw))
    return config


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"no such config file: {path}")
    try:
        if path.suffix == ".toml":
            return tomllib.loads(path.read_text())
        if path.suffix == ".json":
            return json.loads(path.read_text())
    except (ValueError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot parse {path}: {str(err).splitlines()[0]}") from None
    raise ConfigError(f"config file {path} must be .toml or .json")


def _parse(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # a bare string such as env=marft/MathChain-v0


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        # env_kwargs is a value (a dict of env options), not a section of the config
        if isinstance(v, dict) and not key.startswith("env_kwargs"):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _valid_keys(obj: Any, prefix: str = "") -> list[str]:
    keys = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            keys += _valid_keys(value, f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def _set(config: TrainConfig, key: str, value: Any) -> None:
    parts = key.split(".")
    if parts[0] == "env_kwargs" and len(parts) > 1:
        config.env_kwargs[".".join(parts[1:])] = value
        return
    target = config
    for part in parts[:-1]:
        sub = getattr(target, part, None)
        if not dataclasses.is_dataclass(sub):
            _unknown(config, key)
        target = sub
    names = {f.name: f for f in dataclasses.fields(target)}
    if parts[-1] not in names or dataclasses.is_dataclass(getattr(target, parts[-1])):
        _unknown(config, key)
    setattr(target, parts[-1], _coerce(key, getattr(target, parts[-1]), value))


def _coerce(key: str, current: Any, value: Any) -> Any:
    if current is None or value is None:
        return value
    if isinstance(current, bool):
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    if isinstance(current, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(current, int) and isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(current, (list, dict, str)) and isinstance(value, type(current)):
        return value
    raise ConfigError(f"{key} must be a {type(current).__name__}, got {value!r}")


def _unknown(config: TrainConfig, key: str) -> None:
    close = difflib.get_close_matches(key, _valid_keys(config), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else "; run `marft train --help-config` for the keys"
    raise ConfigError(f"unknown config key {key!r}{hint}")
