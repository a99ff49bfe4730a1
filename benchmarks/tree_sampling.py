"""Tree sampling vs the episode groupings of GRPO, at equal generated tokens, on a real model.

    .venv/bin/python benchmarks/tree_sampling.py [--seeds 0,1,2] [--updates 40] [--variants ...] [--out DIR]
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

A fourth variant, ``problem_dynamic``, is ``problem`` grouping with ``signal.dynamic_sampling=true``
(DAPO's dynamic sampling, issue 23's lever): it gets the same number of updates as ``problem``, and
its tokens count every group it drew (``signal/groups_drawn`` x ``group_size`` episodes x 2 steps x
the batch's mean response length: the dropped groups' own lengths are not logged, so this is an
estimate), so its curve is read at equal tokens like the others.

Each finished run is appended to ``results.json`` at once, and a run already there (same variant
and seed) is not run again: an interrupted benchmark goes on where it stopped.

Writes to ``--out`` (default ``benchmarks/results/tree_sampling``): ``results.json`` (per run: the
tokens and held-out greedy accuracy at each evaluation, the share of zero-spread groups per
update), ``table.md`` (per grouping over seeds: held-out accuracy read at the token budget every run
reached, interpolated between evaluations, mean and standard error; the mean share of zero-spread
groups) and ``accuracy_vs_tokens.png`` when matplotlib is installed. The share of zero-spread groups
is ``grpo/zero_spread_groups`` for trees and ``grpo/zero_advantage_frac`` for the episode groupings
(the same number there: with 0/1 rewards a group with any spread has no member at its mean).

**The run in docs/algorithms/grpo.md** (its setting fixed before it started, 2026-12-02): ``--updates 8
--seeds 0 --variants problem,agent_round,tree,problem_dynamic``, then ``--seeds 1 --variants
problem,agent_round,tree`` as the session's time allowed. 8 updates of 32 episodes is E1's size
(``benchmarks/learning.py``), so ``problem`` is E1's setting trained by GRPO instead of MARFT;
fp32 and 2 threads, the fastest pair alone on this machine (docs/real-models.md). Seed 0 then
gave ``agent_round`` the same run as ``problem``, token for token, as docs/algorithms/grpo.md says it
must on one round: every step of an episode scores the episode's return, so the groups are the same
(``tests/agents/test_grpo.py::test_agent_round_equals_problem_on_one_round_with_a_team_reward``).
Seed 1 ran ``tree`` only (``problem_dynamic`` took 40 min, and the session's time ran out), and
``agent_round`` is no longer a default variant here. ``problem`` seed 1 ran in the next session
(``--updates 8 --seeds 1 --variants problem``), as the plan above had it.

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
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

OUT = Path(__file__).parent / "results" / "tree_sampling"
GROUPINGS = ("tree", "problem", "agent_round", "problem_dynamic")
"""The variants: the three ``grpo.grouping`` values, and ``problem`` with dynamic sampling."""
THREADS = 2
"""torch threads: on this 2-core machine 2 threads were 1.7-1.8x faster than 1 alone (docs/real-models.md)."""
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


def overrides(settings: dict, variant: str, seed: int, updates: int, run_dir: Path) -> dict:
    """The ``TrainConfig`` keys of one run."""
    dynamic = variant == "problem_dynamic"
    return {
        **settings,
        "algo": "grpo",
        "env": "marft/MathChain-v0",
        "grpo.grouping": "problem" if dynamic else variant,
        "signal.dynamic_sampling": dynamic,
        "seed": seed,
        "updates": updates,
        "eval_rounds": 0,
        "checkpoint_every": 0,
        "threads": THREADS,
        "run_dir": str(run_dir),
    }


def tokens_of(row: dict, episodes: int, group_size: int) -> float:
    """Tokens one update generated (see the module docstring)."""
    if "tree/generated_tokens" in row:
        return row["tree/generated_tokens"]
    if "signal/groups_drawn" in row:  # dynamic sampling: every group drawn was generated, kept or not
        episodes = row["signal/groups_drawn"] * group_size
    return row["train/response_tokens"] * 2 * episodes  # two agent-steps per episode on the one-round chain


def zero_spread(row: dict) -> float:
    return row.get("grpo/zero_spread_groups", row.get("grpo/zero_advantage_frac", math.nan))


def run(settings: dict, grouping: str, seed: int, updates: int, run_dir: Path) -> dict:
    """Train one run; its accuracy-vs-tokens curve, zero-spread shares and wall/CPU seconds."""
    from marft_agents import from_dict, train

    wall, cpu = time.perf_counter(), time.process_time()
    summary = train(from_dict(overrides(settings, grouping, seed, updates, run_dir)), progress=False, quiet=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    tokens, curve = 0.0, [(0.0, summary["eval_before"]["accuracy"])]
    for r in rows:
        tokens += tokens_of(r, settings["episodes_per_update"], settings["grpo.group_size"])
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
        "rewarded_frac": [r.get("signal/rewarded_frac", math.nan) for r in rows],
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
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
            "mean ± standard error over seeds; share of zero-spread groups and of rewarded training episodes "
            "(means over updates); minutes per run, wall (CPU)."
        ),
        "",
        "| variant | seeds | updates | tokens per update | accuracy at budget | accuracy at end | zero-spread groups "
        "| rewarded episodes | min wall (CPU) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g in GROUPINGS:
        mine = [r for r in runs if r["grouping"] == g]
        if not mine:
            continue
        acc, end = [accuracy_at(r["curve"], budget) for r in mine], [r["curve"][-1][1] for r in mine]
        spread = [z for r in mine for z in r["zero_spread"] if not math.isnan(z)]
        rewarded = [z for r in mine for z in r.get("rewarded_frac", []) if not math.isnan(z)]
        wall = sum(r.get("wall_s", math.nan) for r in mine) / len(mine) / 60
        cpu = sum(r.get("cpu_s", math.nan) for r in mine) / len(mine) / 60
        lines.append(
            f"| {g} | {len(mine)} | {mine[0]['updates']} | {sum(r['tokens_per_update'] for r in mine) / len(mine):,.0f} "
            f"| {mean_se(acc)} | {mean_se(end)} | {sum(spread) / max(len(spread), 1):.3f} "
            f"| {sum(rewarded) / max(len(rewarded), 1):.3f} | {wall:.1f} ({cpu:.1f}) |"
        )
    return "\n".join(lines) + "\n"


def mean_se(values: list[float]) -> str:
    """``mean ± standard error`` (sd / sqrt(n)); one value has no spread to show."""
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.3f} (1 seed)"
    se = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 / len(values) ** 0.5
    return f"{mean:.3f} ± {se:.3f}"


def plot(runs: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    colours = dict(zip(GROUPINGS, ("tab:green", "tab:blue", "tab:orange", "tab:purple")))
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
    parser.add_argument("--variants", default="problem,tree", help=f"comma-separated, in run order, of {GROUPINGS}")
    parser.add_argument("--out", type=Path, default=None, help=f"default: {OUT} (--smoke: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="embedded model, tiny sizes, 2 updates, 1 seed")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    if unknown := sorted(set(variants) - set(GROUPINGS)):
        parser.error(f"--variants: unknown {unknown}; choose from {list(GROUPINGS)}")
    import torch

    torch.set_num_threads(THREADS)
    settings = SMOKE if args.smoke else REAL
    seeds = [0] if args.smoke else [int(s) for s in args.seeds.split(",")]
    updates = 2 if args.smoke else args.updates
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="tree-sampling-smoke-")) if args.smoke else OUT
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.json"
    saved = json.loads(results.read_text()) if results.exists() else {"settings": settings, "runs": []}
    if saved["settings"] != settings:
        parser.error(f"{results} holds runs of other settings: pass another --out")
    runs: list[dict] = saved["runs"]
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for variant in variants:
                if any(r["grouping"] == variant and r["seed"] == seed for r in runs):
                    continue  # finished before an interruption
                n = updates if variant != "tree" else tree_updates(runs, settings, seed, updates, Path(tmp))
                result = run(settings, variant, seed, n, Path(tmp) / f"{variant}-{seed}")
                runs.append(result)
                results.write_text(json.dumps(saved, indent=1))
                print(
                    f"{variant:15s} seed {seed}: {n} updates, {result['tokens']:,.0f} tokens, "
                    f"accuracy {result['curve'][0][1]:.3f} -> {result['curve'][-1][1]:.3f}, "
                    f"{result['wall_s'] / 60:.1f} min wall ({result['cpu_s'] / 60:.1f} CPU)",
                    flush=True,
                )
    (args.out / "table.md").write_text(table(runs))
    plot(runs, args.out / "accuracy_vs_tokens.png")
    print(table(runs))
    return runs


def tree_updates(runs: list[dict], settings: dict, seed: int, updates: int, tmp: Path) -> int:
    """The tree runs' updates: ``updates`` scaled by a tree's token cost against an episode grouping's.

    The cost ratio comes from one probe update (its tokens) against the mean tokens per update of the
    ``problem``/``agent_round`` runs done so far; a tree run already saved fixes it for every seed.
    """
    if done := [r["updates"] for r in runs if r["grouping"] == "tree"]:
        return done[0]
    plain = [r["tokens_per_update"] for r in runs if r["grouping"] in ("problem", "agent_round")]
    if not plain:
        raise SystemExit("--variants: run problem or agent_round before tree (its update count is set at equal tokens)")
    probe = run(settings, "tree", seed, 1, tmp / f"probe-{seed}")
    return max(1, round(updates / (probe["tokens_per_update"] / (sum(plain) / len(plain)))))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
