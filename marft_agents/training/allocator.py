"""The C allocator's settings for a training process: freed activation memory goes back to the system.

glibc's malloc serves a block at or above its *mmap threshold* with its own ``mmap`` and returns it
to the system on ``free``; smaller blocks come from the heap, whose freed space the process keeps.
The threshold starts at 128 KiB and is *dynamic*: each freed mmapped block raises it to that block's
size (up to 32 MiB on 64-bit Linux; ``mallopt(3)``, "M_MMAP_THRESHOLD"). A training step allocates
and frees activation buffers of a few MiB, so after the first step they come from the heap, and a
run with several adapters (whose prompts, hence buffers, grow agent by agent) keeps the holes each
one leaves: 4 agents peaked at 1.45x one agent, against 1.29x with the threshold held at 128 KiB
(``benchmarks/memory.py``, docs/real-models.md, "Memory at a training peak").

:func:`hold_mmap_threshold` holds it fixed, in-process, through ``mallopt`` (``ctypes``), which is
what the ``MALLOC_MMAP_THRESHOLD_`` environment variable does when set before the process starts.
It changes no number a run computes, only where freed memory goes. A threshold the user set in the
environment is left alone, and off glibc (macOS, musl) nothing happens.

A run holds it where ``mmap_threshold_kb`` asks (``training/setup.py``; 0, the default, leaves glibc's dynamic
threshold): with activation checkpointing it took E2's peak from 6.8 GB to 1.9 GB (float32). It is not the
default because of its cost: every freed buffer above the threshold is unmapped and the next one is faulted in
afresh. A float32 real-model update (8 chain episodes' collection and a MARFT update, SmolLM2-135M-Instruct) took
1.4x the CPU time of glibc's default (105-123 s against 76-87 s; the learner 1.5-1.7x), and a 16-episode bf16
update with ``gradient_checkpointing`` and 128 KiB held took 67 s (mean of two) against 32 s without either
(``benchmarks/speed.py``, 2026-12-06). ``MALLOC_MMAP_THRESHOLD_`` set before the process starts wins over the key.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the mmap threshold (glibc's ``malloc.h``)."""
DEFAULT_THRESHOLD = 128 * 1024
"""Bytes: glibc's own starting threshold, held fixed (the setting measured at 1.29x above)."""
ENV_VAR = "MALLOC_MMAP_THRESHOLD_"
"""The environment variable through which glibc takes the same setting at start-up."""


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc, or None where the C library is another one (no ``mallopt``/``gnu_get_libc_version``)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018  (only glibc has it; mallopt's numbers are glibc's)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError, TypeError):
        return None
    return libc


def hold_mmap_threshold(threshold: int = DEFAULT_THRESHOLD) -> bool:
    """Hold glibc's mmap threshold at ``threshold`` bytes; True if this call set it.

    False (and nothing changed) where ``MALLOC_MMAP_THRESHOLD_`` is set in the environment (the
    user's choice wins) or the C library is not glibc.
    """
    if threshold <= 0:
        raise ValueError(f"the mmap threshold must be a positive number of bytes, got {threshold!r}")
    if ENV_VAR in os.environ:
        return False
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(threshold)))
