"""``calyrex bench``: one flag per :class:`BenchConfig` field, plus --quick, --threads, --json."""

from __future__ import annotations

from typing import Any

from ..cli.fields import options_from
from .config import BenchConfig


@options_from(BenchConfig)
def bench(
    quick: bool = False, threads: int | None = None, json: str | None = None, **options: Any
) -> int:
    """Measure CALYREX vs LoRA / ParallelMLP (training) and vs the base model (inference).

    Backbones of real shape with random weights (--shape), or a real model in their place
    (--model); every size comes from --preset unless given.

    Args:
        quick: Tiny sizes that run end to end in seconds (--preset quick).
        threads: torch's CPU threads (unset: torch's default).
        json: Write every figure to this JSON file.
        options: :class:`BenchConfig` fields, one flag each (None: unset).
    """
    import torch

    from .report import show, write_json
    from .run import run_bench

    options = {k: v for k, v in options.items() if v is not None}
    if quick:
        options["preset"] = "quick"
    if threads:
        torch.set_num_threads(threads)
    results = run_bench(BenchConfig(**options))
    show(results)
    if json:
        write_json(results, json)
    return 0
