"""The system span of a sequence and the CAL keys/values computed from it.

Legend: B batch, T tokens in this forward call, S system span (compact), Hkv kv heads, Dh head dim.

- :class:`CALCache` is to the CAL blocks what the HF cache is to self-attention: the keys/values
  of the span tokens seen so far (per block), their absolute positions and how many tokens of the
  sequence it covers. It lives on the HF cache object the caller owns (``cache.calyrex``), so it
  is copied, pickled and dropped with it, and two calls never share one unless they share a cache.
- :class:`SpanStep` is what the blocks of one forward call need: where the call's new span
  tokens are (to compute their keys/values once), the span-causal visibility, the rows that see
  a key. The lowest span-reading layer of the model opens the step; the others read it.

The CAL cache follows what happened to the HF cache since the previous call, by its length:
a prefill (length 0: a fresh, reset or reused cache) starts over; a shorter cache (``crop``, as
assisted decoding does) drops the keys past the cut; a longer one (tokens appended by something
else) adds no span; a batch ``k`` times larger (``batch_repeat_interleave``, beams) repeats rows.
Beam search's ``reorder_cache`` permutes rows within a prompt's beams, whose span keys are equal.
Selecting rows (``batch_select_indices``) cannot be inferred: use :func:`batch_select_indices`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .mask import rows_with_keys, span_causal_mask, span_indices

CACHE_ATTR = "calyrex"  # the attribute of an HF cache that holds its CALCache


@dataclass
class SpanStep:
    """The system span as seen by the queries of one forward call."""

    store: CALCache
    keys_before: int  # span keys cached before this call (their K/V are in ``store.kv``)
    gather_idx: torch.Tensor | None  # (B, S_new) positions in this call of new span tokens
    visible: torch.Tensor  # (B, T, S) bool, the span-causal mask
    has_key: torch.Tensor  # (B, T) bool, rows that see at least one key
    empty: bool  # no query of the batch sees any key: every block is the identity
    full: bool  # every query sees every key of its row: no mask, no row left unchanged


@dataclass
class CALCache:
    """The CAL keys/values of a batch of sequences, and the span positions they come from."""

    key_pos: torch.Tensor  # (B, S) absolute positions of the span tokens
    key_valid: torch.Tensor  # (B, S) bool
    kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # layer → K, V
    length: int = 0  # tokens of the sequence covered so far
    all_valid: bool = True  # no row pads its span: decode steps need no mask
    step: SpanStep | None = None  # the forward call in progress

    @classmethod
    def fresh(cls, batch: int, device: torch.device) -> CALCache:
        empty = torch.zeros(batch, 0, dtype=torch.long, device=device)
        return cls(empty, empty.bool())

    @property
    def batch(self) -> int:
        return self.key_pos.shape[0]

    def begin(self, new_span: torch.Tensor | None, past: int, length: int, batch: int) -> SpanStep:
        """Open the step of a call of ``length`` tokens after ``past``; ``new_span`` (B, T) or None."""
        if past == 0:
            self._restart(batch)
        elif past < self.length:
            self._crop(past)
        self._follow_rows(batch)
        keys_before = self.key_pos.shape[1]
        gather = None
        if new_span is not None:
            idx, valid = span_indices(new_span.repeat_interleave(batch // new_span.shape[0], 0))
            if idx.shape[1]:  # this call brings span tokens (a prefill, or a chunk of one)
                gather = idx
                self.key_pos = torch.cat([self.key_pos, idx + past], dim=1)
                self.key_valid = torch.cat([self.key_valid, valid], dim=1)
                self.all_valid = bool(self.key_valid.all())  # one host sync per span chunk
        self.length = past + length
        query_pos = torch.arange(past, past + length, device=self.key_pos.device)
        visible = span_causal_mask(query_pos.expand(batch, length), self.key_pos, self.key_valid)
        has_key = rows_with_keys(visible)  # (B, T)
        spans = self.key_pos.shape[1] > 0
        if gather is None:  # every cached key precedes every query: known without a sync
            step = SpanStep(self, keys_before, None, visible, has_key, not spans, False)
            step.full = spans and self.all_valid
        else:
            step = SpanStep(self, keys_before, gather, visible, has_key, False, False)
            step.empty = not bool(has_key.any())  # a host sync per chunk with span, not per step
        self.step = step
        return step

    def update(
        self, layer: int, keys_before: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append one call's new span keys/values (B, Hkv, S_new, Dh) for ``layer``; idempotent.

        Re-running the same call (activation checkpointing recomputes it in backward) rewrites the
        same entries instead of appending them twice.
        """
        old = self.kv.get(layer)
        if old is not None and keys_before:
            k = torch.cat([old[0][:, :, :keys_before].to(k.dtype), k], dim=2)
            v = torch.cat([old[1][:, :, :keys_before].to(v.dtype), v], dim=2)
        self.kv[layer] = (k, v)
        return k, v

    # -- following the HF cache ----------------------------------------------------------------
    def _restart(self, batch: int) -> None:
        device = self.key_pos.device
        self.key_pos = torch.zeros(batch, 0, dtype=torch.long, device=device)
        self.key_valid = self.key_pos.bool()
        self.kv, self.length, self.all_valid = {}, 0, True

    def _crop(self, length: int) -> None:
        """The HF cache was cut to ``length`` tokens: span keys at or past the cut are gone."""
        self.key_valid = self.key_valid & (self.key_pos < length)
        self.all_valid = bool(self.key_valid.all())
        self.length = length

    def _follow_rows(self, batch: int) -> None:
        if batch == self.batch:
            return
        if batch % self.batch:
            raise ValueError(
                f"the cache now has {batch} rows but its CAL keys/values have {self.batch}: rows "
                "were selected without calyrex; use calyrex.span.batch_select_indices(cache, idx)"
            )
        self.repeat(batch // self.batch)

    def repeat(self, n: int) -> None:
        """Each row ``n`` times (``batch_repeat_interleave``); a single row is shared as views."""
        if n == 1:
            return
        if self.batch == 1:  # one prompt, many conversations: one copy in memory
            self._map_rows(lambda t: t.expand(n, *t.shape[1:]))
        else:
            self._map_rows(lambda t: t.repeat_interleave(n, dim=0))

    def select(self, indices: torch.Tensor) -> None:
        self._map_rows(lambda t: t[indices.to(t.device)])

    def _map_rows(self, fn: Any) -> None:
        self.key_pos, self.key_valid = fn(self.key_pos), fn(self.key_valid)
        self.kv = {layer: (fn(k), fn(v)) for layer, (k, v) in self.kv.items()}
        self.step = None


def cal_cache(cache: Any) -> CALCache | None:
    """The CAL keys/values an HF cache carries (None if no calyrex model filled it)."""
    return getattr(cache, CACHE_ATTR, None)


def batch_select_indices(cache: Any, indices: torch.Tensor) -> Any:
    """``cache.batch_select_indices(indices)`` for the backbone and the CAL keys/values alike."""
    cache.batch_select_indices(indices)
    store = cal_cache(cache)
    if store is not None:
        store.select(indices)
    return cache


def batch_repeat_interleave(cache: Any, repeats: int) -> Any:
    """``cache.batch_repeat_interleave(repeats)`` for the backbone and the CAL keys/values alike."""
    cache.batch_repeat_interleave(repeats)
    store = cal_cache(cache)
    if store is not None:
        store.repeat(repeats)
    return cache
