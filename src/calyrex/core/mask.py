"""Span-causal masks as pure functions.

Convention everywhere in calyrex: bool tensors, ``True`` = may attend. Convert only at the
attention call.

Legend: B batch, T queries (sequence), S system span (compact, padded to the batch's longest).
"""

from __future__ import annotations

from typing import Any

import torch


def span_indices(system_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather indices of the system-span tokens of each row, compacted to the left.

    ``system_mask`` (B, T) bool → ``idx`` (B, S_max) long, ``valid`` (B, S_max) bool, where
    ``S_max`` is the longest span in the batch. Row ``b`` keeps its span positions in order,
    then pads with index 0 marked invalid::

        system_mask  0 1 1 1 0 0        idx   1 2 3      valid  1 1 1
                     0 0 1 0 1 0   →          2 4 0             1 1 0
    """
    mask = system_mask.bool()
    counts = mask.sum(dim=1)  # (B,)
    s_max = int(counts.max()) if mask.numel() else 0
    # stable argsort of "not in span" puts span positions first, in their original order
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # (B, T)
    idx = order[:, :s_max]  # (B, S_max)
    valid = torch.arange(s_max, device=mask.device)[None, :] < counts[:, None]  # (B, S_max)
    return torch.where(valid, idx, torch.zeros_like(idx)), valid


def call_span(system_mask: torch.Tensor, past: int, length: int) -> torch.Tensor | None:
    """The (B, T) part of a (B, N) system mask over a whole sequence that falls in a call of
    ``length`` tokens after ``past`` cached ones, or None when none of it does. Positions at or
    beyond ``N`` are never span (generated tokens)::

        system_mask  0 1 1 1 0      past=2, length=4  →  1 1 0 0
    """
    if system_mask.shape[1] <= past:
        return None
    part = system_mask[:, past : past + length].bool()
    if part.shape[1] < length:
        part = torch.nn.functional.pad(part, (0, length - part.shape[1]))
    return part


def span_causal_mask(
    query_pos: torch.Tensor, key_pos: torch.Tensor, key_valid: torch.Tensor
) -> torch.Tensor:
    """Query ``i`` may attend key ``j`` iff ``j`` is a (valid) system-span key and ``j ≤ i``.

    ``query_pos`` (B, T) and ``key_pos`` (B, S) are absolute sequence indices;
    ``key_valid`` (B, S) marks real span keys (padding is never a key). Returns (B, T, S).

    With the system prompt at positions 2–4 of a 7-token row (``x`` = may attend)::

        query\\key  2 3 4
            0      . . .     before the span: attends nothing (block output is zeroed)
            1      . . .
            2      x . .     inside the span: the span up to and including itself
            3      x x .
            4      x x x
            5      x x x     after the span: the whole span
            6      x x x
    """
    causal = key_pos[:, None, :] <= query_pos[:, :, None]  # (B, T, S)
    return causal & key_valid[:, None, :]


def rows_with_keys(visible: torch.Tensor) -> torch.Tensor:
    """(B, T, S) visibility → (B, T) bool: the query sees at least one key.

    Rows without any visible key must never reach a softmax (it would be NaN); the block
    returns its input unchanged for them.
    """
    return visible.any(dim=-1)


def span_key_flags(key_pos: torch.Tensor, key_valid: torch.Tensor, length: int) -> torch.Tensor:
    """(B, S) span positions → (B, K) bool over absolute key positions ``0 … length-1``.

    ``True`` where the key is a system-span token (what the host attention sees, in order)::

        key_pos 2 3 4, valid 1 1 1, length 7  →  0 0 1 1 1 0 0
    """
    b = key_pos.shape[0]
    # invalid keys (and any position past ``length``) land in a spare column that is cut off
    pos = torch.where(key_valid & (key_pos < length), key_pos, torch.full_like(key_pos, length))
    flags = torch.zeros(b, length + 1, dtype=torch.bool, device=key_pos.device)
    return flags.scatter_(1, pos, True)[:, :length]


def positions_restart(
    position_ids: torch.Tensor | None, attention_mask: Any, past: int = 0
) -> bool:
    """True when some row's positions go back between two attended tokens of this call (the
    mask may also cover ``past`` cached tokens before it): several documents
    packed into one row (TRL's padding-free packing, ``DataCollatorWithFlattening``)::

        position_ids  0 1 2 0 1    →  True   (a second document starts at the 4th token)
        position_ids  1 1 0 1 2    →  False  with attention_mask 0 0 1 1 1 (left padding)
    """
    if position_ids is None or position_ids.dim() != 2 or position_ids.shape[1] < 2:
        return False
    t = position_ids.shape[1]
    back = position_ids[:, 1:] <= position_ids[:, :-1]  # (B, T-1)
    if (
        isinstance(attention_mask, torch.Tensor)
        and attention_mask.dim() == 2
        and attention_mask.shape[1] >= past + t
    ):  # this call's columns of a mask over the cache (+ this call): padding is never packing
        attended = attention_mask[:, past : past + t].bool()
        back = back & attended[:, 1:] & attended[:, :-1]
    return bool(back.any())
