"""The CAL cache: the system-span keys/values of the CAL blocks, kept across forward calls.

Legend: B batch, T tokens in this forward call, S span keys (compact, padded to the batch's
longest), Hkv kv heads, Dh head dim, W tokens of the sequence covered so far.

- :class:`CALCache` is to the CAL blocks what the HF cache is to self-attention: per block the
  keys/values of the span tokens seen so far, their **absolute** positions in the sequence (the
  only coordinates it keeps) and how many tokens of the sequence it covers. It lives on the HF
  cache object the caller owns (``cache.calyrex``), so it is copied, pickled and dropped with it.
  Its batch operations (:meth:`~CALCache.select`, :meth:`~CALCache.repeat`,
  :meth:`~CALCache.shift`, :meth:`~CALCache.cat`) are what beam search, a server's running
  batch and a system prompt shared by many conversations need.
- :class:`SpanCall` is what the blocks of one forward call read: where the call's new span
  tokens are, the span-causal visibility, the rows that see a key. :meth:`CALCache.begin` builds
  it once per call (``CalyrexModel.forward``); it is immutable and travels as an argument. A block
  returns the keys/values of the call's new span tokens and its layer appends them
  (:meth:`CALCache.append`): no block writes into the cache.

The CAL cache follows what happened to the HF cache since the previous call, by its length:
a prefill (length 0: a fresh, reset or reused cache) starts over; a shorter cache (``crop``, as
assisted decoding does) drops the keys past the cut; a longer one (tokens appended by something
else) adds no span; a batch ``k`` times larger (``batch_repeat_interleave``, beams) repeats rows.
Beam search's ``reorder_cache`` permutes rows within a prompt's beams, whose span keys are equal.
Selecting rows (``batch_select_indices``) cannot be inferred: use :func:`batch_select_indices`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from .mask import rows_with_keys, span_causal_mask, span_indices

CACHE_ATTR = "calyrex"  # the attribute of an HF cache that holds its CALCache
KV = tuple[torch.Tensor, torch.Tensor]  # K, V: (B, Hkv, S, Dh) each


@dataclass(frozen=True)
class SpanCall:
    """The system span as seen by the queries of one forward call (built by :meth:`CALCache.begin`)."""

    keys_before: int  # span keys cached before this call (the blocks get their K/V as past_kv)
    gather_idx: torch.Tensor | None  # (B, S_new) positions in this call of its new span tokens
    key_pos: torch.Tensor  # (B, S) absolute positions of every span key after this call
    key_valid: torch.Tensor  # (B, S) bool
    visible: torch.Tensor  # (B, T, S) bool, the span-causal mask
    has_key: torch.Tensor  # (B, T) bool, rows that see at least one key
    length: int  # W: tokens of the sequence covered once this call is done
    empty: bool  # no query of the batch sees any key: every block is the identity
    full: bool  # every query sees every key of its row: no mask, no row left unchanged


@dataclass
class CALCache:
    """The CAL keys/values of a batch of sequences, and the absolute span positions they come from."""

    key_pos: torch.Tensor  # (B, S) absolute positions of the span tokens
    key_valid: torch.Tensor  # (B, S) bool
    kv: dict[int, KV] = field(default_factory=dict)  # layer → K, V (B, Hkv, S, Dh)
    length: int = 0  # W: tokens of the sequence covered so far
    all_valid: bool = True  # no row pads its span: decode steps need no mask

    @classmethod
    def fresh(cls, batch: int, device: torch.device) -> CALCache:
        empty = torch.zeros(batch, 0, dtype=torch.long, device=device)
        return cls(empty, empty.bool())

    @property
    def batch(self) -> int:
        return self.key_pos.shape[0]

    # -- one forward call ----------------------------------------------------------------------
    def begin(
        self, system_mask: torch.Tensor | None, past: int, length: int, batch: int
    ) -> SpanCall:
        """Follow the HF cache to ``past`` tokens and take in a call of ``length`` tokens.

        ``system_mask`` (B, T) marks this call's span tokens (None: none); their absolute
        positions ``past + j`` join the cache's keys. Returns the call's :class:`SpanCall`.
        """
        if past == 0:
            self._take(CALCache.fresh(batch, self.key_pos.device))
        elif past < self.length:
            self._crop(past)
        if batch != self.batch:
            self._take(self._repeated_to(batch))
        keys_before = self.key_pos.shape[1]
        gather = None
        if system_mask is not None:
            rows = system_mask.repeat_interleave(batch // system_mask.shape[0], 0)  # (B, T)
            idx, valid = span_indices(rows)  # (B, S_new), call positions
            if idx.shape[1]:  # this call brings span tokens (a prefill, or a chunk of one)
                gather = idx
                self.key_pos = torch.cat([self.key_pos, idx + past], dim=1)  # absolute
                self.key_valid = torch.cat([self.key_valid, valid], dim=1)
                self.all_valid = bool(self.key_valid.all())  # one host sync per span chunk
        self.length = past + length
        query_pos = torch.arange(past, past + length, device=self.key_pos.device)  # (T,)
        visible = span_causal_mask(query_pos.expand(batch, length), self.key_pos, self.key_valid)
        has_key = rows_with_keys(visible)  # (B, T)
        spans = self.key_pos.shape[1] > 0
        if gather is None:  # every cached key precedes every query: known without a sync
            empty, full = not spans, spans and self.all_valid
        else:  # a host sync per chunk with span, not per step
            empty, full = not bool(has_key.any()), False
        return SpanCall(
            keys_before=keys_before,
            gather_idx=gather,
            key_pos=self.key_pos,
            key_valid=self.key_valid,
            visible=visible,
            has_key=has_key,
            length=self.length,
            empty=empty,
            full=full,
        )

    def past_kv(self, layer: int, call: SpanCall) -> KV | None:
        """The keys/values of ``layer`` cached before ``call``: 2 × (B, Hkv, keys_before, Dh)."""
        kv = self.kv.get(layer)
        if kv is None or not call.keys_before:
            return None
        if kv[0].shape[2] == call.keys_before:  # a decode step: every cached key, as it is
            return kv
        return kv[0][:, :, : call.keys_before], kv[1][:, :, : call.keys_before]

    def append(self, layer: int, call: SpanCall, new: KV) -> None:
        """Append the K/V ``new`` (B, Hkv, S_new, Dh) that ``layer``'s block computed in ``call``.

        Idempotent: re-running the same call (activation checkpointing of a whole layer
        recomputes it in backward) rewrites the same entries instead of appending them twice.
        """
        past = self.past_kv(layer, call)
        if past is not None:
            new = tuple(
                torch.cat([p.to(n.dtype), n], dim=2) for p, n in zip(past, new, strict=True)
            )
        self.kv[layer] = new

    # -- rows: beams, a server's running batch, a shared system prompt --------------------------
    def select(self, rows: torch.Tensor) -> CALCache:
        """The cache of rows ``rows`` (B',) long, in that order."""
        out = self._mapped(lambda t: t[rows.to(t.device)])
        out.all_valid = bool(out.key_valid.all())  # a padded row may have left
        return out

    def repeat(self, n: int) -> CALCache:
        """Each row ``n`` times in a row (``batch_repeat_interleave``). A one-row cache (one
        system prompt shared by ``n`` conversations) is viewed ``n`` times: one copy in memory."""
        if n == 1:
            return self._mapped(lambda t: t)
        if self.batch == 1:
            return self._mapped(lambda t: t.expand(n, *t.shape[1:]))
        return self._mapped(lambda t: t.repeat_interleave(n, dim=0))

    def shift(self, offset: int) -> CALCache:
        """The same keys with ``offset`` tokens put before the sequence (left padding added;
        negative: removed). Only positions move; the keys/values do not depend on them."""
        out = self._mapped(lambda t: t)
        out.key_pos, out.length = self.key_pos + offset, self.length + offset
        return out

    @classmethod
    def cat(cls, stores: list[CALCache]) -> CALCache:
        """The rows of ``stores`` stacked, each span padded on the right to the longest with
        invalid keys (zero K/V); every store must cover the same ``length``."""
        if len({s.length for s in stores}) != 1:
            raise ValueError(f"CAL caches of different lengths {[s.length for s in stores]}")
        width = max(s.key_pos.shape[1] for s in stores)
        like = next((s.kv for s in stores if s.kv), {})  # the blocks' K/V geometry and dtype
        padded = [s._padded(width, like) for s in stores]
        return cls(
            key_pos=torch.cat([s.key_pos for s in padded]),
            key_valid=torch.cat([s.key_valid for s in padded]),
            kv={
                i: (
                    torch.cat([s.kv[i][0] for s in padded]),
                    torch.cat([s.kv[i][1] for s in padded]),
                )
                for i in like
            },  # fmt: skip
            length=stores[0].length,
            all_valid=all(s.all_valid for s in padded),
        )

    def _padded(self, width: int, like: dict[int, KV]) -> CALCache:
        """This cache with ``width`` span keys: invalid keys and zero K/V added on the right."""
        pad = width - self.key_pos.shape[1]
        kv = {}
        for i, (k0, _) in like.items():
            empty = k0.new_zeros(self.batch, k0.shape[1], 0, k0.shape[3])  # no K/V: no span
            k, v = self.kv.get(i, (empty, empty))
            kv[i] = (F.pad(k, (0, 0, 0, pad)), F.pad(v, (0, 0, 0, pad)))  # (B, Hkv, S, Dh)
        key_pos, key_valid = F.pad(self.key_pos, (0, pad)), F.pad(self.key_valid, (0, pad))
        return CALCache(key_pos, key_valid, kv, self.length, self.all_valid and not pad)

    def _mapped(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> CALCache:
        """A new cache with ``fn`` applied to every per-row tensor."""
        kv = {layer: (fn(k), fn(v)) for layer, (k, v) in self.kv.items()}
        return CALCache(fn(self.key_pos), fn(self.key_valid), kv, self.length, self.all_valid)

    # -- following the HF cache ----------------------------------------------------------------
    def _take(self, other: CALCache) -> None:
        self.key_pos, self.key_valid, self.kv = other.key_pos, other.key_valid, other.kv
        self.length, self.all_valid = other.length, other.all_valid

    def _crop(self, length: int) -> None:
        """The HF cache was cut to ``length`` tokens: span keys at or past the cut are gone."""
        self.key_valid = self.key_valid & (self.key_pos < length)
        self.all_valid = bool(self.key_valid.all())
        self.length = length

    def _repeated_to(self, batch: int) -> CALCache:
        if batch % self.batch:
            raise ValueError(
                f"the cache now has {batch} rows but its CAL keys/values have {self.batch}: rows "
                "were selected without calyrex; use calyrex.core.cal_cache.batch_select_indices(cache, "
                "idx)"
            )
        return self.repeat(batch // self.batch)


def cal_cache(cache: Any) -> CALCache | None:
    """The CAL keys/values an HF cache carries (None if no calyrex model filled it)."""
    return getattr(cache, CACHE_ATTR, None)


def attach(cache: Any, store: CALCache) -> None:
    """Make ``store`` the CAL cache of HF ``cache`` unless it has one (None: no HF cache)."""
    if cache is not None and cal_cache(cache) is None:
        setattr(cache, CACHE_ATTR, store)


def for_call(cache: Any, batch: int, past: int, device: torch.device) -> CALCache:
    """The CAL cache a call extends: ``cache``'s own (made and attached on its first call), or,
    without an HF cache, one for this call alone."""
    store = cal_cache(cache)
    if store is None:
        if past > 0:
            raise ValueError(
                f"this cache holds {past} tokens but no CAL keys/values: it was not filled by "
                "a calyrex model, so its system span is unknown"
            )
        store = CALCache.fresh(batch, device)
        attach(cache, store)
    return store


def batch_select_indices(cache: Any, indices: torch.Tensor) -> Any:
    """``cache.batch_select_indices(indices)`` for the backbone and the CAL keys/values alike."""
    cache.batch_select_indices(indices)
    store = cal_cache(cache)
    if store is not None:
        setattr(cache, CACHE_ATTR, store.select(indices))
    return cache


def batch_repeat_interleave(cache: Any, repeats: int) -> Any:
    """``cache.batch_repeat_interleave(repeats)`` for the backbone and the CAL keys/values alike."""
    cache.batch_repeat_interleave(repeats)
    store = cal_cache(cache)
    if store is not None:
        setattr(cache, CACHE_ATTR, store.repeat(repeats))
    return cache


def share_prefix(cache: Any, rows: int) -> Any:
    """One system prompt, many conversations: the cache of a one-row prefill of the prompt made
    the start of ``rows`` conversations, in place. The backbone's K/V are repeated per row (each
    grows on its own as it decodes); the CAL K/V, a function of the span only, are viewed::

        out = model(input_ids=prompt_ids, system_mask=prompt_mask, use_cache=True)  # (1, P)
        cache = share_prefix(hf.output_cache(out), 32)
        out = model(input_ids=conversations, cache=cache, use_cache=True)  # (32, T)
    """
    store = cal_cache(cache)
    if store is None:
        raise ValueError("this cache was not produced by a calyrex model: no system keys/values")
    if store.batch != 1:
        raise ValueError(f"only a one-row prefill can be shared, got {store.batch} rows")
    return batch_repeat_interleave(cache, rows)
