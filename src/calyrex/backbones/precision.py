"""``auto`` precision: bf16 where this machine computes it fast, fp32 elsewhere, with the reason.

On CUDA: bf16 when the GPU supports it. On CPU bf16 is decided by measurement, not assumed: a
CPU with AMX / AVX512-BF16 runs a bf16 matmul several times faster than fp32, while an AVX2-only
CPU emulates bf16 and runs it hundreds of times *slower*. The CPU flags are read and a small
matmul is timed in both dtypes (well under a second even where bf16 is emulated).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}  # torch's names
# a --dtype flag's values: auto or torch's name of a dtype (its choices in --help)
Dtype = Literal[("auto", *ALIASES)]
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
MIN_SPEEDUP = 1.2  # bf16 must beat fp32 by this much to be chosen on CPU


@dataclass(frozen=True)
class Choice:
    """The precision chosen (``fp32`` | ``bf16`` | ``fp16``) and why."""

    precision: str
    reason: str

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.precision]


def cpu_flags() -> set[str]:
    """The bf16-related flags of this CPU (empty where ``/proc/cpuinfo`` is not readable)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    words = set(text.split())
    return {flag for flag in BF16_FLAGS if flag in words}


def matmul_speedup(size: int = 256, repeats: int = 3, trials: int = 5) -> float:
    """fp32 time ÷ bf16 time of a ``size``² matmul on this CPU (> 1: bf16 is faster). Each time
    is the best of ``trials``: a single timing of a sub-millisecond product is at the mercy of
    one preemption, and a busy machine then flipped ``auto`` from one process to the next."""

    def timed(dtype: torch.dtype) -> float:
        a = torch.randn(size, size).to(dtype)
        a @ a  # warm-up
        best = float("inf")
        for _ in range(trials):
            start = time.perf_counter()
            for _ in range(repeats):
                a @ a
            best = min(best, time.perf_counter() - start)
        return best

    return timed(torch.float32) / timed(torch.bfloat16)


@functools.cache
def choose(device: str = "cpu") -> Choice:
    """What ``auto`` means on ``device`` (``cpu`` or ``cuda``), measured once per process."""
    if device.startswith("cuda"):
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return Choice("bf16", "the GPU supports bf16")
        return Choice("fp32", "the GPU has no bf16")
    flags = cpu_flags()
    speedup = matmul_speedup()
    measured = f"bf16 matmul {speedup:.2f}× fp32's speed"
    if flags and speedup >= MIN_SPEEDUP:
        return Choice("bf16", f"CPU has {', '.join(sorted(flags))}; {measured}")
    if not flags:
        return Choice("fp32", f"CPU has no {' / '.join(BF16_FLAGS)}; {measured}")
    return Choice("fp32", f"CPU has {', '.join(sorted(flags))} but {measured}")


def agreed(choice: Choice) -> Choice:
    """Rank 0's ``choice`` on every rank of the process group (identity outside one): ``auto`` is
    measured per process, and two ranks of one run must not train in two precisions."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return choice
    names = list(DTYPES)
    device = f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cpu"
    code = torch.tensor([names.index(choice.precision)], device=device)
    dist.broadcast(code, src=0)
    chosen = names[int(code.item())]
    if chosen == choice.precision:
        return choice
    return Choice(chosen, f"rank 0's choice ({choice.precision} was measured on this rank)")


def resolve(precision: str, device: str = "cpu") -> Choice:
    """``precision`` as given (``fp32`` or ``float32`` …), or what ``auto`` picks on ``device``."""
    precision = ALIASES.get(precision, precision)
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    if precision == "auto":
        return choose(device)
    return Choice(precision, "asked for")
