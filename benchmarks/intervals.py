"""What holds at 95 %: the t-intervals of the committed multi-seed results of ``benchmarks/learning.py``.

    .venv/bin/python benchmarks/intervals.py          # the table docs/real-models.md quotes ("Protocol for results")

Each row of the first table is the change a method made over its start, seed by seed (greedy held-out
accuracy after training minus before; the start is one deterministic evaluation, the same for every
seed), with the 95 % t-interval of its mean over seeds: mean ± t(0.975, n - 1) · sd / √n, that is ±
4.303 standard errors with 3 seeds and ± 12.706 with 2 (:mod:`marft_agents.runs.stats`). The second
table sets two methods run on the same seeds and problems against each other, paired by seed, with the
paired t-test's p. A change holds at 95 % when its interval leaves out 0; it meets the goal written
before its runs when the interval's lower end clears the goal (F1 and F4: +10 points, F3: +3). These
runs kept no per-problem outcomes (they came later), so no McNemar test can be made of them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "credit"
UPDATES = 8  # E1's budget in updates: F1's evaluation at 256 episodes is after its 8th update

CHANGES = (  # (what, run-folder prefix, the goal in points written before the runs, or None)
    ("F1: MARFT, the chain, both learn", "f1_marft", 10),
    ("F1 with the actor frozen", "f1_frozen", 10),
    ("F1's lever: the actor at T 0.3", "f1_actor_t03", 10),
    ("F2: PPO, one agent (MathSolo-v0)", "f2_ppo", None),
    ("F3: MARFT from the SFT checkpoint", "f3_marft", 3),
    ("F3's lever: lr 3e-5, 256 episodes", "f3_lowlr", 3),
    ("F3's lever: lr 3e-5, 800 episodes", "f3_lowlr_800", 3),
    ("F4: MARFT, T 0.7", "f4_marft", 10),
    ("F4: GRPO tree, T 0.7", "f4_tree", 10),
    ("F4: MARFT, T 0.3", "f4_marft_t03", 10),
    ("F4: GRPO tree, T 0.3", "f4_tree_t03", 10),
    ("Ablation: the defects switched back on, 256 episodes", "a_before", None),
)
PAIRS = (  # (what, method a, method b): a minus b, each (prefix, the update after which it is read, or None: the end)
    ("F4 at T 0.3: MARFT minus the tree", ("f4_marft_t03", None), ("f4_tree_t03", None)),
    ("F4 MARFT: T 0.3 minus T 0.7", ("f4_marft_t03", None), ("f4_marft", None)),
    ("F4 at T 0.7: MARFT minus the tree", ("f4_marft", None), ("f4_tree", None)),
    ("F2's one agent minus F1's chain, after 800 episodes", ("f2_ppo", None), ("f1_marft", None)),
    ("F1: both learn minus the actor frozen", ("f1_marft", None), ("f1_frozen", None)),
    ("256 episodes: the fixes (F1) minus the defects on", ("f1_marft", UPDATES), ("a_before", None)),
)


def runs(out: Path, prefix: str) -> dict[int, dict]:
    """Seed -> ``{"summary", "metrics"}`` of ``prefix``'s finished runs in ``out``."""
    found = {}
    for run in sorted(out.glob(f"{prefix}_s*")):
        seed = run.name[len(prefix) + 2 :]
        if seed.isdigit() and (run / "summary.json").is_file():
            metrics = run / "metrics.jsonl"
            rows = [json.loads(x) for x in metrics.read_text().splitlines()] if metrics.is_file() else []
            found[int(seed)] = {"summary": json.loads((run / "summary.json").read_text()), "metrics": rows}
    return found


def accuracy(run: dict, after: int | None = None) -> float:
    """A run's greedy held-out accuracy at its end, or after update ``after`` (its evaluation there)."""
    if after is None:
        return run["summary"]["eval_after"]["accuracy"]
    return run["metrics"][after - 1]["eval/accuracy"]


def _cell(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:+.1f}"


def change_rows(out: Path) -> list[str]:
    from marft_agents.runs import stats

    lines = [
        "| result | seeds | change per seed | mean ± se | 95 % t-interval | holds at 95 % | goal met |",
        "|---|---|---|---|---|---|---|",
    ]
    for title, prefix, goal in CHANGES:
        found = runs(out, prefix)
        if not found:
            continue
        changes = [accuracy(r) - r["summary"]["eval_before"]["accuracy"] for r in found.values()]
        i = stats.t_interval(changes)
        holds = "n/a" if i.low != i.low else "yes" if i.low > 0 or i.high < 0 else "no"
        met = "" if goal is None else "n/a" if i.low != i.low else ("yes" if 100 * i.low > goal else "no") + f" (+{goal})"
        lines.append(
            f"| {title} | {','.join(map(str, found))} | {', '.join(_cell(c) for c in changes)} | {_cell(i.estimate)} ± {100 * i.se:.1f} | "
            f"[{_cell(i.low)}, {_cell(i.high)}] | {holds} | {met} |"
        )
    return lines


def pair_rows(out: Path) -> list[str]:
    from marft_agents.runs import stats

    lines = [
        "| comparison | seeds | difference per seed | mean | 95 % t-interval | paired t p | holds at 95 % |",
        "|---|---|---|---|---|---|---|",
    ]
    for title, (a, at_a), (b, at_b) in PAIRS:
        ra, rb = runs(out, a), runs(out, b)
        seeds = sorted(set(ra) & set(rb))
        if len(seeds) < 2:
            continue
        test = stats.paired_t([accuracy(ra[s], at_a) for s in seeds], [accuracy(rb[s], at_b) for s in seeds])
        d = test.difference
        each = [accuracy(ra[s], at_a) - accuracy(rb[s], at_b) for s in seeds]
        holds = "yes" if d.low > 0 or d.high < 0 else "no"
        lines.append(
            f"| {title} | {','.join(map(str, seeds))} | {', '.join(_cell(x) for x in each)} | {_cell(d.estimate)} | "
            f"[{_cell(d.low)}, {_cell(d.high)}] | {test.p:.3f} | {holds} |"
        )
    return lines


def report(out: Path = RESULTS) -> str:
    """Both tables, in points."""
    return "\n".join([*change_rows(out), "", *pair_rows(out)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=RESULTS, help="the results folder of the runs (default: results/credit)")
    print(report(p.parse_args(argv).out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
