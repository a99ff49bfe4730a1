"""Tree sampling vs the episode groupings of GRPO, at equal generated tokens, on a real model.

    .venv/bin/python benchmarks/tree_sampling.py [--seeds 0,1,2] [--updates 40] [--out DIR]
    .venv/bin/python benchmarks/tree_sampling.py --smoke      # the embedded model, tiny sizes (a minute)

Trains ``algo=grpo`` on the 2-agent ``marft/MathChain-v0`` (SmolLM2-135M-Instruct, ``model=
smollm2-135m-instruct``, the general-model role prompts, ``problems="synthetic:0"``: the setting
``benchmarks/real_model.py`` chose) with three groupings — ``tree``, ``problem`` and ``agent_round``
— for each seed, and compares them **at equal generated tokens**: every response token the rollout
sampled, the tree's continuation tokens included (``tree/generated_tokens``; for the episode
groupings ``train/response_tokens`` times the agent-steps of an update, which is exactly 2 per
episode on this one-round chain). A tree costs more tokens per problem (``K`` candidates at each of
the two nodes plus ``K*M`` continuations, against ``2K`` for ``K`` episodes), so the tree runs get
proportionally fewer updates (``tree_updates``, from the cost measured on the first update of the
first seed) and every curve is drawn against its measured tokens.

Writes to ``--out`` (default ``benchmarks/results/tree_sampling``): ``results.json`` (per run: the
tokens and held-out greedy accuracy at each evaluation, the share of zero-spread groups per
update), ``table.md`` (per grouping over seeds: held-out accuracy read at the token budget every run
reached, interpolated between evaluations, mean and standard error; the mean share of zero-spread
groups) and ``accuracy_vs_tokens.png`` when matplotlib is installed. The share of zero-spread groups
is ``grpo/zero_spread_groups`` for trees and ``grpo/zero_advantage_frac`` for the episode groupings
(the same number there: with 0/1 rewards a group with any spread has no member at its mean).

The real run needs the machine to itself (hours on CPU; minutes on one GPU): fetch the model once
(``marft models fetch smollm2-135m-instruct``) and run it alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

OUT = Path(__file__).parent / "results" / "tree_sampling"
GROUPINGS = ("tree", "problem", "agent_round")
REAL = {
    "model": "smollm2-135m-instruct",
    "env_kwargs": {"profile": "general-v0", "problems": "synthetic:0"},
    "episodes_per_update": 32,
    "max_new_tokens": 48,
    "eval_episodes": 112,
    "eval_every": 5,
    "grpo.group_size": 4,
    "grpo.tree_continuations": 2,
    "grpo.minibatch_size": 16,
}
"""The real benchmark's settings (the untuned model solves about 21 % of synthetic:0 held out)."""
SMOKE = {
    "model": "embedded",
    "env_kwargs": {},
    "episodes_per_update": 6,
    "max_new_tokens": 12,
    "eval_episodes": 4,
    "eval_every": 1,
    "grpo.group_size": 3,
    "grpo.tree_continuations": 1,
    "grpo.minibatch_size": 8,
}
"""Tiny sizes on the embedded model: checks the script end to end, measures nothing."""


def overrides(settings: dict, grouping: str, seed: int, updates: int, run_dir: Path) -> dict:
    """The ``TrainConfig`` keys of one run."""
    return {
        **settings,
        "algo": "grpo",
        "env": "marft/MathChain-v0",
        "grpo.grouping": grouping,
        "seed": seed,
        "updates": updates,
        "eval_rounds": 0,
        "checkpoint_every": 0,
        "threads": 1,
        "run_dir": str(run_dir),
    }


def tokens_of(row: dict, episodes: int) -> float:
    """Tokens one update generated (see the module docstring)."""
    if "tree/generated_tokens" in row:
        return row["tree/generated_tokens"]
    return row["train/response_tokens"] * 2 * episodes  # two agent-steps per episode on the one-round chain


def zero_spread(row: dict) -> float:
    return row.get("grpo/zero_spread_groups", row.get("grpo/zero_advantage_frac", math.nan))


def run(settings: dict, grouping: str, seed: int, updates: int, run_dir: Path) -> dict:
    """Train one run; its accuracy-vs-tokens curve and zero-spread shares."""
    from marft_agents.config import from_dict
    from marft_agents.trainer import train

    summary = train(from_dict(overrides(settings, grouping, seed, updates, run_dir)), progress=False, quiet=True)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    tokens, curve = 0.0, [(0.0, summary["eval_before"]["accuracy"])]
    for r in rows:
        tokens += tokens_of(r, settings["episodes_per_update"])
        if "eval/accuracy" in r:
            curve.append((tokens, r["eval/accuracy"]))
    curve.append((tokens, summary["eval_after"]["accuracy"]))
    return {
        "grouping": grouping,
        "seed": seed,
        "updates": updates,
        "tokens": tokens,
        "curve": curve,
        "zero_spread": [zero_spread(r) for r in rows],
        "tokens_per_update": tokens / max(len(rows), 1),
    }


def accuracy_at(curve: list, tokens: float) -> float:
    """The curve's accuracy at ``tokens``, linear between evaluations."""
    for (t0, a0), (t1, a1) in itertools.pairwise(curve):
        if t0 <= tokens <= t1:
            return a0 if t1 == t0 else a0 + (a1 - a0) * (tokens - t0) / (t1 - t0)
    return curve[-1][1]


def table(runs: list[dict]) -> str:
    budget = min(r["tokens"] for r in runs)
    lines = [
        (
            f"Held-out greedy accuracy at {budget:,.0f} generated tokens (the budget every run reached), "
            "mean ± standard error over seeds; share of zero-spread groups (mean over updates)."
        ),
        "",
        "| grouping | seeds | updates | tokens per update | accuracy at budget | zero-spread groups |",
        "|---|---|---|---|---|---|",
    ]
    for g in GROUPINGS:
        mine = [r for r in runs if r["grouping"] == g]
        if not mine:
            continue
        acc = [accuracy_at(r["curve"], budget) for r in mine]
        mean = sum(acc) / len(acc)
        se = (sum((a - mean) ** 2 for a in acc) / (len(acc) - 1)) ** 0.5 / len(acc) ** 0.5 if len(acc) > 1 else 0.0
        spread = [z for r in mine for z in r["zero_spread"] if not math.isnan(z)]
        lines.append(
            f"| {g} | {len(mine)} | {mine[0]['updates']} | {sum(r['tokens_per_update'] for r in mine) / len(mine):,.0f} "
            f"| {mean:.3f} ± {se:.3f} | {sum(spread) / max(len(spread), 1):.3f} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    colours = dict(zip(GROUPINGS, ("tab:green", "tab:blue", "tab:orange")))
    for r in runs:
        xs, ys = zip(*r["curve"])
        ax.plot(xs, ys, color=colours[r["grouping"]], alpha=0.8, label=r["grouping"] if r["seed"] == min(x["seed"] for x in runs) else None)
    ax.set_xlabel("generated tokens")
    ax.set_ylabel("held-out accuracy (greedy)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--updates", type=int, default=40, help="updates of the episode groupings")
    parser.add_argument("--out", type=Path, default=None, help=f"default: {OUT} (--smoke: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="embedded model, tiny sizes, 2 updates, 1 seed")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    settings = SMOKE if args.smoke else REAL
    seeds = [0] if args.smoke else [int(s) for s in args.seeds.split(",")]
    updates = 2 if args.smoke else args.updates
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="tree-sampling-smoke-")) if args.smoke else OUT
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    tree_updates = None
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for grouping in ("problem", "agent_round", "tree"):
                n = updates
                if grouping == "tree":
                    if tree_updates is None:  # a tree's token cost relative to K episodes, from seed 0's runs
                        plain = [r["tokens_per_update"] for r in runs if r["grouping"] != "tree"]
                        probe = run(settings, "tree", seed, 1, Path(tmp) / f"probe-{seed}")
                        ratio = probe["tokens_per_update"] / (sum(plain) / len(plain))
                        tree_updates = max(1, round(updates / ratio))
                    n = tree_updates
                result = run(settings, grouping, seed, n, Path(tmp) / f"{grouping}-{seed}")
                runs.append(result)
                print(
                    f"{grouping:12s} seed {seed}: {n} updates, {result['tokens']:,.0f} tokens, "
                    f"accuracy {result['curve'][0][1]:.3f} -> {result['curve'][-1][1]:.3f}",
                    flush=True,
                )
    (args.out / "results.json").write_text(json.dumps({"settings": settings, "runs": runs}, indent=1))
    (args.out / "table.md").write_text(table(runs))
    plot(runs, args.out / "accuracy_vs_tokens.png")
    print(table(runs))
    return runs


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
