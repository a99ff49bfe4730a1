"""What this CPU (or the run's GPU) does natively, and the base model's dtype that follows from it (``dtype=auto``).

bfloat16 halves the memory a base model's weights take, and on CPUs with native bf16 arithmetic
(AVX-512 BF16, AMX) it also runs faster for a real model; elsewhere PyTorch emulates it and it is several times
*slower* than float32 (measured on an AMD EPYC with AVX2 only: an evaluation 3.3 vs 1.2 min, a
first update 672 vs 102 s; docs/real-models.md). So ``dtype=auto`` (the default) picks bfloat16 only where the
CPU has it and the base has at least :data:`AUTO_BF16_MIN_PARAMETERS` parameters, and an
explicit ``dtype=bfloat16`` on a CPU without it warns once. On a GPU, ``auto`` is bfloat16 where the GPU
computes it natively (``marft_agents.models.device.bf16_native``: Ampere and later), float32 elsewhere.
"""

from __future__ import annotations

import functools
import warnings

NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""``/proc/cpuinfo`` flags that mean bf16 matrix arithmetic in hardware."""
AUTO_BF16_MIN_PARAMETERS = 50_000_000
"""The smallest base ``dtype=auto`` loads in bf16. A small model's step is per-op overhead, not arithmetic, so bf16
only rounds it: the embedded ~1 M-parameter model (the demo and the tests) stays exact float32, SmolLM2-135M gains
(``benchmarks/speed.py``)."""
BASE_DTYPES = ("float32", "bfloat16", "auto")
"""Values of ``dtype``: the base model's dtype, or ``auto`` (bfloat16 where the CPU or GPU has native bf16)."""
SLOW_BF16 = (
    "dtype=bfloat16 on a CPU without native bf16 (no avx512_bf16/amx_bf16 flag): bf16 is emulated "
    "here and was 3-6x slower than float32 on such a CPU (docs/real-models.md); use dtype=float32 or dtype=auto"
)


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """This machine's CPU flags (empty where ``/proc/cpuinfo`` cannot be read, e.g. off Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    """Whether the CPU computes bf16 matrix products in hardware."""
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in NATIVE_BF16_FLAGS)


def resolve_dtype(
    dtype: str, *, gpu_bf16: bool | None = None, flags: frozenset[str] | None = None, parameters: int | None = None
) -> str:
    """The dtype a run loads its base in: ``auto`` resolved by the hardware and the base's size, anything else as given.

    ``gpu_bf16``: None for a run on the CPU (its ``flags`` decide); for a run on a GPU, whether that
    GPU computes bf16 natively. ``parameters``: the base's parameter count (None: not known, size not considered).
    """
    if dtype not in BASE_DTYPES:
        raise ValueError(f"dtype must be one of {list(BASE_DTYPES)}, got {dtype!r}")
    native = native_bf16(flags) if gpu_bf16 is None else gpu_bf16
    if dtype == "auto":
        large = parameters is None or parameters >= AUTO_BF16_MIN_PARAMETERS
        return "bfloat16" if native and large else "float32"
    if dtype == "bfloat16" and not native and gpu_bf16 is None:
        _warn_once(SLOW_BF16)
    return dtype


@functools.cache
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def auto_choice(dtype: str, parameters: int, gpu_bf16: bool | None = None) -> str:
    """One line saying what ``dtype=auto`` chose for a base of ``parameters`` and why (printed when a run starts)."""
    where = "this GPU" if gpu_bf16 is not None else "this CPU"
    native = native_bf16() if gpu_bf16 is None else gpu_bf16
    why = (
        f"{where} has no native bf16"
        if not native
        else f"{parameters / 1e6:.0f} M parameters, under {AUTO_BF16_MIN_PARAMETERS // 1_000_000} M"
        if dtype == "float32"
        else f"{where} computes bf16 natively"
    )
    return f"dtype=auto: {dtype} ({why}; dtype=float32 or dtype=bfloat16 to choose)"
