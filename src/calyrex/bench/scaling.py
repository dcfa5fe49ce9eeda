"""Time of one CAL block vs sequence length with a fixed system span (should be linear in T),
beside one host decoder layer (causal self-attention: superlinear).

The host layer is timed as the backbone cut to one layer with a one-word vocabulary, so it
runs through HF's own forward; the CAL block is called directly on a (1, T, D) hidden state.

Legend: T tokens, S system span, D hidden.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import calyrex
from calyrex.core.block import CALBlock
from calyrex.core.cal_cache import CALCache

from .data import token_batch
from .measure import median_time


def _one_layer(backbone: nn.Module, device: torch.device, dtype: torch.dtype) -> nn.Module:
    from transformers import AutoModelForCausalLM

    fields = backbone.config.to_dict()
    fields.pop("layer_types", None)  # one entry per layer: rebuilt for the single layer
    cfg = type(backbone.config)(**{**fields, "num_hidden_layers": 1, "vocab_size": 1})
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=dtype)
    return model.eval()


@torch.no_grad()
def block_vs_length(
    backbone: nn.Module,
    cal: calyrex.CalyrexConfig,
    lengths: list[int],
    span: int,
    repeats: int,
    device: torch.device,
) -> list[dict[str, Any]]:
    dtype = next(backbone.parameters()).dtype
    hidden = backbone.config.hidden_size
    block = CALBlock(hidden, cal.resolve(backbone.config)).to(device=device, dtype=dtype).eval()
    for p in (block.cal_o_proj.weight, block.cal_ffn.cal_down_proj.weight):
        p.normal_(std=0.02)  # trained weights, not the zero init (same arithmetic either way)
    host = _one_layer(backbone, device, dtype)
    rows = []
    for length in lengths:
        _, system_mask = token_batch(1, length, span, 1, device)
        h = torch.randn(1, length, hidden, device=device, dtype=dtype)  # (1, T, D)
        call = CALCache.fresh(1, device).begin(system_mask, 0, length, 1)
        cal_s = median_time(lambda h=h, call=call: block(h, call), device, repeats, warmup=1)
        host_s = median_time(
            lambda h=h: host(inputs_embeds=h, use_cache=False, logits_to_keep=1),
            device,
            repeats,
            warmup=1,
        )
        rows.append(
            {
                "tokens": length,
                "span": span,
                "cal_block_s": cal_s,
                "cal_block_us_per_token": 1e6 * cal_s / length,
                "host_layer_s": host_s,
                "host_layer_us_per_token": 1e6 * host_s / length,
            }
        )
    return rows


def linearity(rows: list[dict[str, Any]], key: str) -> float:
    """Time growth over token growth from the shortest to the longest length (1.0 = linear)."""
    first, last = rows[0], rows[-1]
    return (last[key] / first[key]) / (last["tokens"] / first["tokens"])
