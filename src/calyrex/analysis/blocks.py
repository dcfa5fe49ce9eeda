"""Measure 5, for a trained adapter: what each block writes and how it spreads its attention.

Read through forward hooks on the blocks themselves. The attention probabilities of a CAL block
are recomputed from its own projections and the span keys of its call (those cached before it
and those it returned: ``CALBlock.forward(h, span, past_kv) → (h'', new_kv)``; SDPA does not
return the probabilities): this is calyrex's block, not HF internals.

Legend: H heads, Hkv kv heads, n response positions, S system span, Dh head dim, D hidden.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from .capture import Encoded
from .stats import RunningStat


def span_keys(past_kv: Any, new_kv: Any) -> torch.Tensor:
    """The span keys a block attended to in one call, row 0: (Hkv, S, Dh), from the K/V cached
    before the call and those of its new span tokens (each (B, Hkv, S_part, Dh) or None)."""
    return torch.cat([kv[0][0] for kv in (past_kv, new_kv) if kv is not None], dim=1)


def span_attention(
    block: nn.Module, h: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor, positions: Any
) -> torch.Tensor:
    """Attention probabilities of ``block`` at ``positions``: (H, n, S), 0 on invisible keys.

    ``h`` (1, T, D) the block's input, ``keys`` (Hkv, S, Dh), ``visible`` (n, S) bool.
    """
    x = block.cal_attn_norm(h[:1])  # (1, T, D)
    q = (
        block.cal_q_proj(x[0, positions]).view(-1, block.heads, block.head_dim).transpose(0, 1)
    )  # (H, n, Dh)
    k = keys.repeat_interleave(block.heads // block.kv_heads, dim=0)  # (H, S, Dh)
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(block.head_dim)  # (H, n, S)
    return torch.softmax(scores.masked_fill(~visible, float("-inf")), -1).nan_to_num(0.0)


def entropy(probs: torch.Tensor, visible: torch.Tensor) -> tuple[float, float]:
    """Mean entropy (nats) of (H, n, S) distributions, and the same over log(#visible keys).

    The normalised entropy is 1 for uniform attention over the span, 0 for one key.
    """
    ent = -(probs * probs.clamp_min(1e-30).log()).sum(-1)  # (H, n)
    keys = visible.sum(-1).clamp_min(2).float().log()  # (n,)
    return float(ent.mean()), float((ent / keys).mean())


class BlockMeter:
    """Per-block summaries over the rule runs: output norm and attention entropy over the span."""

    def __init__(self, model: nn.Module) -> None:
        self.blocks = {int(i): b for i, b in model.cal_blocks.items()}
        self.layers = sorted(self.blocks)
        self.output_norm, self.relative_norm = RunningStat(), RunningStat()
        self.entropy, self.entropy_normalized = RunningStat(), RunningStat()
        self._current: dict[str, dict[int, float]] = {}

    @contextmanager
    def watch(self, run: Encoded) -> Iterator[None]:
        """Hook every block for one forward pass of ``run``; fold the pass in on exit."""
        self._current = {"norm": {}, "rel": {}, "ent": {}, "ent_n": {}}
        handles = [b.register_forward_hook(self._hook(i, run)) for i, b in self.blocks.items()]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
        self._fold()

    def _hook(self, layer: int, run: Encoded):  # noqa: ANN202
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            h = args[0]  # (B, T, D)
            out = output[0] if isinstance(output, tuple) else output  # a CAL block: (h'', new_kv)
            delta = (out[0, run.positions] - h[0, run.positions]).float()  # (n, D)
            norm = delta.norm(dim=-1)  # (n,)
            self._current["norm"][layer] = float(norm.mean())
            self._current["rel"][layer] = float(
                (norm / h[0, run.positions].float().norm(dim=-1)).mean()
            )
            span = args[1] if len(args) > 1 else None
            if getattr(module, "uses_span", False) and span is not None and not span.empty:
                past = args[2] if len(args) > 2 else None
                keys = span_keys(past, output[1])  # (Hkv, S, Dh)
                visible = span.visible[0, run.positions]  # (n, S)
                probs = span_attention(module, h, keys, visible, run.positions)
                self._current["ent"][layer], self._current["ent_n"][layer] = entropy(probs, visible)

        return hook

    def _fold(self) -> None:
        pairs = [(self.output_norm, "norm"), (self.relative_norm, "rel")]
        pairs += [(self.entropy, "ent"), (self.entropy_normalized, "ent_n")]
        for stat, key in pairs:
            values = self._current[key]
            if len(values) == len(self.layers):
                stat.add(torch.tensor([values[i] for i in self.layers]))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"layers": self.layers}
        for name, stat in (
            ("output_norm", self.output_norm),
            ("relative_output_norm", self.relative_norm),
            ("attention_entropy", self.entropy),
            ("attention_entropy_normalized", self.entropy_normalized),
        ):
            out[name] = stat.to_dict() if stat.count else None
        return out
