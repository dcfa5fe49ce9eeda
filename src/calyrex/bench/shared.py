"""Shared system prompt: a batch of conversations under one system prompt, prefilled naively
(every row recomputes the prompt) vs with the prompt computed once and its cache shared
(``calyrex.core.cal_cache.share_prefix``).

Two figures: the whole prefill of the batch, and the CAL keys/values alone (per row vs once).

Legend: B batch, P prompt tokens (header + system span), C conversation tokens per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import calyrex
from calyrex.core import hf
from calyrex.core.cal_cache import share_prefix

from .data import HEADER, token_batch, with_cache
from .measure import median_time


@dataclass
class SharedCase:
    batch: int
    system: int
    conversation: int
    repeats: int


def _span_kv_seconds(
    model: calyrex.CalyrexModel, x: torch.Tensor, idx: torch.Tensor, rows: int, device: torch.device
) -> float:
    """Seconds to compute every block's span K/V for ``rows`` rows (sharing: 1 row, expanded)."""

    def run() -> None:
        for block in model.cal_blocks.values():
            k, v = block.span_kv(x[:rows], idx[:rows])  # (rows, Hkv, S, Dh)
            k.expand(x.shape[0], -1, -1, -1), v.expand(x.shape[0], -1, -1, -1)

    return median_time(run, device, 5, warmup=1)


@torch.no_grad()
def run(
    backbone: nn.Module, cal: calyrex.CalyrexConfig, case: SharedCase, device: torch.device
) -> dict[str, Any]:
    prompt = HEADER + case.system + 1  # header, system content, end-of-turn
    vocab = backbone.config.vocab_size
    ids, system_mask = token_batch(
        case.batch, prompt + case.conversation, case.system, vocab, device
    )
    ids[:, :prompt] = ids[:1, :prompt]  # one system prompt, a different conversation per row
    model = calyrex.wrap(backbone, cal, seed=0)
    try:
        naive = median_time(
            lambda: model(input_ids=ids, system_mask=system_mask, use_cache=True, logits_to_keep=1),
            device,
            case.repeats,
            warmup=1,
        )

        def shared() -> None:
            out = model(
                input_ids=ids[:1, :prompt],
                system_mask=system_mask[:1, :prompt],
                use_cache=True,
                logits_to_keep=1,
            )  # the prompt, once
            cache = share_prefix(hf.output_cache(out), case.batch)
            model(
                input_ids=ids[:, prompt:],
                use_cache=True,
                logits_to_keep=1,
                **with_cache(model, cache),
            )

        shared_s = median_time(shared, device, case.repeats, warmup=1)
        x = torch.randn(
            case.batch,
            prompt,
            backbone.config.hidden_size,
            device=device,
            dtype=next(backbone.parameters()).dtype,
        )
        idx = torch.arange(HEADER, HEADER + case.system, device=device).expand(case.batch, -1)
        per_row = _span_kv_seconds(model, x, idx, case.batch, device)
        once = _span_kv_seconds(model, x, idx, 1, device)
        blocks = len(model.cal_blocks)
    finally:
        model.remove()
    resolved = cal.resolve(backbone.config)
    kv_bytes = (
        2 * blocks * resolved.num_kv_heads * resolved.head_dim * case.system * x.element_size()
    )
    return {
        "case": vars(case),
        "naive_prefill_s": naive,
        "shared_prefill_s": shared_s,
        "prefill_saving": 1 - shared_s / naive,
        "cal_kv_per_row_s": per_row,
        "cal_kv_once_s": once,
        "cal_kv_saving": 1 - once / per_row,
        "cal_kv_bytes_per_row": kv_bytes * case.batch,
        "cal_kv_bytes_shared": kv_bytes,
    }
