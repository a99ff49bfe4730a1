"""Draw docs/architecture.png: marft_agents' wings as boxes, bottom layer to top, and which may import which.

The arrows are the layer table of tests/test_architecture.py (``ALLOWED``, which that test holds
every import of the code to), less the arrows a longer path already implies: a wing may import
every wing it reaches. Each box lists the wing's modules as they are on disk. Rerun it after adding
a wing or a module:

    .venv/bin/python docs/make_architecture_png.py            # writes docs/architecture.png
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BOX_W, BOX_H = 3.3, 0.78

LAYOUT: dict[str, tuple[float, float, str]] = {
    "root": (3.0, 9.0, "the marft command (cli.py) and the package's names (__init__.py)"),
    "training": (3.0, 8.0, "how a run runs: config, setup, the loop"),
    "pretraining": (7.2, 6.0, "marft pretrain: SFT of the embedded model"),
    "distributed": (3.0, 7.0, "rollouts on Ray workers"),
    "runs": (3.0, 6.0, "what a run writes: files, lock, checkpoints, metrics, plots, report"),
    "algorithms": (1.2, 5.0, "the update: base.py + one file per algorithm"),
    "signal": (4.8, 5.0, "the batch's reward signal: diagnostics, dynamic sampling, curriculum"),
    "rollout": (3.0, 4.0, "playing envs layer by layer; tree, TRL, evaluation"),
    "engines": (3.0, 3.0, "generation: hf, vllm, per-episode seeding"),
    "models": (3.0, 2.0, "the policy, its LM helpers, chat templates, model loading"),
    "settings": (3.0, 1.0, "config fields and config text"),
    "marft_envs": (3.0, 0.0, "the envs (torch-free): core, tasks/, rewards/, sandbox/"),
}
"""Wing -> (x, y of its box's centre, its job); y is the layer, 0 (marft_envs) at the bottom."""
ROUTES: dict[tuple[str, str], tuple[str, str, float]] = {
    ("root", "pretraining"): ("R", "T", -0.2),
    ("pretraining", "rollout"): ("B", "R", -0.2),
}
"""Where an arrow leaves its box and enters the other (L, R, T, B, or TL, TR, BL, BR: a quarter of
the way in from a corner) and how much it bends; others run straight from bottom to top."""


def _architecture_test():
    """tests/test_architecture.py as a module: its import graph and its layer table."""
    spec = importlib.util.spec_from_file_location("test_architecture", ROOT / "tests" / "test_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def allowed_edges() -> set[tuple[str, str]]:
    """(wing, wing it may import), from the layer table of tests/test_architecture.py."""
    return {(wing, below) for wing, wings in _architecture_test().ALLOWED.items() for below in wings}


def reduce(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The edges that no longer path implies (the transitive reduction of an acyclic graph)."""
    succ: dict[str, set[str]] = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)

    def implied(a: str, b: str) -> bool:  # is b reachable from a without the edge a -> b?
        seen, stack = set(), [a]
        while stack:
            here = stack.pop()
            for nxt in succ.get(here, ()):
                if (here, nxt) != (a, b) and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return b in seen

    return {(a, b) for a, b in edges if not implied(a, b)}


def modules_of(wing: str) -> str:
    """The wing's module names as on disk (``cli, __init__`` for the root)."""
    if wing == "marft_envs":
        return "core, graph, views, registration, tasks/, rewards/, sandbox/, adapters/, testing/"
    folder = ROOT / "marft_agents" / ("" if wing == "root" else wing)
    return ", ".join(p.stem for p in sorted(folder.glob("*.py")) if wing == "root" or p.stem != "__init__")


def anchor(wing: str, where: str) -> tuple[float, float]:
    """A point on the edge of ``wing``'s box: L, R, T, B, or TL, TR, BL, BR (a quarter of the way in from a corner)."""
    x, y, _ = LAYOUT[wing]
    dx = {"L": -BOX_W / 2, "R": BOX_W / 2, "TL": -BOX_W / 4, "TR": BOX_W / 4, "BL": -BOX_W / 4, "BR": BOX_W / 4}.get(where, 0.0)
    dy = BOX_H / 2 if where.startswith("T") else -BOX_H / 2 if where.startswith("B") else 0.0
    return x + dx, y + dy


def draw(out: Path) -> set[tuple[str, str]]:
    """Write the picture to ``out``; return the arrows drawn."""
    edges = allowed_edges()
    unknown = {w for edge in edges for w in edge} - set(LAYOUT)
    if unknown:
        raise SystemExit(f"give these wings a place in LAYOUT: {sorted(unknown)}")
    arrows = reduce(edges)
    fig, ax = plt.subplots(figsize=(10.5, 11.5))
    for wing, (x, y, job) in LAYOUT.items():
        colour = "#e8eef7" if wing != "marft_envs" else "#eaf4e4"
        ax.add_patch(
            FancyBboxPatch(
                (x - BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.02,rounding_size=0.08", fc=colour, ec="#34495e", lw=1.2
            )
        )
        title = f"{wing}/" if wing not in ("root", "marft_envs") else ("marft_agents (root)" if wing == "root" else "marft_envs")
        ax.text(x, y + 0.25, title, ha="center", va="center", fontsize=11, weight="bold", family="monospace")
        ax.text(x, y + 0.05, textwrap.fill(job, 52), ha="center", va="center", fontsize=7.2)
        ax.text(x, y - 0.24, textwrap.fill(modules_of(wing), 50), ha="center", va="center", fontsize=6.4, family="monospace", color="#555")
    for a, b in sorted(arrows):
        start, end, bend = ROUTES.get((a, b), ("B", "T", 0.0))
        ax.add_patch(
            FancyArrowPatch(
                anchor(a, start),
                anchor(b, end),
                connectionstyle=f"arc3,rad={bend}",
                arrowstyle="-|>",
                mutation_scale=12,
                color="#c0392b",
                lw=1.1,
            )
        )
    ax.add_patch(
        FancyArrowPatch(
            anchor("settings", "B"), anchor("marft_envs", "T"), arrowstyle="-|>", mutation_scale=12, color="#27ae60", lw=1.1, ls="--"
        )
    )
    ax.text(
        3.15,
        0.5,
        "every wing may import marft_envs; marft_envs imports nothing of marft_agents",
        fontsize=7.2,
        color="#27ae60",
        va="center",
    )
    ax.set_xlim(-1.2, 9.4)
    ax.set_ylim(-0.7, 9.7)
    ax.axis("off")
    ax.set_title("marft_agents in wings: each may import only the wings it reaches by the arrows", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return arrows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "architecture.png", help="where to write the PNG")
    args = parser.parse_args(argv)
    arrows = draw(args.out)
    print(f"wrote {args.out} ({len(arrows)} arrows)")


if __name__ == "__main__":
    main(sys.argv[1:])
