"""Where a run's model and tensors live (``device``): ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

``auto`` is the first GPU when torch sees one (``torch.cuda.is_available()``), else the CPU. A device
that is not there (``cuda`` on a machine without one, ``cuda:3`` on a machine with two) is refused
in one line before any model loads: :func:`resolve_device` raises a ValueError naming what to use.
The base model, every adapter, the critics, the reference pass, the hf engine and every tensor the
rollout, the scoring and the update make live on the resolved device; checkpoints hold CPU tensors.
"""

from __future__ import annotations

import re

import torch

DEVICE_SPELLING = re.compile(r"auto|cpu|cuda(:\d+)?")
"""The values ``device`` accepts (matched whole)."""
DEVICE_CHOICES = '"auto", "cpu", "cuda" or "cuda:N"'
"""How the error names them."""


def resolve_device(name: str, *, cuda_available: bool | None = None, cuda_count: int | None = None) -> torch.device:
    """The ``torch.device`` for a ``device`` value; a ValueError (one line) for a misspelt or absent device.

    ``cuda_available`` and ``cuda_count`` default to what torch sees on this machine (tests pass them).
    """
    if not isinstance(name, str) or not DEVICE_SPELLING.fullmatch(name):
        raise ValueError(f"device must be {DEVICE_CHOICES}, got {name!r}")
    available = torch.cuda.is_available() if cuda_available is None else cuda_available
    if name == "auto":
        return torch.device("cuda" if available else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if not available:
        raise ValueError(
            f"device={name}: torch sees no CUDA device on this machine (torch {torch.__version__}); use device=cpu or "
            "device=auto"
        )
    count = torch.cuda.device_count() if cuda_count is None else cuda_count
    index = int(name.split(":")[1]) if ":" in name else 0
    if index >= count:
        raise ValueError(
            f"device={name}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}; use one of them"
        )
    return torch.device("cuda", index)


def bf16_native(device: torch.device) -> bool:
    """Whether ``device`` is a GPU that computes in bfloat16 natively (Ampere and later); False on a CPU."""
    return device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
