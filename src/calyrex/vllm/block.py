"""The CAL block on vLLM: an ordinary causal vLLM attention layer with one key-bias channel.

Same parameters and arithmetic as :class:`calyrex.block.CALBlock`; only the attention call
differs. The block owns a standard decoder ``Attention`` (its own paged KV in the same block
table), so prefix caching, chunked prefill and eviction apply unchanged. Span-causality comes
from one extra channel of a head padded to a size the backend supports::

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
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..block import RMSNorm, SwiGLU

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


class KeyBiasCAL(nn.Module):
    """CAL block for vLLM. ``cfg``: a resolved ``CalyrexConfig`` as a dict (adapter file)."""

    def __init__(
        self,
        hidden: int,
        cfg: dict[str, Any],
        cache_config: Any,
        prefix: str,
        supported: Sequence[int] | None,
    ) -> None:
        super().__init__()
        from vllm.model_executor.layers.attention import Attention

        if cache_config is not None and str(cache_config.cache_dtype).startswith("fp8"):
            raise ValueError(
                "calyrex CAL layers need a 16- or 32-bit KV cache (their key-bias channel "
                f"saturates {cache_config.cache_dtype}); start vLLM without --kv-cache-dtype fp8"
            )
        self.heads, self.kv_heads = cfg["num_heads"], cfg["num_kv_heads"]
        self.head_dim = cfg["head_dim"]
        self.padded = padded_head_size(self.head_dim, supported)
        bias, eps, width = cfg["attention_bias"], cfg["norm_eps"], cfg["intermediate_size"]
        self.cal_attn_norm = RMSNorm(hidden, eps)
        self.cal_q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=bias)
        self.cal_k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.cal_v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.cal_o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)
        self.cal_ffn = SwiGLU(hidden, width, eps, cfg["init_std"])
        self.attn = Attention(
            self.heads,
            self.padded,
            self.head_dim**-0.5,
            num_kv_heads=self.kv_heads,
            cache_config=cache_config,
            prefix=f"{prefix}.attn",
        )

        self.fused: Fused | None = None  # built from the loaded weights (:meth:`fuse`)

    def fuse(self) -> None:
        """Pre-pad W_Q/W_K/W_V into one matrix and W_O with zero columns (after weight loading)."""
        self.fused = fuse(
            self.cal_q_proj, self.cal_k_proj, self.cal_v_proj, self.cal_o_proj, self.head_dim,
            self.padded,
        )  # fmt: skip

    def forward(self, h: torch.Tensor, system: torch.Tensor) -> torch.Tensor:
        """``h`` (T, D) residual stream after the host layer, ``system`` (T,) bool → (T, D)."""
        if self.fused is None:
            self.fuse()
        f = self.fused
        q, k, v = key_bias_qkv(f, self.cal_attn_norm(h), system)
        a = self.attn(q, k, v)  # (T, H·P)
        keep = a[:, self.head_dim : self.head_dim + 1] > 0.5  # (T, 1): the query saw a span key
        h1 = torch.where(keep, h + F.linear(a, f.o_weight), h)
        return torch.where(keep, h1 + self.cal_ffn(h1), h1)


@dataclass
class Fused:
    """One projection to the padded q', k', v' and W_O reading the padded heads."""

    weight: torch.Tensor  # (H·P + 2·Hkv·P, D), zero rows at the padding
    bias: torch.Tensor  # (H·P + 2·Hkv·P,): 1 on each q head's channel Dh, the layer's biases
    on_span: torch.Tensor  # added on span tokens: 1 on each v head's channel Dh
    off_span: torch.Tensor  # added elsewhere: NEG on each k head's channel Dh
    o_weight: torch.Tensor  # (D, H·P), zero columns at the padding
    sizes: tuple[int, int, int]  # H·P, Hkv·P, Hkv·P


def _pad_rows(w: torch.Tensor, dim: int, padded: int) -> torch.Tensor:
    """(heads·Dh, …) → (heads·P, …) with zeros in each head's rows Dh … P-1."""
    heads = w.shape[0] // dim
    out = w.new_zeros(heads, padded, *w.shape[1:])
    out[:, :dim] = w.view(heads, dim, *w.shape[1:])
    return out.view(heads * padded, *w.shape[1:])


def _channel(heads: int, dim: int, padded: int, value: float, like: torch.Tensor) -> torch.Tensor:
    """(heads·P,) vector: ``value`` at each head's channel Dh, 0 elsewhere."""
    out = like.new_zeros(heads, padded)
    out[:, dim] = value
    return out.view(-1)


@torch.no_grad()
def fuse(q: nn.Linear, k: nn.Linear, v: nn.Linear, o: nn.Linear, dim: int, padded: int) -> Fused:
    """The :class:`Fused` form of a CAL block's attention projections (module doc's q', k', v')."""
    w = q.weight
    heads, kv_heads = q.weight.shape[0] // dim, k.weight.shape[0] // dim

    def bias(layer: nn.Linear) -> torch.Tensor:
        b = layer.bias if layer.bias is not None else w.new_zeros(layer.weight.shape[0])
        return _pad_rows(b, dim, padded)

    zeros = _channel(kv_heads, dim, padded, 0.0, w)
    return Fused(
        weight=torch.cat([_pad_rows(x.weight, dim, padded) for x in (q, k, v)]),
        bias=torch.cat([bias(q) + _channel(heads, dim, padded, 1.0, w), bias(k), bias(v)]),
        on_span=torch.cat(
            [_channel(heads, dim, padded, 0.0, w), zeros, _channel(kv_heads, dim, padded, 1.0, w)]
        ),  # fmt: skip
        off_span=torch.cat(
            [_channel(heads, dim, padded, 0.0, w), _channel(kv_heads, dim, padded, NEG, w), zeros]
        ),  # fmt: skip
        o_weight=_pad_rows(o.weight.t().contiguous(), dim, padded).t().contiguous(),
        sizes=(heads * padded, kv_heads * padded, kv_heads * padded),
    )


def key_bias_qkv(
    f: Fused, x: torch.Tensor, system: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x`` (T, D) normed, ``system`` (T,) bool → q' (T, H·P), k' and v' (T, Hkv·P)."""
    qkv = F.linear(x, f.weight, f.bias)  # one matmul for the three
    qkv = qkv + torch.where(system[:, None], f.on_span, f.off_span)
    q, k, v = qkv.split(f.sizes, dim=-1)
    return q, k, v
