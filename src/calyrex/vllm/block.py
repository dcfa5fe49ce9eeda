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
from typing import Any

import torch
from torch import nn

from ..block import RMSNorm, SwiGLU

NEG = -30000.0  # key bias off the span: fits fp16/bf16 KV caches; exp(NEG·scale) = 0
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)  # vLLM CPU attention


def padded_head_size(head_dim: int, on_cpu: bool) -> int:
    """The smallest head size > ``head_dim`` (room for the bias channel) the backend takes:
    CPU attention's list (64 → 80), else a multiple of 8 (FlashAttention: 128 → 136)."""
    if on_cpu:
        fits = [s for s in CPU_HEAD_SIZES if s > head_dim]
        if not fits:
            raise ValueError(f"no vLLM CPU attention head size above {head_dim}")
        return fits[0]
    return 8 * math.ceil((head_dim + 1) / 8)


class KeyBiasCAL(nn.Module):
    """CAL block for vLLM. ``cfg``: a resolved ``CalyrexConfig`` as a dict (adapter file)."""

    def __init__(
        self, hidden: int, cfg: dict[str, Any], cache_config: Any, prefix: str, on_cpu: bool
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
        self.padded = padded_head_size(self.head_dim, on_cpu)
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

    def forward(self, h: torch.Tensor, system: torch.Tensor) -> torch.Tensor:
        """``h`` (T, D) residual stream after the host layer, ``system`` (T,) bool → (T, D)."""
        x = self.cal_attn_norm(h)  # (T, D)
        q, k, v = key_bias(
            self.cal_q_proj(x), self.cal_k_proj(x), self.cal_v_proj(x), system, self.head_dim,
            self.padded,
        )  # fmt: skip
        out, keep = read_out(self.attn(q, k, v), self.head_dim, self.padded)
        h1 = torch.where(keep, h + self.cal_o_proj(out), h)
        return torch.where(keep, h1 + self.cal_ffn(h1), h1)


def _pad(x: torch.Tensor, dim: int, padded: int, extra: torch.Tensor) -> torch.Tensor:
    """(T, heads·Dh) and the (T, 1) channel value → (T, heads·P): [x, extra, 0…] per head."""
    t = x.shape[0]
    heads = x.shape[1] // dim
    out = x.new_zeros(t, heads, padded)
    out[..., :dim] = x.view(t, heads, dim)
    out[..., dim] = extra
    return out.view(t, heads * padded)


def key_bias(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    system: torch.Tensor,
    dim: int,
    padded: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (T, H·Dh), k / v (T, Hkv·Dh), ``system`` (T,) bool → the padded q', k', v' (module doc)."""
    span = system[:, None].to(q.dtype)  # (T, 1)
    bias = torch.where(system[:, None], 0.0, NEG).to(k.dtype)  # (T, 1)
    return (
        _pad(q, dim, padded, torch.ones_like(span)),
        _pad(k, dim, padded, bias),
        _pad(v, dim, padded, span),
    )


def read_out(a: torch.Tensor, dim: int, padded: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output (T, H·P) → (T, H·Dh) and ``keep`` (T, 1): the query saw a span key."""
    t = a.shape[0]
    a = a.view(t, -1, padded)  # (T, H, P)
    return a[..., :dim].reshape(t, -1), a[:, :1, dim] > 0.5
