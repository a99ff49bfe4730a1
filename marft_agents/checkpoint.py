"""Full training checkpoints, written atomically.

A checkpoint holds everything needed to continue a run exactly: adapter weights, critic, every
optimizer's state, the RNG states (Python, NumPy, torch) and the data position (the next update).
It is written to a temporary file in the same folder and renamed into place (``os.replace`` is
atomic), then ``latest`` is rewritten the same way — so a kill at any moment leaves the previous
checkpoint loadable and ``latest`` never points at a partial file.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

LATEST = "latest"


def rng_state(np_rng: np.random.Generator) -> dict[str, Any]:
    """The state of every random generator the trainer uses."""
    return {"python": random.getstate(), "torch": torch.get_rng_state(), "numpy": np_rng.bit_generator.state}


def set_rng_state(state: dict[str, Any], np_rng: np.random.Generator) -> None:
    """Restore what :func:`rng_state` saved."""
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    np_rng.bit_generator.state = state["numpy"]


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(folder: str | Path, update: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``update_<n>.pt`` atomically, point ``latest`` at it, and keep only the newest ``keep``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"update_{update:06d}.pt"
    _atomic_write(path, lambda f: torch.save({"update": update, **state}, f))
    _atomic_write(folder / LATEST, lambda f: f.write(path.name.encode()))
    for old in sorted(folder.glob("update_*.pt"))[:-keep]:
        old.unlink(missing_ok=True)
    return path


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The checkpoint ``latest`` points at, or None when there is none."""
    pointer = Path(folder) / LATEST
    if not pointer.is_file():
        return None
    path = Path(folder) / pointer.read_text().strip()
    return path if path.is_file() else None


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`."""
    return torch.load(path, map_location="cpu", weights_only=False)
