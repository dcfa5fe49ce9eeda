"""Iteration-level batching: conversations of different lengths decode together, step by step.

A request is prefilled on its own (one row); its cache then joins the running batch. Rows are
**left-padded** to the batch's length ``L``:

    row 0   · · k k k k k      attention_mask 0 0 1 1 1 1 1   position of the next token: 5
    row 1   k k k k k k k                     1 1 1 1 1 1 1                               7

- backbone K/V: zeros on the left, masked out by the attention mask;
- CAL K/V: the CAL cache's own row operations (``calyrex.core.cal_cache``): padded along the span
  to the longest span (``key_valid`` False), span positions shifted by the row's padding (every
  cached span key precedes every decode query, so only their order matters);
- each decode step passes every row's own position (``position_ids``), so RoPE and the span
  see what they would see with the row alone: outputs equal one-by-one decoding up to float
  reduction order.

A finished or cancelled row leaves by row selection; columns that are padding in every remaining
row are dropped. Rows join and leave only between steps.

Legend: B rows, L padded length, S span keys (padded), Hkv kv heads, Dh head dim, V vocab.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..core import hf
from ..core.cal_cache import CALCache, attach, cal_cache


def _rebuild(cache: Any, fn: Any, store: CALCache | None) -> Any:
    """A new HF cache with ``fn`` applied to every backbone K/V, carrying the CAL cache ``store``."""
    new = hf.cache_from_kv([(fn(k), fn(v)) for k, v in hf.cache_kv(cache)])
    if store is not None:
        attach(new, store)
    return new


def concat(caches: list[Any]) -> Any:
    """Stack caches of equal length along the batch (CAL spans padded to the longest)."""
    layers = zip(*(hf.cache_kv(c) for c in caches), strict=True)
    new = hf.cache_from_kv(
        [(torch.cat([k for k, _ in kv]), torch.cat([v for _, v in kv])) for kv in layers]
    )
    stores = [cal_cache(c) for c in caches]
    if all(s is not None for s in stores):
        attach(new, CALCache.cat(stores))
    return new


def left_pad(cache: Any, pad: int) -> Any:
    """``cache`` with ``pad`` empty positions before its first token."""
    store = cal_cache(cache)
    return _rebuild(
        cache, lambda t: F.pad(t, (0, 0, pad, 0)), None if store is None else store.shift(pad)
    )


class DecodeBatch:
    """The running batch: one padded cache, its attention mask and every row's real length."""

    def __init__(self) -> None:
        self.cache: Any = None
        self.mask: torch.Tensor | None = None  # (B, L) long, 0 on left padding
        self.lengths: list[int] = []  # real tokens per row

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def width(self) -> int:
        return 0 if self.mask is None else self.mask.shape[1]

    def add(self, cache: Any, length: int) -> None:
        """Append a prefilled one-row cache of ``length`` tokens as the last row."""
        device = hf.cache_kv(cache)[0][0].device
        row_mask = torch.ones(1, length, dtype=torch.long, device=device)
        if not self.lengths:
            self.cache, self.mask, self.lengths = cache, row_mask, [length]
            return
        width = max(self.width, length)
        old, new = left_pad(self.cache, width - self.width), left_pad(cache, width - length)
        self.cache = concat([old, new])
        self.mask = torch.cat(
            [F.pad(self.mask, (width - self.width, 0)), F.pad(row_mask, (width - length, 0))]
        )
        self.lengths.append(length)

    def keep(self, rows: list[int]) -> None:
        """Keep only ``rows`` (in this order); drop columns that are padding in all of them."""
        if not rows:
            self.cache, self.mask, self.lengths = None, None, []
            return
        if rows == list(range(len(self))):
            return
        lengths = [self.lengths[i] for i in rows]
        cut = self.width - max(lengths)  # leading columns no remaining row uses
        idx = torch.tensor(rows, device=self.mask.device)
        store = cal_cache(self.cache)
        store = None if store is None else store.select(idx).shift(-cut)
        self.cache = _rebuild(self.cache, lambda t: t[idx, :, cut:], store)
        self.mask, self.lengths = self.mask[idx, cut:], lengths

    @torch.no_grad()
    def step(self, model: Any, tokens: torch.Tensor) -> torch.Tensor:
        """Forward one token per row ``tokens`` (B,); returns the next-token logits (B, V)."""
        mask = F.pad(self.mask, (0, 1), value=1)  # (B, L + 1)
        positions = torch.tensor(self.lengths, device=mask.device)[:, None]  # (B, 1)
        out = model(
            input_ids=tokens[:, None],
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            **hf.cache_kwargs(model, self.cache),
        )
        self.cache = hf.output_cache(out)
        self.mask, self.lengths = mask, [n + 1 for n in self.lengths]
        return out.logits[:, -1].float()
