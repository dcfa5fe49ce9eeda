"""Backbones of real shape with random weights, built from config (nothing is downloaded).

Shapes follow the published Qwen2.5 configs; ``tiny`` is for ``--quick`` runs in CI.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5-1.5b": dict(
        hidden_size=1536,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        intermediate_size=8960,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=8,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=512,
        tie_word_embeddings=False,
    ),
}


def backbone_config(shape: str) -> Any:
    """The HF config of ``shape`` (a Qwen2 decoder with Qwen2.5's RoPE base and context)."""
    from transformers import AutoConfig

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose one of {sorted(SHAPES)}")
    return AutoConfig.for_model(
        "qwen2", max_position_embeddings=32768, rope_theta=1e6, **SHAPES[shape]
    )


def build_backbone(
    shape: str, device: torch.device, dtype: torch.dtype, seed: int = 0
) -> nn.Module:
    """A randomly initialised causal LM of ``shape`` on ``device`` in ``dtype``, eval mode."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            backbone_config(shape), attn_implementation="sdpa", dtype=dtype
        )
    return model.eval()
