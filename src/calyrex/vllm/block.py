"""The CAL block on vLLM: :class:`calyrex.core.block.CALBlock` itself, around vLLM's attention call.

The parameters, the norm, the projections, the output projection, the row gate and the SwiGLU
are the HF block's (:class:`KeyBiasCAL` subclasses it and calls its methods); only the attention
call differs. The block owns a standard causal decoder ``Attention`` (its own paged KV in the
same block table), so prefix caching, chunked prefill and eviction apply unchanged.
Span-causality comes from one extra channel of a head padded to a size the backend supports::

    q' = [q, 1, 0…]     k' = [k, 0 on span tokens / NEG elsewhere, 0…]     v' = [v, 1 on span, 0…]

Under vLLM's causal mask, query i then weighs exactly the span keys ≤ i: every other key's logit
is ≈ NEG·scale, whose exp is exactly 0 in fp32/bf16 softmax. Channel Dh of the output is the
weight on span keys: 1 when query i sees a span key, 0 when it sees none — the "row sees no key
→ identity" gate of the HF block, with no per-request state.

Cost: CAL K/V are stored for every token (not only the span) at the padded head size.

Legend: T scheduled tokens, D hidden, H/Hkv heads, Dh head dim, P padded head dim (> Dh).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..core.block import CALBlock
from ..core.config import CalyrexConfig

NEG = -30000.0  # key bias off the span: fits fp16/bf16 KV caches; exp(NEG·scale) = 0


def padded_head_size(head_dim: int, supported: Sequence[int] | None) -> int:
    """The smallest head size > ``head_dim`` (room for the bias channel) the backend takes:
    from its list when it has one (vLLM's CPU attention: 64 → 80), else a multiple of 8
    (FlashAttention: 128 → 136)."""
    if supported is not None:
        fits = sorted(s for s in supported if s > head_dim)
        if not fits:
            raise ValueError(f"the attention backend has no head size above {head_dim}")
        return fits[0]
    return 8 * math.ceil((head_dim + 1) / 8)


def with_channel(
    y: torch.Tensor, heads: int, dim: int, padded: int, channel: float | torch.Tensor
) -> torch.Tensor:
    """(T, heads·Dh) → (T, heads·P): each head padded with zeros, ``channel`` (a number, or
    (T, 1) per token) at its channel Dh."""
    t = y.shape[0]
    out = y.new_zeros(t, heads, padded)
    out[..., :dim] = y.view(t, heads, dim)
    out[..., dim] = channel
    return out.view(t, heads * padded)


def key_bias_qkv(
    block: CALBlock, x: torch.Tensor, system: torch.Tensor, padded: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x`` (T, D) normed, ``system`` (T,) bool → q' (T, H·P), k' and v' (T, Hkv·P)."""
    k, v = block.keys_values(x)  # (T, Hkv·Dh): every token's, the bias hides the non-span ones
    on = system[:, None]  # (T, 1)
    dim, kv_heads = block.head_dim, block.kv_heads
    return (
        with_channel(block.queries(x), block.heads, dim, padded, 1.0),
        with_channel(k, kv_heads, dim, padded, torch.where(on, 0.0, NEG).to(k.dtype)),
        with_channel(v, kv_heads, dim, padded, on.to(v.dtype)),
    )


def key_bias_out(block: CALBlock, h: torch.Tensor, a: torch.Tensor, padded: int) -> torch.Tensor:
    """``h`` (T, D) and the attention output ``a`` (T, H·P) → the block's output (T, D)."""
    t, dim = h.shape[0], block.head_dim
    a = a.view(t, block.heads, padded)  # (T, H, P)
    keep = a[:, 0, dim : dim + 1] > 0.5  # (T, 1): the query saw a span key
    return block.residual(h, a[..., :dim].reshape(t, block.heads * dim), keep)


class KeyBiasCAL(CALBlock):
    """CAL block for vLLM. ``cfg``: a resolved ``CalyrexConfig`` as a dict (adapter file)."""

    def __init__(
        self,
        hidden: int,
        cfg: dict[str, Any],
        cache_config: Any,
        prefix: str,
        supported: Sequence[int] | None,
    ) -> None:
        from vllm.model_executor.layers.attention import Attention

        if cache_config is not None and str(cache_config.cache_dtype).startswith("fp8"):
            raise ValueError(
                "calyrex CAL layers need a 16- or 32-bit KV cache (their key-bias channel "
                f"saturates {cache_config.cache_dtype}); start vLLM without --kv-cache-dtype fp8"
            )
        super().__init__(hidden, CalyrexConfig.from_dict(cfg))
        self.padded = padded_head_size(self.head_dim, supported)
        self.attn = Attention(
            self.heads,
            self.padded,
            self.head_dim**-0.5,
            num_kv_heads=self.kv_heads,
            cache_config=cache_config,
            prefix=f"{prefix}.attn",
        )

    def forward(self, h: torch.Tensor, system: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """``h`` (T, D) residual stream after the host layer, ``system`` (T,) bool → (T, D)."""
        q, k, v = key_bias_qkv(self, self.cal_attn_norm(h), system, self.padded)
        return key_bias_out(self, h, self.attn(q, k, v), self.padded)  # attn: (T, H·P)
