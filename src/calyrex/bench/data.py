"""Synthetic batches: a system prompt near the start, conversation after it, labels at the end.

Token values do not change the time of a dense forward pass, so ids are random. The system
span starts after a 3-token header, as a chat template puts it (``<|im_start|>system\\n``).

Legend: B batch, T tokens, P labelled positions.
"""

from __future__ import annotations

import torch

HEADER = 3  # template tokens before the system content


def token_batch(
    batch: int, tokens: int, system: int, vocab: int, device: torch.device, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``input_ids`` (B, T) and ``system_mask`` (B, T) bool with ``system`` span tokens."""
    if HEADER + system > tokens:
        raise ValueError(f"a {system}-token system prompt does not fit in {tokens} tokens")
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, tokens), generator=g).to(device)
    mask = torch.zeros(batch, tokens, dtype=torch.bool, device=device)
    mask[:, HEADER : HEADER + system] = True
    return ids, mask


def with_cache(model: torch.nn.Module, cache: object) -> dict[str, object]:
    """The keyword a model's forward takes its KV cache by (``cache`` since transformers 5.x)."""
    from calyrex.core.hf import cache_kwargs

    return cache_kwargs(model, cache)
