"""Full training checkpoints, written atomically.

A checkpoint holds everything needed to continue a run exactly: adapter weights, critic, every
optimizer's state and learning-rate schedule (``algo.schedulers``: its position, its base rates; absent
from checkpoints written before schedules, which resume at their optimizers' rates), the RNG states
(Python, NumPy, torch, and CUDA's once a run has used a GPU) and the data position (the next update).
Gradient accumulation has no position to keep: its groups never span two updates, and a checkpoint is
written between updates. Its tensors are saved on the CPU, whatever the run's device: a
checkpoint of a GPU run loads on any machine, and loading copies each tensor onto the run's device
(``LaMASPolicy.load_adapter_state``, ``Module.load_state_dict`` and ``Optimizer.load_state_dict``
copy or cast to their parameters' device).
It is written to a temporary file in the same folder and renamed into place (``os.replace`` is
atomic), then ``latest`` is rewritten the same way — so a kill at any moment leaves the previous
checkpoint loadable and ``latest`` never points at a partial file; the next save removes the
temporary files such a kill leaves behind. The writes go through ``run_files``: neither the
checkpoint folder nor a file in it may be a symbolic link, and a failed write (a full disk) is one
line naming the reason and the previous checkpoint, which stays intact (:class:`CheckpointWriteError`).
Checkpoints hold tensors and plain data only and are read with ``torch.load(weights_only=True)``:
a crafted file cannot run code when it is loaded. A run keeps the newest ``checkpoints.keep`` of them
(:class:`CheckpointConfig`).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marft_agents.models.protocol import Policy
from marft_agents.runs import files as run_files
from marft_agents.settings.fields import NON_NEGATIVE, ranged

LATEST = "latest"
"""The file in ``checkpoints/`` that names the newest whole checkpoint (``update_000007.pt``)."""


@dataclass
class CheckpointConfig:
    """What a run keeps of its checkpoints (``checkpoints.*`` keys; docs/agents.md, "A run folder")."""

    keep: int = ranged(2, NON_NEGATIVE, "0 keeps every checkpoint")
    """How many of the newest checkpoints (``update_*.pt``) the run keeps; older ones are deleted (0: every one)."""


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read (truncated, empty, or not a checkpoint)."""


def rng_state(np_rng: np.random.Generator) -> dict[str, Any]:
    """The state of every random generator the trainer uses (each GPU's too, once CUDA is in use: it samples there)."""
    state = {"python": random.getstate(), "torch": torch.get_rng_state(), "numpy": np_rng.bit_generator.state}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any], np_rng: np.random.Generator) -> None:
    """Restore what :func:`rng_state` saved (:func:`check_resume_state` checks it can be, before a run writes)."""
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    np_rng.bit_generator.state = state["numpy"]
    if "cuda" in state and torch.cuda.is_available():  # a GPU run's states, on as many GPUs as this machine has
        for index, gpu_state in zip(range(torch.cuda.device_count()), state["cuda"]):
            torch.cuda.set_rng_state(gpu_state, index)


def on_cpu(tree: Any) -> Any:
    """``tree`` (dicts, lists, tuples of tensors and plain data) with every tensor on the CPU (those there already as
    they are)."""
    if isinstance(tree, torch.Tensor):
        return tree.cpu()
    if isinstance(tree, dict):
        return {k: on_cpu(v) for k, v in tree.items()}
    if type(tree) in (list, tuple):
        return type(tree)(on_cpu(v) for v in tree)
    return tree


class CheckpointWriteError(run_files.RunWriteError):
    """A checkpoint that could not be written (a full disk); the previous one is intact."""


def save_checkpoint(folder: str | Path, update: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``update_<n>.pt`` atomically, point ``latest`` at it, and keep only the newest ``keep`` (0: every one).

    ``folder`` is created if missing; neither it nor a file in it may be a symbolic link. A failed
    write raises :class:`CheckpointWriteError` naming the reason and the checkpoint still in place.
    """
    if keep < 0:
        raise ValueError(f"checkpoints.keep must be >= 0 (0 keeps every checkpoint), got {keep}")
    folder = Path(folder)
    run_files.ensure_folder(folder.parent, folder.name)  # a link named like the folder is refused here
    remove_partial_files(folder)
    path = folder / f"update_{update:06d}.pt"
    previous = latest_checkpoint(folder)
    try:
        run_files.write_file(
            folder.parent, Path(folder.name, path.name), lambda f: torch.save(on_cpu({"update": update, **state}), f)
        )
        run_files.write_text(folder.parent, Path(folder.name, LATEST), path.name)
    except (OSError, RuntimeError) as err:
        raise _write_failure(path, previous, err) from None
    # keep the newest ``keep`` up to this one; a later-numbered file is not of this run's history
    saved = sorted(folder.glob("update_*.pt"))
    older = [p for p in saved if p.name <= path.name][:-keep] if keep else []
    for old in [p for p in saved if p.name > path.name] + older:
        old.unlink(missing_ok=True)
    return path


def _write_failure(path: Path, previous: Path | None, err: Exception) -> Exception:
    """The one-line error for a checkpoint write that failed, or ``err`` itself when it is no write failure."""
    # torch reports a failed write of its zip container as a RuntimeError ("[enforce fail at
    # inline_container.cc:...]") whose context is the OSError (ENOSPC for a full disk)
    if isinstance(err, RuntimeError) and run_files.os_error_in(err) is None and "inline_container" not in str(err):
        return err
    failure = err if isinstance(err, run_files.RunWriteError) else run_files.write_error(path, err)
    kept = f"the previous checkpoint {previous} is intact" if previous else "no earlier checkpoint was written"
    message = str(failure).replace("cannot write ", "cannot write checkpoint ", 1)
    return CheckpointWriteError(f"{message}; {kept}", failure.errno)


def remove_partial_files(folder: str | Path) -> list[Path]:
    """Delete the temporary files a kill during a write leaves in ``folder``; returns them."""
    partial = sorted(Path(folder).glob(".*.tmp"))
    for tmp in partial:
        tmp.unlink(missing_ok=True)
    return partial


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The checkpoint ``latest`` points at, or None when there is none."""
    pointer = Path(folder) / LATEST
    if not pointer.is_file():
        return None
    path = Path(folder) / pointer.read_text().strip()
    return path if path.is_file() else None


def newest_checkpoint_hint(folder: str | Path) -> str:
    """For a folder whose ``latest`` is missing or points at no file: how to use its newest ``update_*.pt`` instead
    ("" when it holds none)."""
    folder = Path(folder)
    saved = sorted(p for p in folder.glob("update_*.pt") if p.is_file() and not p.is_symlink())
    if not saved:
        return ""
    pointer = folder / LATEST
    state = "points at no file" if pointer.exists() or pointer.is_symlink() else "is missing"
    return (
        f"{pointer} {state}, but the newest checkpoint there is {saved[-1]}: point latest at it "
        f"(echo {saved[-1].name} > {pointer})"
    )


def checkpoint_inside(folder: str | Path, owner: str) -> Path | None:
    """:func:`latest_checkpoint` of a folder someone else may have written (``init_from``, ``marft eval --run``): a
    :class:`CheckpointError` naming ``owner`` when ``latest`` or the file it names is a symbolic link or lies outside
    ``folder`` (a run's checkpoint is a file of its own folder)."""
    folder = Path(folder)
    pointer = folder / LATEST
    if pointer.is_symlink():
        raise CheckpointError(
            f"{owner}: {pointer} is a symbolic link (to {os.readlink(pointer)[:120]}), not the file a run writes: "
            "replace it with a file naming one of that folder's update_*.pt"
        )
    path = latest_checkpoint(folder)
    if path is None:
        return None
    name = pointer.read_text().strip()
    if path.is_symlink() or Path(name).name != name or path.resolve().parent != folder.resolve():
        raise CheckpointError(
            f"{owner}: {pointer} names {name[:120]!r}, not a checkpoint file of {folder}: "
            "point it at one of that folder's update_*.pt"
        )
    return path


def check_finite_adapters(adapters: dict[str, Any], path: str | Path, *, resume: bool = False) -> None:
    """A :class:`CheckpointError` naming ``path``, the adapter and the tensor when an adapter weight is NaN or
    infinite: such adapters generate garbage that would evaluate (or train on) as if they were a result."""
    for adapter, weights in adapters.items():
        if not isinstance(weights, dict):
            continue  # its layout is checked as it loads
        for name, tensor in weights.items():
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not torch.isfinite(tensor).all():
                bad = "NaN" if torch.isnan(tensor).any() else "infinite"
                raise CheckpointError(
                    f"{path}: adapter {adapter!r} tensor {str(name)[:120]!r} holds {bad} values (the run diverged "
                    f"before this checkpoint){_previous_hint(Path(path), resume=resume)}"
                )


def load_checkpoint(path: str | Path, *, mmap: bool = False) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors and plain data only).

    ``mmap``: map the tensors from the file instead of reading them (a quick look at its numbers).
    """
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise
    except Exception as err:  # truncated, empty, garbage, or an object a plain checkpoint never holds
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"cannot read checkpoint {path} ({reason[:160]}){_previous_hint(path)}") from None
    if not isinstance(state, dict) or "update" not in state:
        raise CheckpointError(f"{path} is not a marft checkpoint (no update number){_previous_hint(path)}")
    return state


def check_resume_state(state: dict[str, Any], path: str | Path, *, updates: int) -> int:
    """The update a checkpoint resumes at, once its number and RNG states are known to be usable.

    A :class:`CheckpointError` naming ``path`` for an update number that is not a whole number from 0
    to ``updates`` (a run must not report updates it never ran), RNG states that do not restore, or
    no learner state with adapters (:func:`adapters_of`).
    """
    update = state["update"]
    if type(update) is not int or update < 0:
        raise CheckpointError(
            f"{path}: its update number {str(update)[:40]!r} is not a whole number >= 0{_previous_hint(Path(path))}"
        )
    if update > updates:
        raise CheckpointError(
            f"{path} was written after update {update}, past this run's updates={updates}: "
            f"resume with updates={update} or more"
        )
    rng = state.get("rng")
    if not isinstance(rng, dict) or not {"python", "torch", "numpy"} <= set(rng):
        raise CheckpointError(
            f"{path}: its 'rng' is not the python, torch and numpy RNG states a checkpoint holds"
            f"{_previous_hint(Path(path))}"
        )
    for name, restore in (
        ("python", lambda s: random.Random().setstate(s)),
        ("torch", lambda s: torch.Generator().set_state(s)),
        ("numpy", lambda s: setattr(np.random.default_rng().bit_generator, "state", s)),
    ):
        try:  # on a scratch generator: the run's own are set once everything is checked
            if name == "torch" and not (isinstance(rng[name], torch.Tensor) and rng[name].dtype == torch.uint8):
                raise TypeError("not a uint8 tensor")
            restore(rng[name])
        except Exception as err:
            reason = str(err).strip().splitlines()[0][:120] if str(err).strip() else type(err).__name__
            raise CheckpointError(
                f"{path}: its {name} RNG state cannot be restored ({reason}){_previous_hint(Path(path))}"
            ) from None
    cuda = rng.get("cuda", [])  # a GPU run's: one uint8 state per GPU
    if not (isinstance(cuda, list) and all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in cuda)):
        raise CheckpointError(
            f"{path}: its cuda RNG state cannot be restored (not a list of uint8 tensors){_previous_hint(Path(path))}"
        )
    check_finite_adapters(adapters_of(state, path), path, resume=True)
    return update


def adapters_of(state: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """The adapter states a checkpoint holds (``state["algo"]["adapters"]``), or a :class:`CheckpointError` naming
    ``path``.

    Only their layout is checked here (mappings from adapter names); each adapter's weights are
    checked against the model as they are loaded (``LaMASPolicy.load_adapter_state``).
    """
    algo = state.get("algo")
    if not isinstance(algo, dict):
        raise CheckpointError(
            f"{path} is not a marft checkpoint: its 'algo' is {type(algo).__name__}, not a dict of the learner's state"
        )
    adapters = algo.get("adapters")
    if not isinstance(adapters, dict) or not all(isinstance(a, str) for a in adapters):
        raise CheckpointError(
            f"{path} is not a marft checkpoint: its 'algo.adapters' is not a dict of adapter names to weights"
        )
    return adapters


class AdaptersMismatch(ValueError):
    """A checkpoint's adapters that do not fit a policy: one it needs is missing, or weights of another shape."""

    def __init__(self, message: str, *, held: list[str], cause: BaseException | None = None):
        super().__init__(message)
        self.held = held
        """The adapters the checkpoint holds, sorted."""
        self.cause = cause
        """What loading an adapter's weights raised (KeyError or RuntimeError); None: an adapter was missing."""


def load_adapters(policy: Policy, path: Path) -> None:
    """Load every one of ``policy``'s adapters from the checkpoint at ``path`` (``init_from``, ``marft eval --run``).

    Raises :class:`CheckpointError` for a file that is not a marft checkpoint and :class:`AdaptersMismatch`
    when an adapter of the policy is missing or its weights do not fit the model: each caller says what to do.
    """
    adapters = adapters_of(load_checkpoint(path), path)
    check_finite_adapters(adapters, path)
    missing = [a for a in policy.adapters if a not in adapters]
    if missing:
        raise AdaptersMismatch(f"{path} has no adapter {missing[0]!r}", held=sorted(adapters))
    try:
        for adapter in policy.adapters:
            policy.load_adapter_state(adapter, adapters[adapter])
    except (KeyError, RuntimeError) as err:
        raise AdaptersMismatch(f"{path}: its adapters do not fit the model", held=sorted(adapters), cause=err) from None


def _previous_hint(path: Path, *, resume: bool = True) -> str:
    older = [p for p in sorted(path.parent.glob("update_*.pt")) if p.name < path.name]
    if older:
        return f"; the previous one is {older[-1]}: point {path.parent / LATEST} at {older[-1].name} to use it"
    return "; no earlier checkpoint is left" + (": start the run again without --resume" if resume else "")
