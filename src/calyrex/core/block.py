"""The CAL block: span-causal cross-attention to the system prompt, then a SwiGLU FFN.

Legend: B batch, T sequence, S system span, D hidden, H/Hkv heads, Dh head dim, F FFN width.

    x  = RMSNorm_attn(h)                  queries from every position
    c  = x[S]                             keys/values from the system span only (same layer, same pass)
    h' = h + softmax(xW_Q (cW_K)ᵀ/√Dh + M) cW_V W_O        M: span-causal mask, no RoPE
    h''= h' + W_D(SiLU(W_G n) ⊙ W_U n),   n = RMSNorm_ffn(h')

W_O and W_D start at exactly 0, so the block is the identity at initialisation. ``ffn=False``
drops the SwiGLU (attention-only blocks). ``host_gate=True`` adds :class:`HostGate`, which is
not the paper's method (see there). Rows that see
no system key (tokens before the span, conversations without one) return ``h`` unchanged — the
attention *and* the FFN — as Mllama's ``full_text_row_masked_out_mask`` does.

This is the one definition of the block's arithmetic: the HF path calls :meth:`CALBlock.forward`;
vLLM's block (``calyrex.vllm.block``) is a subclass that calls :meth:`~CALBlock.queries`,
:meth:`~CALBlock.keys_values` and :meth:`~CALBlock.residual` around vLLM's own attention
call. The block keeps no state: it gets the span keys/values cached before this call and
returns those of the call's new span tokens, which its layer appends (``calyrex.core.cal_cache``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .cal_cache import KV, SpanCall
from .config import CalyrexConfig


class RMSNorm(nn.Module):
    """Same arithmetic as Qwen2/Llama RMSNorm: normalise in fp32, scale in the input dtype."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class SwiGLU(nn.Module):
    """Pre-norm SwiGLU FFN whose down projection starts at exactly zero."""

    def __init__(self, hidden: int, width: int, eps: float, std: float) -> None:
        super().__init__()
        self.cal_norm = RMSNorm(hidden, eps)
        self.cal_gate_proj = nn.Linear(hidden, width, bias=False)
        self.cal_up_proj = nn.Linear(hidden, width, bias=False)
        self.cal_down_proj = nn.Linear(width, hidden, bias=False)
        nn.init.normal_(self.cal_gate_proj.weight, std=std)
        nn.init.normal_(self.cal_up_proj.weight, std=std)
        nn.init.zeros_(self.cal_down_proj.weight)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        n = self.cal_norm(h)  # (B, T, D)
        return self.cal_down_proj(F.silu(self.cal_gate_proj(n)) * self.cal_up_proj(n))


class HostGate(nn.Module):
    """Not the paper's method: re-weights the host layer's self-attention to non-span tokens.

    A per-query, per-head logit bias ``β = W_β RMSNorm(x)`` (x: the host layer's input, W_β
    zero at init) is added to the host's attention logits of every key outside the system span,
    for the queries that see a span key. β < 0 turns the host's attention to user text down,
    β = 0 (init, and every row without a system prompt) leaves it exactly as it was. It reaches
    the host through SDPA's ``position_bias`` argument, so the host must use ``sdpa``.
    """

    def __init__(self, hidden: int, host_heads: int, eps: float) -> None:
        super().__init__()
        self.cal_gate_norm = RMSNorm(hidden, eps)
        self.cal_gate_proj = nn.Linear(hidden, host_heads, bias=False)
        nn.init.zeros_(self.cal_gate_proj.weight)

    def forward(
        self, x: torch.Tensor, has_key: torch.Tensor, span_keys: torch.Tensor
    ) -> torch.Tensor:
        """``x`` (B, T, D), ``has_key`` (B, T), ``span_keys`` (B, K) → logit bias (B, Hh, T, K)."""
        beta = self.cal_gate_proj(self.cal_gate_norm(x)) * has_key[..., None]  # (B, T, Hh)
        outside = (~span_keys).to(beta.dtype)[:, None, None, :]  # (B, 1, 1, K)
        return beta.transpose(1, 2)[..., None] * outside


class CALBlock(nn.Module):
    """One cross-attention layer reading the system span. ``cfg`` must be resolved;
    ``host_heads`` (the host layer's attention heads) is needed only with ``cfg.host_gate``."""

    uses_span = True

    def __init__(self, hidden: int, cfg: CalyrexConfig, host_heads: int | None = None) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        if self.heads % self.kv_heads:
            raise ValueError(
                f"num_heads={self.heads} is not a multiple of num_kv_heads={self.kv_heads}"
            )
        bias = cfg.attention_bias
        self.cal_attn_norm = RMSNorm(hidden, cfg.norm_eps)
        self.cal_q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=bias)
        self.cal_k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.cal_v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.cal_o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)
        self.cal_ffn = (
            SwiGLU(hidden, cfg.intermediate_size, cfg.norm_eps, cfg.init_std) if cfg.ffn else None
        )
        self.cal_host_gate = None
        if cfg.host_gate:
            if host_heads is None:
                raise ValueError("host_gate needs the host layer's number of attention heads")
            self.cal_host_gate = HostGate(hidden, host_heads, cfg.norm_eps)
        for proj in (self.cal_q_proj, self.cal_k_proj, self.cal_v_proj):
            nn.init.normal_(proj.weight, std=cfg.init_std)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)
        nn.init.zeros_(self.cal_o_proj.weight)

    def queries(self, x: torch.Tensor) -> torch.Tensor:
        """Queries of the normed stream: ``x`` (…, D) → (…, H·Dh)."""
        return self.cal_q_proj(x)

    def keys_values(self, c: torch.Tensor) -> KV:
        """Keys and values of normed span states: ``c`` (…, D) → 2 × (…, Hkv·Dh)."""
        return self.cal_k_proj(c), self.cal_v_proj(c)

    def span_kv(self, x: torch.Tensor, gather_idx: torch.Tensor) -> KV:
        """Keys/values of the span: ``x`` (B, T, D), ``gather_idx`` (B, S) → 2 × (B, Hkv, S, Dh)."""
        b, s = gather_idx.shape
        c = torch.gather(x, 1, gather_idx[..., None].expand(b, s, x.shape[-1]))  # (B, S, D)
        k, v = self.keys_values(c)  # (B, S, Hkv·Dh)
        k = k.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, S, Dh)
        v = v.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        return k, v

    def residual(self, h: torch.Tensor, a: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        """``h + a W_O``, then the SwiGLU, on the rows ``keep`` (…, 1) only (None: every row).

        ``h`` (…, D) the block's input, ``a`` (…, H·Dh) the attention output → (…, D).
        """
        h1 = h + self.cal_o_proj(a)
        if keep is None:
            return h1 if self.cal_ffn is None else h1 + self.cal_ffn(h1)
        h1 = torch.where(keep, h1, h)
        return h1 if self.cal_ffn is None else torch.where(keep, h1 + self.cal_ffn(h1), h1)

    def forward(
        self, h: torch.Tensor, span: SpanCall | None, past_kv: KV | None = None
    ) -> tuple[torch.Tensor, KV | None]:
        """``h`` (B, T, D), the call's span, the span K/V cached before it (B, Hkv, S_past, Dh)
        → (``h''`` (B, T, D), the K/V of the call's new span tokens, or None without any)."""
        if span is None or span.empty:
            zero = _zero_grad_path(self) if torch.is_grad_enabled() else None
            return (h if zero is None else h + zero.to(h.dtype)), None
        b, t, _ = h.shape
        x = self.cal_attn_norm(h)  # (B, T, D)
        new = None
        if span.gather_idx is not None:  # new span tokens: computed once, cached by the caller
            new = self.span_kv(x, span.gather_idx)  # 2 × (B, Hkv, S_new, Dh)
        k, v = _joined(past_kv, new)  # (B, Hkv, S, Dh)
        q = self.queries(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, Dh)
        # Rows with no visible key would softmax over an empty set (NaN): let them see every
        # key here and discard their output below. When every query sees every key (decode
        # steps of unpadded spans) there is no mask at all, so SDPA can use its fastest kernel.
        attend = None if span.full else (span.visible | ~span.has_key[..., None])[:, None]
        a = F.scaled_dot_product_attention(
            q, k.to(q.dtype), v.to(q.dtype), attn_mask=attend, enable_gqa=True
        )  # (B, H, T, Dh)
        a = a.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)  # (B, T, H·Dh)
        return self.residual(h, a, None if span.full else span.has_key[..., None]), new

    @torch.no_grad()
    def copy_from_host(self, host_layer: nn.Module) -> None:
        """Initialise W_Q/W_K/W_V and the attention norm from the host layer (same geometry)."""
        attn = host_layer.self_attn
        for mine, theirs in (
            (self.cal_q_proj, attn.q_proj),
            (self.cal_k_proj, attn.k_proj),
            (self.cal_v_proj, attn.v_proj),
        ):
            if mine.weight.shape != theirs.weight.shape:
                raise ValueError("init_from_host needs the block geometry to equal the host's")
            mine.weight.copy_(theirs.weight)
            if mine.bias is not None and theirs.bias is not None:
                mine.bias.copy_(theirs.bias)
        self.cal_attn_norm.weight.copy_(host_layer.input_layernorm.weight)


class ParallelMLPBlock(nn.Module):
    """Baseline: a zero-initialised SwiGLU on the residual stream, blind to the system span."""

    uses_span = False

    def __init__(self, hidden: int, width: int, eps: float, std: float) -> None:
        super().__init__()
        self.cal_mlp = SwiGLU(hidden, width, eps, std)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """``h`` (B, T, D) → (B, T, D); a block that does not read the span gets ``h`` alone."""
        return h + self.cal_mlp(h)


def _zero_grad_path(block: nn.Module) -> torch.Tensor | None:
    """0 that depends on every trainable parameter of ``block``.

    A batch whose rows see no system key leaves the block unused; adding this exact zero keeps
    the loss connected to the adapter (zero gradients instead of "does not require grad"), and
    every DDP rank reduces the same parameters.
    """
    params = [p for p in block.parameters() if p.requires_grad]
    if not params:
        return None
    return sum(p.sum() for p in params) * 0.0


def _joined(past: KV | None, new: KV | None) -> KV:
    """The span K/V a call attends to: those cached before it, then its own (dim 2: keys)."""
    if past is None or new is None:
        return past if new is None else new
    return torch.cat([past[0].to(new[0].dtype), new[0]], 2), torch.cat(
        [past[1].to(new[1].dtype), new[1]], 2
    )
