"""Analytic FLOP counts: the ratio a benchmark should reach if time followed arithmetic.

Legend: T query tokens, C context (keys) per query, S system span, D hidden, H/Hkv heads,
Dh head dim, I FFN width, V vocabulary, L layers. One multiply-add = 2 FLOPs.

Backward costs: a frozen linear layer on the gradient path needs only its input gradient
(1× its forward); a trainable one needs input and weight gradients (2×); attention's core
(QKᵀ, AV) needs 2× its forward either way. Nothing below the first trainable module runs a
backward pass. Elementwise work (norms, activations, softmax) is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Geometry:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int

    @classmethod
    def of(cls, hf_config: Any) -> Geometry:
        heads = hf_config.num_attention_heads
        return cls(
            hidden=hf_config.hidden_size,
            layers=hf_config.num_hidden_layers,
            heads=heads,
            kv_heads=getattr(hf_config, "num_key_value_heads", None) or heads,
            head_dim=getattr(hf_config, "head_dim", None) or hf_config.hidden_size // heads,
            ffn=hf_config.intermediate_size,
            vocab=hf_config.vocab_size,
        )


def causal_pairs(tokens: int, past: int = 0) -> int:
    """(query, key) pairs of causal attention over ``tokens`` new tokens after ``past`` cached."""
    return tokens * past + tokens * (tokens + 1) // 2


def layer_linear(g: Geometry, tokens: int) -> int:
    """Projections and FFN of one decoder layer (2·T·D·(2·H·Dh + 2·Hkv·Dh + 3·I))."""
    return (
        2 * tokens * g.hidden * (2 * g.heads * g.head_dim + 2 * g.kv_heads * g.head_dim + 3 * g.ffn)
    )


def attention_core(g: Geometry, pairs: int, heads: int | None = None) -> int:
    """QKᵀ and AV over ``pairs`` (query, key) pairs: 4·pairs·H·Dh."""
    return 4 * pairs * (heads or g.heads) * g.head_dim


def head(g: Geometry, tokens: int) -> int:
    return 2 * tokens * g.hidden * g.vocab


def cal_linear(g: Geometry, cfg: Any, tokens: int, span: int) -> int:
    """One CAL block's projections: W_Q, W_O and the FFN over T, W_K and W_V over the span only."""
    qo = 2 * 2 * tokens * g.hidden * cfg.num_heads * cfg.head_dim
    kv = 2 * 2 * span * g.hidden * cfg.num_kv_heads * cfg.head_dim
    return qo + kv + 2 * 3 * tokens * g.hidden * cfg.intermediate_size


def cal_forward(g: Geometry, cfg: Any, tokens: int, span: int, kv_cached: bool = False) -> int:
    """One CAL block, every query seeing the whole span (an upper bound by < S²/2 pairs)."""
    linear = cal_linear(g, cfg, tokens, 0 if kv_cached else span)
    return linear + 4 * tokens * span * cfg.num_heads * cfg.head_dim


def base_forward(g: Geometry, tokens: int, past: int = 0, logits: int | None = None) -> int:
    """The backbone over ``tokens`` new tokens after ``past`` cached, ``logits`` positions of LM head."""
    per_layer = layer_linear(g, tokens) + attention_core(g, causal_pairs(tokens, past))
    return g.layers * per_layer + head(g, tokens if logits is None else logits)


def inference_ratio(g: Geometry, cfg: Any, tokens: int, span: int, past: int = 0) -> float:
    """(backbone + CAL blocks) / backbone for a prefill (``past`` = 0) or decode step."""
    base = base_forward(g, tokens, past, logits=1)
    blocks = len(cfg.layers) * cal_forward(g, cfg, tokens, span, kv_cached=past > 0)
    return (base + blocks) / base


def train_step(g: Geometry, method: str, adapter: dict[str, int], tokens: int, logits: int) -> int:
    """Forward + backward FLOPs of one training step (the optimiser's are negligible).

    ``adapter``: ``first`` (lowest layer holding a trainable module), ``fwd`` (the adapters'
    forward FLOPs over ``tokens``). LoRA's ``first`` is 0: its backward spans every layer.
    """
    layer_fwd = layer_linear(g, tokens) + attention_core(g, causal_pairs(tokens))
    layer_bwd = layer_linear(g, tokens) + 2 * attention_core(g, causal_pairs(tokens))
    above = g.layers - 1 - adapter["first"]  # host layers after the first adapter's layer
    if method == "lora":
        above = g.layers  # LoRA sits inside every layer, so every layer is on the gradient path
    forward = g.layers * layer_fwd + adapter["fwd"] + head(g, logits)
    backward = above * layer_bwd + 2 * adapter["fwd"] + head(g, logits)
    return forward + backward
