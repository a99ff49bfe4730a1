"""PNG curves of a run: ``marft plot RUN_DIR`` writes ``RUN_DIR/curves.png``."""

from __future__ import annotations

import json
from pathlib import Path

PANELS = [
    ("train/solved", "training episodes solved"),
    ("train/return", "mean return"),
    ("critic/value_loss", "critic value loss"),
    ("/entropy", "policy entropy (per agent)"),
    ("/approx_kl", "approx KL to behaviour (per agent)"),
    ("/own_accuracy", "own accuracy (per agent, training)"),
]


def plot_run(run_dir: str | Path) -> Path:
    """Plot ``metrics.jsonl`` (and the before/after evaluation) to ``curves.png``; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics at {path}: is {run_dir} a run folder?")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else None
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5))
    for ax, (key, title) in zip(axes.flat, PANELS):
        keys = sorted({k for r in rows for k in r if (k == key or (key.startswith("/") and k.endswith(key)))})
        for k in keys:
            xs = [r["update"] for r in rows if k in r]
            ys = [r[k] for r in rows if k in r]
            ax.plot(xs, ys, label=k.split("/")[-2] if key.startswith("/") else None, lw=1.2)
        if key == "train/solved" and summary:
            for name, style in (("eval_before", ":"), ("eval_after", "--")):
                ax.axhline(summary[name]["accuracy"], ls=style, c="k", lw=1, label=f"held-out {name[5:]}")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("update")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"{run_dir.name}: {summary['env'] if summary else ''}", fontsize=11)
    fig.tight_layout()
    out = run_dir / "curves.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
