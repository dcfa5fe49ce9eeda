"""Prefill and decode speed of CALYREX vs the base model, and decode step time vs context.

The base model and CALYREX are the same backbone with the CAL hooks off or on; measurements
alternate between the two so that a drifting machine (other jobs, clocks) hits both alike.
Prefill computes logits at the last position only, as ``generate`` does.

Legend: B batch (1 here), T tokens, S system span, C context.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import calyrex

from ..core import hf
from . import flops
from .data import HEADER, token_batch, with_cache
from .measure import timed


@dataclass
class InferenceCase:
    system: int
    conversation: int
    decode_steps: int
    repeats: int
    contexts: list[int]


def _alternate(backbone: nn.Module, cal: calyrex.CalyrexConfig, repeats: int, fn: Callable) -> dict:
    """Median of ``fn(model, with_span)`` per variant, the variants taking turns ``repeats`` times."""
    times: dict[str, list[float]] = {"base": [], "calyrex": []}
    for _ in range(repeats):
        for name in times:
            wrapped = calyrex.wrap(backbone, cal, seed=0) if name == "calyrex" else None
            try:
                times[name].append(fn(wrapped or backbone, wrapped is not None))
            finally:
                if wrapped is not None:
                    wrapped.remove()
    return {name: statistics.median(t) for name, t in times.items()}


def _decode(model: nn.Module, cache: Any, token: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        out = model(input_ids=token, use_cache=True, **with_cache(model, cache))
        token = out.logits[:, -1:].argmax(-1)  # (B, 1)
    cache.crop(-steps)  # back to the prompt, for the next variant


@torch.no_grad()
def prefill_decode(
    backbone: nn.Module, cal: calyrex.CalyrexConfig, case: InferenceCase, device: torch.device
) -> dict[str, Any]:
    tokens = HEADER + case.system + case.conversation
    ids, system_mask = token_batch(1, tokens, case.system, backbone.config.vocab_size, device)
    caches: dict[bool, Any] = {}

    def prefill(model: nn.Module, with_span: bool) -> float:
        extra = {"system_mask": system_mask} if with_span else {}
        seconds, out = timed(
            lambda: model(input_ids=ids, use_cache=True, logits_to_keep=1, **extra), device
        )
        caches[with_span] = hf.output_cache(out)
        return seconds

    def decode(model: nn.Module, with_span: bool) -> float:
        token = ids[:, -1:]
        return timed(lambda: _decode(model, caches[with_span], token, case.decode_steps), device)[0]

    short = {"input_ids": ids[:, : HEADER + 8], "system_mask": system_mask[:, : HEADER + 8]}
    _alternate(
        backbone, cal, 1, lambda m, span: m(**short if span else {"input_ids": short["input_ids"]})
    )  # warm-up
    pre = _alternate(backbone, cal, case.repeats, prefill)
    dec = _alternate(backbone, cal, case.repeats, decode)
    g, resolved = flops.Geometry.of(backbone.config), cal.resolve(backbone.config)
    return {
        "tokens": tokens,
        "system": case.system,
        "decode_steps": case.decode_steps,
        "prefill_tokens_per_s": {k: tokens / v for k, v in pre.items()},
        "decode_tokens_per_s": {k: case.decode_steps / v for k, v in dec.items()},
        "prefill_ratio_vs_base": pre["base"] / pre["calyrex"],
        "decode_ratio_vs_base": dec["base"] / dec["calyrex"],
        "flop_ratio_vs_base": flops.inference_ratio(g, resolved, tokens, case.system),
        "decode_flop_ratio_vs_base": flops.inference_ratio(
            g, resolved, 1, case.system, past=tokens
        ),
        "weight_ratio_vs_base": _weight_ratio(backbone, cal),
    }


def _weight_ratio(backbone: nn.Module, cal: calyrex.CalyrexConfig) -> float:
    """(backbone + CAL) / backbone parameters read per decode step (the embedding is a lookup)."""
    read = sum(p.numel() for p in backbone.parameters()) - (
        0 if backbone.config.tie_word_embeddings else backbone.get_input_embeddings().weight.numel()
    )
    from ..adapters.baselines import cal_budget

    return (read + cal_budget(backbone, cal)) / read


def _grow(cache: Any, backbone: nn.Module, length: int, device: torch.device) -> None:
    """Append random keys/values to every layer until the cache holds ``length`` tokens."""
    cfg = flops.Geometry.of(backbone.config)
    extra = length - cache.get_seq_length()
    dtype = next(backbone.parameters()).dtype
    for layer in range(cfg.layers):
        shape = (1, cfg.kv_heads, extra, cfg.head_dim)
        kv = torch.randn(shape, device=device, dtype=dtype)
        cache.update(kv, kv.clone(), layer)


@torch.no_grad()
def decode_vs_context(
    backbone: nn.Module, cal: calyrex.CalyrexConfig, case: InferenceCase, device: torch.device
) -> list[dict[str, Any]]:
    """Decode step time at growing context: the system prompt is real, the rest random K/V."""
    ids, system_mask = token_batch(
        1, HEADER + case.system, case.system, backbone.config.vocab_size, device
    )
    wrapped = calyrex.wrap(backbone, cal, seed=0)
    cache = hf.output_cache(
        wrapped(input_ids=ids, system_mask=system_mask, use_cache=True, logits_to_keep=1)
    )
    wrapped.remove()
    token, rows = ids[:, -1:], []
    for context in sorted(case.contexts):
        if context < cache.get_seq_length():
            continue
        _grow(cache, backbone, context, device)
        step = _alternate(
            backbone,
            cal,
            case.repeats,
            lambda m, _s: timed(lambda: _decode(m, cache, token, case.decode_steps), device)[0],
        )
        rows.append(
            {
                "context": context,
                **{f"{k}_step_s": v / case.decode_steps for k, v in step.items()},
                "added_step_s": (step["calyrex"] - step["base"]) / case.decode_steps,
            }
        )
    return rows
