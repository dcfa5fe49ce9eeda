"""Clocks, memory meters and the machine description every figure is printed with.

Activation memory is "peak during the measured region minus what was held before it":
- on CUDA, ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``;
- on CPU, ``torch.profiler`` with ``profile_memory=True`` records every allocation and free of
  the CPU allocator; the running sum of those events, in time order, peaks at the same number.
  The profiler slows the run down, so memory is measured in its own pass, never while timing.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

import torch


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """(seconds, result) of one call, with the device drained before and after."""
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return time.perf_counter() - start, result


def median_time(fn: Callable[[], Any], device: torch.device, repeats: int, warmup: int) -> float:
    """Median seconds of ``repeats`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    return statistics.median(timed(fn, device)[0] for _ in range(max(1, repeats)))


def _cpu_peak_bytes(fn: Callable[[], Any]) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    ]
    live = peak = 0
    for _, nbytes in sorted(events):  # allocations are positive, frees negative
        live += nbytes
        peak = max(peak, live)
    return peak


def peak_bytes(fn: Callable[[], Any], device: torch.device) -> int:
    """Bytes allocated at the peak of ``fn`` beyond what was already held when it started."""
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        sync(device)
        return torch.cuda.max_memory_allocated(device) - before
    return _cpu_peak_bytes(fn)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    """Where and with what the figures were measured."""
    info: dict[str, Any] = {
        "device": str(device),
        "dtype": str(dtype).removeprefix("torch."),
        "cpu": _cpu_name(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        **{name: _version(name) for name in ("torch", "transformers", "peft", "calyrex")},
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info
