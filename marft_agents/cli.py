"""The ``marft`` command: ``envs``, ``pretrain``, ``train``, ``eval``, ``plot``, ``export``.

    marft envs                                   list registered env ids by view
    marft pretrain --out DIR [--init DIR] ...    build and pre-train the embedded tiny model
    marft train [--preset demo] [--config F] [--algo NAME] [key=value ...] [--resume]
    marft eval (--run DIR | --model M) [--env ID] [--episodes N] [generation.engine=vllm ...]
    marft plot RUN_DIR                           write RUN_DIR/curves.png
    marft show RUN_DIR [--which train --update N] print the evaluation (or training) transcripts; --list names them
    marft models list | fetch NAME               named real models (marft_agents.models.named)
    marft export --run DIR --out DIR [--agent ID ...] [--merged]   each agent as a PEFT adapter (or a whole model)

Errors a user can fix (a missing model, an unknown env id, a misspelt config key, a run folder in
use or holding a symbolic link) print one line and exit with status 2; a run that fails midway (a
non-finite loss, failing workers, a full disk) prints one line and exits with 1. SIGINT and SIGTERM
stop ``marft train`` after the current update with one line naming the checkpoint and the exact
``--resume`` command, and exit 130 and 143, as a shell reports them.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from marft_agents.distributed import WorkerError  # imports no Ray
from marft_agents.training.from_run import check_env_id as _check_env  # neither imports torch
from marft_agents.training.from_run import policy_from_run


def _import_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--import MODULE`` (repeatable): modules to import first, which register envs (or algorithms)."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=help)


def _say(line: str) -> None:
    """``line`` on stderr in one write: ``print`` writes the text and its newline apart, and torchrun's ranks that
    fail together would run their lines into one."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(_parser(), argv)
    try:
        return COMMANDS[args.command](args)
    except (FileNotFoundError, KeyError, ValueError) as err:
        _say(f"marft {args.command}: error: {_message(err)}")
        return 2
    except (ArithmeticError, WorkerError, OSError) as err:  # a non-finite loss, failing workers, a full disk:
        _say(f"marft {args.command}: error: {_message(err)}")  # the last checkpoint is intact
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C; for train, SIGINT/SIGTERM before a run started (imports, loading)
        print(f"marft {args.command}: {_message(err) if str(err) else 'interrupted'}", file=sys.stderr)
        return getattr(err, "exit_code", 130)


def _parser() -> argparse.ArgumentParser:
    """The ``marft`` command and its subcommands, in the order ``marft --help`` lists them."""
    parser = argparse.ArgumentParser(prog="marft", description="Multi-agent reinforcement fine-tuning of LLM systems.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list registered env ids (with --import: your modules' too)")
    _import_option(p, "import MODULE first (it registers envs); repeatable")
    # Its options live with the code (marft_agents.pretraining.pretrain.build_parser), parsed there, so that
    # other commands do not import torch just to parse their arguments.
    sub.add_parser(
        "pretrain",
        add_help=False,
        help="build and pre-train the embedded tiny model, or continue one (--init); see --help",
    )
    _train_options(sub.add_parser("train", help="train a LaMAS on an env"))
    _eval_options(sub.add_parser("eval", help="held-out evaluation (greedy, or eval.temperature=T)"))
    sub.add_parser("models", add_help=False, help="named real models: list, or fetch NAME; see --help")
    p = sub.add_parser("plot", help="plot a run's curves to curves.png")
    p.add_argument("run_dir")
    _show_options(
        sub.add_parser("show", help="print a run's evaluation transcripts (every agent's observation and action)")
    )
    _export_options(
        sub.add_parser("export", help="write a run's trained agents as PEFT adapters (--merged: whole models)")
    )
    return parser


def _train_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("overrides", nargs="*", help="config overrides, key=value (e.g. marft.lr=1e-4 updates=20)")
    p.add_argument("--config", help="a .toml or .json config file")
    p.add_argument("--preset", default="default", help="named starting config (default, demo)")
    p.add_argument("--algo", help="training algorithm (marft, grpo, ppo, ippo, mappo, ...): the same as algo=NAME")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue run_dir's run from its latest checkpoint; without --config, from its own config.json "
        "with the overrides on top",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the run already in run_dir (default: refuse)")
    p.add_argument(
        "--help-config",
        action="store_true",
        help="print every config key of a run (with --algo: of that algorithm) with its default and docstring",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _import_option(p, "import MODULE before the env id is resolved (it registers envs or algorithms); repeatable")


def _eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "overrides",
        nargs="*",
        help="key=value: generation.* (e.g. generation.engine=vllm), eval.* (e.g. eval.temperature=0.7: sampled), "
        "threads, max_new_tokens, stop, dtype, device (e.g. device=cpu for a GPU run; default: the run's, else the "
        "defaults), eval_split (test, or validation: a split apart from test to choose settings on)",
    )
    p.add_argument("--run", help="a run folder: evaluates its latest checkpoint with its config")
    p.add_argument(
        "--model",
        help="a base model (embedded, a named model such as smollm2-135m-instruct, a folder, or a Hub id), untuned",
    )
    p.add_argument("--env", default=None, help="env id (default: the run's, or marft/MathChain-v0)")
    p.add_argument("--episodes", type=int, default=300)
    p.add_argument("--rounds", type=int, default=1, help=">1: the multi-round feedback protocol")
    p.add_argument(
        "--transcripts", metavar="FILE", help="write whole episodes to FILE (a new .jsonl; `marft show FILE`)"
    )
    p.add_argument(
        "--outcomes",
        metavar="FILE",
        help="write one line per problem to FILE (a new .jsonl): its uid, the gold and the team's answer, right or not",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --transcripts or --outcomes FILE (default: refuse)",
    )
    p.add_argument(
        "--transcripts-n",
        type=int,
        default=6,
        metavar="N",
        help="episodes in --transcripts, rewarded and unrewarded half each where both exist (default 6)",
    )
    _import_option(p, "import MODULE before the env id is resolved (it registers envs); repeatable")


def _show_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run folder, or a transcripts .jsonl file (marft eval --transcripts)")
    p.add_argument(
        "--reward",
        default="any",
        choices=("any", "rewarded", "unrewarded"),
        help="only episodes with a non-zero return (rewarded) or with none (unrewarded)",
    )
    p.add_argument(
        "--which",
        default="eval_after",
        help="eval_before, eval_after (default), train (a sample of an update's training episodes), eval (a mid-run "
        "evaluation), or a name --list shows",
    )
    p.add_argument(
        "--update",
        type=int,
        default=None,
        metavar="N",
        help="with --which train or eval: update N's (default: the latest)",
    )
    p.add_argument("--list", action="store_true", help="list the run's transcripts by name")
    p.add_argument("-n", type=int, default=None, help="at most this many episodes")


def _export_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True, help="a run folder: exports its latest checkpoint's agents")
    p.add_argument("--out", required=True, help="the folder to write, one subfolder per agent (a new or empty one)")
    p.add_argument(
        "--agent",
        dest="agents",
        action="append",
        default=[],
        metavar="ID",
        help="export only this agent (repeatable; default: every agent of the run)",
    )
    p.add_argument(
        "--merged",
        action="store_true",
        help="a whole model per agent (its adapter merged into its base, float32, with the tokenizer) instead of a "
        "PEFT adapter folder",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out (default: refuse)")
    _import_option(p, "import MODULE before the run's env id is resolved (it registers envs); repeatable")


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The parsed ``argv``, less what another parser reads: ``pretrain``'s and ``models``' own options go to them
    whole."""
    args, rest = parser.parse_known_args(argv)
    args.argv = argv
    if args.command in ("pretrain", "models"):
        args.args = rest
    elif args.command in ("train", "eval") and rest and all("=" in r and not r.startswith("-") for r in rest):
        args.overrides += rest  # key=value overrides may come after options too
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


def _message(err: Exception) -> str:
    """One line for the user: the message itself, not ``2`` for a bare errno or a quoted KeyError."""
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.strerror}: {err.filename}"
    message = str(err.args[0] if err.args else type(err).__name__)[:MESSAGE_CHARS]
    line = message.splitlines()[0] if message.strip() else type(err).__name__
    return line if len(line) < MESSAGE_CHARS else line + "…"


MESSAGE_CHARS = 1000
"""The most an error line shows (the config quotes 80 characters of a value; this catches the rest)."""


def cmd_envs(args) -> int:
    import marft_envs
    from marft_envs.plugins import import_modules, load_entry_points

    import_modules(args.imports)
    load_entry_points()
    for kind in ("aec", "parallel", "gym"):
        print(f"{kind}: {', '.join(marft_envs.list_envs(kind))}")
    return 0


def cmd_pretrain(args) -> int:
    from marft_agents.pretraining.pretrain import main as pretrain_main

    pretrain_main(args.args)
    return 0


def _quiet_loading() -> None:
    """No "Loading weights" bar from transformers: a run has its own progress bar, an error its one line."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def cmd_train(args) -> int:
    from marft_agents.training.interrupts import StopOnSignal

    with StopOnSignal():  # a signal while loading: one line and 130/143 too (train() installs its own)
        return _cmd_train(args)


def _cmd_train(args) -> int:
    from marft_agents.training import config as cfg

    if args.help_config:
        config = cfg.load(args.config, args.overrides, preset=args.preset, algo=args.algo, imports=args.imports)
        print(f"# every key of `marft train` with algo={config.algo}: key = default, then what it is")
        for key, default, doc in cfg.describe(config.algo):
            print(f"{key} = {json.dumps(default)}")
            if doc:
                print(f"    {doc}")
        return 0
    config = _train_config(args)
    _check_env(config.env)
    _quiet_loading()
    from marft_agents.runs.files import FULL_DISK, RunWriteError
    from marft_agents.training.interrupts import RunInterrupted
    from marft_agents.training.trainer import train

    try:
        train(config, resume=args.resume, overwrite=args.overwrite, progress=not args.no_progress)
    except (RunInterrupted, RunWriteError) as err:  # a checkpoint may be there to continue from: say how
        failed = isinstance(err, RunWriteError)
        fix = ("free some space, then " if err.errno in FULL_DISK else "fix that, then ") if failed else ""
        print(
            f"marft train: {'error: ' if failed else ''}{_message(err)}; {fix}{next_step(args.argv, config.run_dir)}",
            file=sys.stderr,
        )
        return 1 if failed else err.exit_code
    return 0


def _train_config(args):
    """The run's config: with ``--resume`` and no ``--config``, the run folder's own ``config.json`` with the overrides
    on top (``config.load_run``); otherwise the preset, ``--config`` and the overrides."""
    from marft_agents.training import config as cfg

    if args.resume and args.config is None:
        run_dir = cfg.run_dir_of(args.overrides, args.preset)
        if run_dir is not None and (Path(run_dir) / "config.json").is_file():  # else check_target names what is missing
            return cfg.load_run(run_dir, args.overrides, algo=args.algo, imports=args.imports)
    return cfg.load(args.config, args.overrides, preset=args.preset, algo=args.algo, imports=args.imports)


def next_step(argv: list[str], run_dir: str) -> str:
    """The command that continues a stopped run (``--resume``), or starts it again where none can."""
    from marft_agents.runs import checkpoint as ckpt
    from marft_agents.runs import folder as run_folder

    # argv as typed, less the mode flags (argparse takes any unambiguous prefix of them)
    rest = [
        a
        for a in argv[argv.index("train") + 1 :]
        if not (len(a) > 3 and ("--resume".startswith(a) or "--overwrite".startswith(a)))
    ]
    if ckpt.latest_checkpoint(Path(run_dir) / "checkpoints") is not None:
        return f"continue with: {shlex.join(['marft', 'train', '--resume', *rest])}"
    mode = ["--overwrite"] if run_folder.holds_run(Path(run_dir)) else []
    return f"start again with: {shlex.join(['marft', 'train', *mode, *rest])}"


def cmd_eval(args) -> int:
    import torch

    from marft_agents.rollout.evaluation import evaluate
    from marft_agents.settings.agents import values
    from marft_agents.training.trainer import build_engine
    from marft_envs.plugins import import_modules

    import_modules(args.imports)
    _check_eval_args(args)
    _quiet_loading()
    policy, config = _eval_policy(args)
    if config.generation.engine == "vllm":
        from marft_agents.engines.vllm import check_available

        check_available()
    with build_engine(config, policy, None) as engine, torch.no_grad():
        result = evaluate(
            policy,
            config.env,
            config.env_kwargs,
            args.episodes,
            rounds=args.rounds,
            max_new_tokens=config.max_new_tokens,
            agent_max_new_tokens=values(config.agents, "max_new_tokens"),
            sampling=config.eval,  # greedy unless eval.temperature > 0
            stop=tuple(config.stop),
            agent_stop=values(config.agents, "stop"),
            engine=engine,
            samples=args.transcripts_n if args.transcripts else 0,
            split=config.eval_split,
            outcomes=bool(args.outcomes),
        )
    _print_eval(args, config.env, result)
    return 0


def _check_eval_args(args) -> None:
    """Refuse (ValueError, one line) a bad option or override of ``marft eval`` before anything loads or plays."""
    from marft_agents.runs.report import check_transcripts_path
    from marft_agents.training.config import MAX_EVAL_EPISODES, TrainConfig, validate, with_overrides

    if bool(args.run) == bool(args.model):
        raise ValueError("pass exactly one of --run DIR or --model M")
    other = [
        o
        for o in args.overrides
        if not o.startswith(("generation.", "eval.")) and not _agent_limit(o) and o.split("=", 1)[0] not in EVAL_KEYS
    ]
    if other:
        raise ValueError(
            f"marft eval takes generation.* and eval.* keys and {', '.join(EVAL_KEYS)} (or "
            f"agents.<agent_id>.max_new_tokens / .stop; e.g. generation.engine=vllm threads=1), got {other[0]!r}"
        )
    if args.transcripts_n < 1:
        raise ValueError(f"--transcripts-n must be at least 1, got {args.transcripts_n}")
    validate(with_overrides(TrainConfig(), args.overrides))  # a bad key or value is named before any loading
    if not 1 <= args.episodes <= MAX_EVAL_EPISODES:  # the held-out draw slows sharply past it (config.py)
        raise ValueError(f"--episodes must be from 1 to {MAX_EVAL_EPISODES}, got {args.episodes}")
    if args.rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {args.rounds}")
    if args.transcripts:  # before anything is played: a bad name is not found out after the whole evaluation
        check_transcripts_path(Path(args.transcripts), overwrite=args.overwrite)
    if args.outcomes:
        check_transcripts_path(Path(args.outcomes), overwrite=args.overwrite, flag="--outcomes")
        if args.transcripts and Path(args.outcomes).resolve() == Path(args.transcripts).resolve():
            raise ValueError(f"--outcomes and --transcripts both name {args.outcomes}: give each a file of its own")


def _eval_policy(args):
    """The policy ``marft eval`` plays and its config: a run's (its resources and engine unless told otherwise), or a
    base model's."""
    import torch

    import marft_envs
    from marft_agents.settings.agents import check_ids
    from marft_agents.training.config import TrainConfig, validate, with_overrides
    from marft_agents.training.trainer import build_policy

    if args.run:
        _check_run_imports(Path(args.run), args.env, args.imports)
        return policy_from_run(args.run, env=args.env, overrides=args.overrides, imports=args.imports)
    config = with_overrides(TrainConfig(model=args.model, env=args.env or TrainConfig.env), args.overrides)
    validate(config)
    _check_env(config.env)
    if config.threads:
        torch.set_num_threads(config.threads)
    agents = marft_envs.make(config.env, **config.env_kwargs).possible_agents
    check_ids(config.agents, agents, config.env)  # agents.<agent_id>.* of an agent the env has, before the model loads
    return build_policy(config, agents), config


def _check_run_imports(run_dir: Path, env: str | None, imports: list[str]) -> None:
    """KeyError (one line) naming the exact ``--import`` to add when a run's env id is unknown and its ``config.json``
    records ``imports`` the user did not name; nothing is imported (a run folder is data: ``from_run``)."""
    try:
        saved = json.loads((run_dir / "config.json").read_text())
        recorded, env = saved["imports"], env or saved["env"]
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return  # policy_from_run says what is wrong with the folder
    unnamed = [m for m in recorded if isinstance(m, str) and m not in imports] if isinstance(recorded, list) else []
    if not unnamed or not isinstance(env, str) or ":" in env:  # a module:Class id: policy_from_run names its module
        return
    try:
        _check_env(env)  # entry points load; no module the run names is imported
    except KeyError:
        flags = " ".join(f"--import {shlex.quote(m)}" for m in unnamed)
        raise KeyError(
            f"unknown env id {env!r}: {run_dir / 'config.json'} records imports={json.dumps(recorded)[:200]}, which "
            f"marft eval does not import from a run folder: add {flags} if you trust them"
        ) from None


def _print_eval(args, env: str, result: dict) -> None:
    """Write the transcripts and outcomes (with ``--transcripts``, ``--outcomes``), then print the headline score and
    each agent's figures."""
    from marft_agents.runs.report import headline, write_outcomes_file, write_transcripts
    from marft_envs.text import terminal_text

    if args.transcripts:
        print(
            f"transcripts: {write_transcripts(Path(args.transcripts), result.pop('samples'), overwrite=args.overwrite)}"
        )
    if args.outcomes:
        print(f"outcomes: {write_outcomes_file(Path(args.outcomes), result.pop('outcomes'), overwrite=args.overwrite)}")
    key, label = headline(result)
    if key == "accuracy":
        value = f"{result['accuracy']:.1%} ± {result['accuracy_stderr']:.1%}"
    else:
        value = f"{result['mean_return']:.2f} ± {result['mean_return_stderr']:.2f}"
    print(
        f"{env}: {label} = {value} on {result['episodes']} episodes; "
        f"mean return {result['mean_return']:.2f} ± {result['mean_return_stderr']:.2f}"
    )
    for agent, r in result["roles"].items():  # an env's own agent ids and keys: shown, never run by the terminal
        print(terminal_text(f"  {agent}: " + ", ".join(_shown(k, v) for k, v in r.items())))


EVAL_KEYS = ("threads", "max_new_tokens", "stop", "dtype", "device", "eval_split")
"""Keys besides generation.* and eval.* (its sampling) that ``marft eval`` takes: the resources and limits of the
evaluation (and an agent's own limit and stop strings). ``device``: a run trained on a GPU evaluates on a CPU with
``device=cpu`` (its checkpoints are saved on the CPU); ``eval_split=validation`` plays the validation split."""


def _agent_limit(override: str) -> bool:
    """Whether ``override`` sets one agent's token limit or stop strings (``agents.<agent_id>.max_new_tokens=N``,
    ``.stop=[...]``), which ``marft eval`` takes."""
    key = override.split("=", 1)[0]
    return key.startswith("agents.") and key.endswith((".max_new_tokens", ".stop"))


def cmd_show(args) -> int:
    from marft_agents.runs.report import list_samples, show
    from marft_envs.text import terminal_text

    if args.list:  # file names in a run folder someone sent: shown, not run, too
        print(terminal_text(list_samples(args.run_dir)))
        return 0
    print(
        terminal_text(show(args.run_dir, args.which, args.n, reward=args.reward, update=args.update))
    )  # model text: its escapes shown, not run
    return 0


def cmd_models(args) -> int:
    from marft_agents.models.named import main as models_main

    return models_main(args.args)


def cmd_plot(args) -> int:
    from marft_agents.runs.plots import plot_run

    print(plot_run(args.run_dir))
    return 0


def cmd_export(args) -> int:
    from marft_agents.training.export import export
    from marft_envs.plugins import import_modules

    import_modules(args.imports)
    _check_run_imports(Path(args.run), None, args.imports)
    _quiet_loading()
    folders = export(
        args.run, args.out, args.agents, merged=args.merged, overwrite=args.overwrite, imports=args.imports
    )
    for agent, folder in folders.items():
        print(f"{agent}: {folder}")
    return 0


def _shown(key: str, value) -> str:
    """``own_accuracy=34.7%``, ``mean_response_tokens=12.5``, ``n_right=104``."""
    if isinstance(value, float):
        return f"{key}={value:.1f}" if key.startswith("mean_response") else f"{key}={value:.1%}"
    return f"{key}={value}"


COMMANDS = {
    "envs": cmd_envs,
    "pretrain": cmd_pretrain,
    "train": cmd_train,
    "eval": cmd_eval,
    "plot": cmd_plot,
    "show": cmd_show,
    "models": cmd_models,
    "export": cmd_export,
}

if __name__ == "__main__":
    sys.exit(main())
