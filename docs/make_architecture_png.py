"""Draw docs/architecture.png from the code: marft_agents' wings, and an arrow for each pair of wings one imports from.

Every module of marft_agents is parsed with :mod:`ast` (``import_graph`` of tests/test_architecture.py:
nothing is imported); an import from a module of one wing into a module of another is an arrow
between their boxes, drawn once per pair of wings. The boxes stand one under another, each wing
below every wing that imports it (by layer: a wing sits one layer above the highest wing it
imports), and list the wing's modules as they are on disk; the arrows run down the two sides, each
side chosen so that as few arrows cross as can be. The PNG carries what it was drawn from (the pairs
and the modules) in a text chunk, which tests/test_architecture.py compares with the code: rerun it
after adding a module or a wing-to-wing import:

    .venv/bin/python docs/make_architecture_png.py            # writes docs/architecture.png
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "architecture.png"
BOX_W, BOX_H, ROW = 6.4, 0.82, 1.08
"""A box's width and height, and the distance between two boxes' centres."""
BEND = 0.42
"""How far an arrow bows out, as a share of the height it spans (arrows of one span nest)."""
METADATA_KEY = "marft-architecture"
"""The PNG text chunk that holds what the picture was drawn from (JSON)."""

JOBS: dict[str, str] = {
    "root": "the marft command (cli.py) and the public names (__init__.py)",
    "training": "how a run runs: the config, the run's parts, the loop",
    "pretraining": "marft pretrain: supervised pre-training of the embedded model",
    "distributed": "rollouts on Ray workers",
    "algorithms": "the update: the Learner, one file per algorithm, the shared pieces and maths",
    "signal": "the batch's reward signal: diagnostics, dynamic sampling, curriculum",
    "rollout": "playing envs layer by layer: episodes, tree sampling, TRL, evaluation",
    "runs": "what a run writes: files, lock, checkpoints, metrics, plots, report",
    "engines": "generation: hf, vllm, TRL's model, per-episode seeding",
    "models": "the policy, its LM helpers, sampling, chat templates, model loading",
    "settings": "config fields and config text",
    "marft_envs": "the envs (torch-free): core, tasks/, rewards/, sandbox/, adapters/, testing/",
}
"""Wing -> its job, one line in its box (``root``: the root's modules; ``marft_envs``: the package below)."""


def _architecture_test():
    """tests/test_architecture.py as a module: its import graph, ``wing_of`` and ``wing_pairs``."""
    spec = importlib.util.spec_from_file_location("test_architecture", ROOT / "tests" / "test_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def modules_of(wing: str) -> list[str]:
    """The wing's module names as on disk (the root: ``__init__``, ``cli``, ...)."""
    folder = ROOT / "marft_agents" / ("" if wing == "root" else wing)
    return [p.stem for p in sorted(folder.glob("*.py")) if wing == "root" or p.stem != "__init__"]


def drawn_from() -> dict:
    """What the picture shows, from the code: the wing pairs, each wing's modules, the wings that import marft_envs."""
    arch = _architecture_test()
    graph = arch.import_graph()
    wings = sorted({arch.wing_of(m) for m in graph if m.split(".")[0] == "marft_agents"})
    envs = {arch.wing_of(m) for m in graph if m.startswith("marft_agents") and any(t.startswith("marft_envs") for t in graph[m])}
    return {
        "pairs": sorted([a, b] for a, b in arch.wing_pairs(graph)),
        "modules": {w: modules_of(w) for w in wings},
        "import_marft_envs": sorted(envs),
    }


def layers(wings: list[str], pairs: set[tuple[str, str]]) -> dict[str, int]:
    """Wing -> its layer: 0 when it imports no other wing, else one more than the highest wing it imports."""
    below: dict[str, set[str]] = {w: {b for a, b in pairs if a == w} for w in wings}
    out: dict[str, int] = {}

    def layer(w: str, path: tuple[str, ...] = ()) -> int:
        if w in path:
            raise SystemExit(f"the wings import each other in a cycle: {' -> '.join(path + (w,))}")
        if w not in out:
            out[w] = 1 + max((layer(b, path + (w,)) for b in below[w]), default=-1)
        return out[w]

    for w in wings:
        layer(w)
    return out


def _crossings(edges: list[tuple[int, int]]) -> int:
    """How many pairs of arcs on one side cross: ``(a, b)`` and ``(c, d)`` (rows, a < b) with a < c < b < d."""
    return sum(1 for (a, b), (c, d) in itertools.permutations(edges, 2) if a < c < b < d)


def arrange(wings: list[str], pairs: set[tuple[str, str]]) -> tuple[list[str], dict[tuple[str, str], int]]:
    """The boxes' order, top to bottom (layer by layer, highest first), and each pair's side (-1 left, 1 right).

    Within a layer every order is tried (a handful of wings); the arrows are dealt, longest first, to the side
    where they cross fewer arrows already there; the order with the fewest crossings wins (then the shortest arrows)."""
    layer_of = layers(wings, pairs)
    groups = [sorted(w for w in wings if layer_of[w] == k) for k in sorted(set(layer_of.values()), reverse=True)]
    best = None
    for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = [w for group in orders for w in group]
        row = {w: k for k, w in enumerate(order)}
        edges = sorted(pairs, key=lambda p: (row[p[0]] - row[p[1]], p))
        sides: dict[tuple[str, str], int] = {}
        lanes: dict[int, list[tuple[int, int]]] = {-1: [], 1: []}
        for a, b in edges:
            span = (row[a], row[b])
            side = min((1, -1), key=lambda s: _crossings(lanes[s] + [span]) - _crossings(lanes[s]))
            lanes[side].append(span)
            sides[(a, b)] = side
        score = (_crossings(lanes[-1]) + _crossings(lanes[1]), sum(abs(row[a] - row[b]) for a, b in pairs))
        if best is None or score < best[0]:
            best = (score, order, sides)
    return best[1], best[2]


def _title(wing: str) -> str:
    return "marft_agents (root)" if wing == "root" else "marft_envs" if wing == "marft_envs" else f"{wing}/"


def _box(ax, wing: str, y: float, lines: str, colour: str = "black") -> None:
    fill = "#eaf4e4" if wing == "marft_envs" else "#e8eef7"
    ax.add_patch(
        FancyBboxPatch(
            (-BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.02,rounding_size=0.08", fc=fill, ec="#34495e", lw=1.2
        )
    )
    ax.text(0, y + 0.25, _title(wing), ha="center", va="center", fontsize=11, weight="bold", family="monospace", color=colour)
    ax.text(0, y + 0.04, JOBS[wing], ha="center", va="center", fontsize=7.6)
    ax.text(0, y - 0.22, textwrap.fill(lines, 96), ha="center", va="center", fontsize=6.6, family="monospace", color="#555")


def draw(out: Path) -> set[tuple[str, str]]:
    """Write the picture to ``out``; return the pairs drawn as arrows (``(wing, wing it imports)``)."""
    facts = drawn_from()
    wings, pairs = list(facts["modules"]), {tuple(p) for p in facts["pairs"]}
    unknown = sorted(set(wings) - set(JOBS))
    if unknown:
        raise SystemExit(f"give these wings their job in JOBS: {unknown}")
    order, sides = arrange(wings, pairs)
    y_of = {w: -k * ROW for k, w in enumerate(order)}
    y_envs = -len(order) * ROW
    palette = plt.get_cmap("tab10").colors + plt.get_cmap("Dark2").colors
    colour_of = {w: palette[k % len(palette)] for k, w in enumerate(order)}

    fig, ax = plt.subplots(figsize=(11.5, 1.2 + 0.92 * (len(order) + 1)))
    for w in order:
        _box(ax, w, y_of[w], ", ".join(facts["modules"][w]), colour_of[w])
    importers = ", ".join(f"{w}/" for w in facts["import_marft_envs"])
    _box(ax, "marft_envs", y_envs, f"imported by {importers}; imports nothing of marft_agents")
    # Where an arrow leaves its box and enters the other: spread along the side (leaving low, entering high), in
    # the order that keeps the arrows of one box apart (the longest furthest out).
    ends: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for pair, side in sides.items():
        ends.setdefault((pair[0], side), []).append(pair)
        ends.setdefault((pair[1], side), []).append(pair)
    point: dict[tuple[tuple[str, str], str], tuple[float, float]] = {}
    for (w, side), group in ends.items():
        outgoing = sorted((p for p in group if p[0] == w), key=lambda p: y_of[p[1]], reverse=True)
        incoming = sorted((p for p in group if p[1] == w), key=lambda p: y_of[p[0]])
        for k, p in enumerate(outgoing):
            point[(p, "from")] = (side * BOX_W / 2, y_of[w] - 0.05 - 0.33 * (k + 1) / (len(outgoing) + 1))
        for k, p in enumerate(incoming):
            point[(p, "to")] = (side * BOX_W / 2, y_of[w] + 0.05 + 0.33 * (k + 1) / (len(incoming) + 1))
    for (a, b), side in sorted(sides.items()):
        start, end = point[((a, b), "from")], point[((a, b), "to")]
        ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                connectionstyle=f"arc3,rad={-BEND * side}",
                arrowstyle="-|>",
                mutation_scale=9,
                color=colour_of[a],
                lw=1.0,
                alpha=0.9,
            )
        )
    reach = BOX_W / 2 + BEND * ROW * len(order) / 2 + 0.3
    ax.set_xlim(-reach, reach)
    ax.set_ylim(y_envs - 0.7, 0.7)
    ax.axis("off")
    ax.set_title(
        f"marft_agents' wings and the {len(pairs)} pairs of wings that import each other (from the code's imports)\n"
        "an arrow: a module of one wing imports a module of the other, in the colour of the importing wing's name",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110, metadata={METADATA_KEY: json.dumps(facts, sort_keys=True), "Software": None})
    plt.close(fig)
    return pairs


def read_metadata(png: Path) -> dict | None:
    """What a PNG written by :func:`draw` was drawn from (its text chunk), or None without one."""
    data = png.read_bytes()
    at = 8  # after the signature
    while at < len(data):
        length, kind = int.from_bytes(data[at : at + 4], "big"), data[at + 4 : at + 8]
        chunk = data[at + 8 : at + 8 + length]
        if kind == b"tEXt" and chunk.startswith(METADATA_KEY.encode() + b"\0"):
            return json.loads(chunk.split(b"\0", 1)[1].decode("latin-1"))
        at += 12 + length
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the PNG")
    args = parser.parse_args(argv)
    pairs = draw(args.out)
    print(f"wrote {args.out} ({len(pairs)} arrows)")


if __name__ == "__main__":
    main(sys.argv[1:])
