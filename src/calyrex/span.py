"""The system span of one forward pass, shared by every CAL block of the model.

Legend: B batch, T tokens in this forward call, S system span (compact), D hidden.

At prefill the span is read from ``system_mask``; each block then computes its keys/values
from the span once and stores them in :class:`SpanKV`, which travels on the HF cache object,
so every decode step reuses them (architecture.md, "Generation").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .mask import rows_with_keys, span_causal_mask, span_indices


@dataclass
class SpanKV:
    """Per-conversation CAL keys/values: computed at prefill, reused at every decode step."""

    key_pos: torch.Tensor  # (B, S) absolute positions of the span tokens
    key_valid: torch.Tensor  # (B, S) bool
    kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # layer → (K, V)
    all_valid: bool = field(init=False)  # no row pads its span: decode steps need no mask

    def __post_init__(self) -> None:
        self.all_valid = bool(self.key_valid.all())  # one host sync per sequence, not per step


@dataclass
class SpanContext:
    """What a CAL block needs to know about the system span in the current forward call."""

    store: SpanKV
    gather_idx: (
        torch.Tensor | None
    )  # (B, S) positions of span tokens in this call; None = K/V cached
    visible: torch.Tensor  # (B, T, S) bool, the span-causal mask
    has_key: torch.Tensor  # (B, T) bool, rows that see at least one key
    empty: bool  # no query of the batch sees any key: every block is the identity
    full: bool  # every query sees every key of its row: no mask, no row left unchanged

    @classmethod
    def prefill(cls, system_mask: torch.Tensor) -> SpanContext:
        """Span read from ``system_mask`` (B, T) of a call that starts the sequence."""
        idx, valid = span_indices(system_mask)  # (B, S), (B, S)
        batch, length = system_mask.shape
        query_pos = torch.arange(length, device=system_mask.device).expand(batch, length)
        return cls._build(SpanKV(idx, valid), idx, query_pos)

    @classmethod
    def continuation(cls, store: SpanKV, past_length: int, length: int) -> SpanContext:
        """A call that continues a cached sequence: ``length`` new tokens after ``past_length``."""
        batch = store.key_pos.shape[0]
        query_pos = torch.arange(past_length, past_length + length, device=store.key_pos.device)
        return cls._build(store, None, query_pos.expand(batch, length))

    @classmethod
    def _build(
        cls, store: SpanKV, gather_idx: torch.Tensor | None, query_pos: torch.Tensor
    ) -> SpanContext:
        visible = span_causal_mask(query_pos, store.key_pos, store.key_valid)  # (B, T, S)
        has_key = rows_with_keys(visible)  # (B, T)
        if gather_idx is None:  # a continuation: every span key precedes every new query
            spans = store.key_pos.shape[1] > 0  # S = 0: no row has a span (else the mask decides)
            return cls(store, None, visible, has_key, not spans, spans and store.all_valid)
        # known without a host sync per block: one per forward call, at the start of a sequence
        return cls(store, gather_idx, visible, has_key, not bool(has_key.any()), False)
