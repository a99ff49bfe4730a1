"""The ``marft`` command: ``envs``, ``pretrain``, ``train``, ``eval``, ``plot``.

    marft envs                                   list registered env ids by view
    marft pretrain --out DIR [--init DIR] ...    build and pre-train the embedded tiny model
    marft train [--preset demo] [--config F] [--algo NAME] [key=value ...] [--resume]
    marft eval (--run DIR | --model M) [--env ID] [--episodes N]
    marft plot RUN_DIR                           write RUN_DIR/curves.png
    marft models list | fetch NAME               named real models (marft_agents.models.named)

Errors a user can fix (a missing model, an unknown env id, a misspelt config key) print one line
and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="marft", description="Multi-agent reinforcement fine-tuning of LLM systems.")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("envs", help="list registered env ids")

    # Its options live with the code (marft_agents.models.pretrain.build_parser), parsed there, so that
    # other commands do not import torch just to parse their arguments.
    sub.add_parser("pretrain", add_help=False,
                   help="build and pre-train the embedded tiny model, or continue one (--init); see --help")

    p = sub.add_parser("train", help="train a LaMAS on an env")
    p.add_argument("overrides", nargs="*", help="config overrides, key=value (e.g. marft.lr=1e-4 updates=20)")
    p.add_argument("--config", help="a .toml or .json config file")
    p.add_argument("--preset", default="default", help="named starting config (default, demo)")
    p.add_argument("--algo", help="training algorithm (marft, grpo, ppo, ippo, mappo, ...): the same as algo=NAME")
    p.add_argument("--resume", action="store_true", help="continue from the run folder's latest checkpoint")
    p.add_argument("--help-config", action="store_true", help="print every config key with its default and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser("eval", help="greedy held-out evaluation")
    p.add_argument("--run", help="a run folder: evaluates its latest checkpoint with its config")
    p.add_argument("--model", help="a base model (embedded, a directory, or a Hub id), untuned")
    p.add_argument("--env", default=None, help="env id (default: the run's, or marft/MathChain-v0)")
    p.add_argument("--episodes", type=int, default=300)
    p.add_argument("--rounds", type=int, default=1, help=">1: the multi-round feedback protocol")

    sub.add_parser("models", add_help=False, help="named real models: list, or fetch NAME; see --help")

    p = sub.add_parser("plot", help="plot a run's curves to curves.png")
    p.add_argument("run_dir")

    args, rest = parser.parse_known_args(argv)
    if args.command in ("pretrain", "models"):
        args.args = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return COMMANDS[args.command](args)
    except (FileNotFoundError, KeyError, ValueError) as err:
        message = err.args[0] if err.args else str(err)
        print(f"marft {args.command}: error: {message}", file=sys.stderr)
        return 2


def cmd_envs(args) -> int:
    import marft_envs

    for kind in ("aec", "parallel", "gym"):
        print(f"{kind}: {', '.join(marft_envs.list_envs(kind))}")
    return 0


def cmd_pretrain(args) -> int:
    from marft_agents.models.pretrain import main as pretrain_main

    pretrain_main(args.args)
    return 0


def cmd_train(args) -> int:
    from marft_agents import config as cfg

    if args.help_config:
        for key, value in _flat(cfg.to_dict(cfg.load(preset=args.preset))).items():
            print(f"{key} = {json.dumps(value)}")
        return 0
    overrides = [*args.overrides, f"algo={args.algo}"] if args.algo else args.overrides
    config = cfg.load(args.config, overrides, preset=args.preset)
    _check_env(config.env)
    from marft_agents.trainer import train

    train(config, resume=args.resume, progress=not args.no_progress)
    return 0


def cmd_eval(args) -> int:
    import torch

    import marft_envs
    from marft_agents.config import TrainConfig
    from marft_agents.evaluation import evaluate
    from marft_agents.trainer import build_policy

    if bool(args.run) == bool(args.model):
        raise ValueError("pass exactly one of --run DIR or --model M")
    if args.run:
        policy, config = policy_from_run(args.run, env=args.env)
    else:
        config = TrainConfig(model=args.model, env=args.env or TrainConfig.env)
        _check_env(config.env)
        policy = build_policy(config, marft_envs.make(config.env, **config.env_kwargs).possible_agents)
    with torch.no_grad():
        result = evaluate(policy, config.env, config.env_kwargs, args.episodes, rounds=args.rounds,
                          max_new_tokens=config.max_new_tokens)
    name = "accuracy (greedy, single pass)" if args.rounds == 1 else f"solved within {args.rounds} attempts with feedback"
    print(f"{config.env}: {name} = {result['accuracy']:.1%} ± {result['accuracy_stderr']:.1%} on {result['episodes']} problems")
    for agent, r in result["roles"].items():
        print(f"  {agent}: " + ", ".join(_shown(k, v) for k, v in r.items()))
    return 0


def policy_from_run(run_dir: str, env: str | None = None):
    """The policy of a run folder with its latest checkpoint's trained adapters loaded, and the run's config."""
    import marft_envs
    from marft_agents import checkpoint as ckpt
    from marft_agents.config import from_dict
    from marft_agents.trainer import build_policy

    saved = Path(run_dir) / "config.json"
    if not saved.is_file():
        raise FileNotFoundError(f"no run at {run_dir}: expected {saved}")
    config = from_dict(json.loads(saved.read_text()))
    if env:
        config.env = env
    _check_env(config.env)
    latest = ckpt.latest_checkpoint(Path(run_dir) / "checkpoints")
    if latest is None:
        raise FileNotFoundError(f"no checkpoint in {run_dir}/checkpoints")
    policy = build_policy(config, marft_envs.make(config.env, **config.env_kwargs).possible_agents)
    state = ckpt.load_checkpoint(latest)["algo"]["adapters"]
    for adapter in policy.adapters:  # evaluate the trained adapters, not the untuned base (bug 5)
        policy.load_adapter_state(adapter, state[adapter])
    return policy, config


def cmd_models(args) -> int:
    from marft_agents.models.named import main as models_main

    return models_main(args.args)


def cmd_plot(args) -> int:
    from marft_agents.plotting import plot_run

    print(plot_run(args.run_dir))
    return 0


def _shown(key: str, value) -> str:
    """``own_accuracy=34.7%``, ``mean_response_tokens=12.5``, ``n_right=104``."""
    if isinstance(value, float):
        return f"{key}={value:.1f}" if key.startswith("mean_response") else f"{key}={value:.1%}"
    return f"{key}={value}"


def _check_env(env_id: str) -> None:
    import marft_envs

    marft_envs.spec(env_id)  # raises KeyError naming the closest id


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and k != "env_kwargs":
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


COMMANDS = {"envs": cmd_envs, "pretrain": cmd_pretrain, "train": cmd_train, "eval": cmd_eval, "plot": cmd_plot, "models": cmd_models}

if __name__ == "__main__":
    sys.exit(main())
