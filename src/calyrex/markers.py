"""Fallback for callers that pass only ``input_ids`` (e.g. lm-eval's log-likelihood path).

The system segment is recognised only where the chat template puts it: at the very start of the
sequence (after padding and an optional extra BOS), opened by the template's exact system
header and closed by its end-of-turn special token. Anything later is never a system span, and
user text cannot produce the special tokens that delimit it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from .chat import ChatTemplateError, segments


@dataclass(frozen=True)
class SpanMarkers:
    header: tuple[int, ...]  # ids from the start of the sequence up to the system content
    end: int  # special token that closes the system message
    bos: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpanMarkers:
        return cls(tuple(data["header"]), int(data["end"]), data.get("bos"))


def span_markers(tokenizer: Any) -> SpanMarkers | None:
    """Markers of the system segment under ``tokenizer``'s template, or None if not recognisable."""
    try:
        segs = segments(
            tokenizer, [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]
        )
    except ChatTemplateError:
        return None
    roles = [s.role for s in segs]
    if roles[:3] != [None, "system", None]:
        return None
    end = segs[2].ids[0]
    if end not in set(tokenizer.all_special_ids):
        return None  # a plain-text delimiter could be forged by user text
    return SpanMarkers(tuple(segs[0].ids), end, tokenizer.bos_token_id)


def detect_system_mask(
    input_ids: torch.Tensor, attention_mask: torch.Tensor | None, markers: SpanMarkers
) -> torch.Tensor:
    """(B, T) ids → (B, T) bool system mask found at the start of each row only."""
    out = torch.zeros_like(input_ids, dtype=torch.bool)
    header = torch.tensor(markers.header, device=input_ids.device)
    for b in range(input_ids.shape[0]):  # fallback path only; the main path gets system_mask
        row = input_ids[b]
        start = 0 if attention_mask is None else int(attention_mask[b].long().argmax())
        if markers.bos is not None and (len(header) == 0 or header[0] != markers.bos):
            start += int(row[start] == markers.bos)
        elif (
            markers.bos is not None
            and start + 1 < len(row)
            and row[start] == row[start + 1] == markers.bos
        ):
            start += 1  # a harness added BOS before a template that renders its own
        stop = start + len(header)
        if stop > len(row) or not torch.equal(row[start:stop], header):
            continue
        ends = (row[stop:] == markers.end).nonzero()
        last = stop + int(ends[0]) if len(ends) else len(row)
        out[b, stop:last] = True
    return out


def span_markers_reason(tokenizer: Any) -> tuple[SpanMarkers | None, str]:
    """:func:`span_markers` and, when there are none, why (for the model's one warning)."""
    markers = span_markers(tokenizer)
    reason = "" if markers else "the chat template's system segment is not recognisable in ids"
    return markers, reason
