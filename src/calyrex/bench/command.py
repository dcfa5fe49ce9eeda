"""``calyrex bench``: the options are this function's signature (see calyrex/cli.py)."""

from __future__ import annotations

from .config import BenchConfig


def bench(
    shape: str | None = None,
    model: str | None = None,
    preset: str | None = None,
    quick: bool = False,
    sections: list[str] | None = None,
    device: str | None = None,
    dtype: str | None = None,
    placement: str = "late8th",
    train_batch: int | None = None,
    train_tokens: int | None = None,
    train_system: int | None = None,
    train_labelled: int | None = None,
    train_steps: int | None = None,
    system_tokens: int | None = None,
    conversation_tokens: int | None = None,
    decode_steps: int | None = None,
    repeats: int | None = None,
    scaling_lengths: list[int] | None = None,
    scaling_span: int | None = None,
    decode_contexts: list[int] | None = None,
    shared_batch: int | None = None,
    shared_system: int | None = None,
    shared_conversation: int | None = None,
    serve_model: str | None = None,
    serve_system: int | None = None,
    serve_tokens: int | None = None,
    serve_streams: list[int] | None = None,
    serve_requests: int | None = None,
    serve_rounds: int | None = None,
    serve_time_limit: float | None = None,
    threads: int | None = None,
    json: str | None = None,
) -> int:
    """Measure CALYREX vs LoRA / ParallelMLP (training) and vs the base model (inference).

    Backbones of real shape with random weights (--shape qwen2.5-0.5b | qwen2.5-1.5b | tiny),
    or a real model in their place (--model smollm2 | ruleworld | a directory | a hub id).
    --dtype auto (the default on CPU: bf16 where this CPU is fast at it, else fp32) | float32 |
    bfloat16 (the default on CUDA) | float16. --preset full (the issue's sizes, default on
    CUDA) | cpu (default without CUDA) | quick (tiny, seconds); any size flag overrides the
    preset. --sections picks from train, inference, scaling, shared (the default: all four)
    and serve (calyrex serve on loopback: --serve-model ruleworld|tiny, --serve-system,
    --serve-tokens, --serve-streams, --serve-requests, --serve-rounds, --serve-time-limit).
    --json FILE writes every figure.
    """
    options = {k: v for k, v in locals().items() if k not in ("quick", "threads", "json")}
    import torch

    from .report import show, write_json
    from .run import run_bench

    if threads:
        torch.set_num_threads(threads)
    if quick:
        options["preset"] = "quick"
    if sections is None:
        del options["sections"]
    results = run_bench(BenchConfig(**options))
    show(results)
    if json:
        write_json(results, json)
    return 0
