"""PNG curves of a run: ``marft plot RUN_DIR`` writes ``RUN_DIR/curves.png``."""

from __future__ import annotations

import io
import json
from pathlib import Path

from marft_agents.runs import files as run_files

SMOOTH = 20
"""Updates in the trailing mean drawn over each noisy per-update curve."""

PANELS = [
    ("train/solved", "episodes solved: training (sampled), held-out (greedy)"),
    ("train/return", "mean return"),
    ("critic/value_loss", "critic value loss"),
    ("/entropy", "policy entropy (per agent)"),
    ("/approx_kl", "approx KL to behaviour (per agent)"),
    ("/own_accuracy", "own accuracy (per agent, training)"),
    ("/response_length", "response length in tokens (per agent, training)"),
]


def trailing_mean(ys: list[float], window: int) -> list[float]:
    """Mean of each value and up to ``window - 1`` values before it."""
    out, total = [], 0.0
    for i, y in enumerate(ys):
        total += y - (ys[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


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
    fig, axes = plt.subplots(2, 4, figsize=(17, 6.5))
    for ax in axes.flat[len(PANELS) :]:
        ax.axis("off")
    for ax, (key, title) in zip(axes.flat, PANELS):
        keys = sorted({k for r in rows for k in r if (k == key or (key.startswith("/") and k.endswith(key)))})
        for k in keys:
            xs = [r["update"] for r in rows if k in r]
            ys = [r[k] for r in rows if k in r]
            label = k.split("/")[-2] if key.startswith("/") else "training"
            window = min(SMOOTH, len(ys))
            if window < 2:  # one point: nothing to smooth
                ax.plot(xs, ys, "o", ms=4, label=label)
                continue
            (line,) = ax.plot(xs, ys, lw=0.8, alpha=0.35)
            ax.plot(xs, trailing_mean(ys, window), lw=1.6, c=line.get_color(), label=f"{label} ({window}-update mean)")
        reported = not summary or summary["eval_before"].get("success_reported", True)
        if key == "train/solved" and summary and reported:
            # held-out greedy accuracy: before (update 0), every eval_every updates, after (the last update)
            points = [(0, summary["eval_before"]["accuracy"])]
            points += [(r["update"] + 1, r["eval/accuracy"]) for r in rows if "eval/accuracy" in r]
            points.append((summary["updates"], summary["eval_after"]["accuracy"]))
            ax.plot(*zip(*points), "k.--", lw=1, ms=7, label="held-out (greedy)")
        if key == "train/return" and summary and not reported:  # mean return is the headline then
            points = [(0, summary["eval_before"]["mean_return"]), (summary["updates"], summary["eval_after"]["mean_return"])]
            ax.plot(*zip(*points), "k.--", lw=1, ms=7, label="evaluation (greedy)")
        if key == "train/solved" and not reported:
            title = "episodes solved: the env reports no success (see mean return)"
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("update")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"{run_dir.name}: {summary['env'] if summary else ''}", fontsize=11)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=100)
    plt.close(fig)
    return run_files.write_file(run_dir, "curves.png", image.getvalue())  # atomic, and never through a link
