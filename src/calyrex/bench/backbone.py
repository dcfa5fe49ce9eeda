"""The backbone every section measures: a random-weight shape (``--shape``) or a real model
(``--model``), with the record that names it in the results.

A real model is found by the one resolver (``calyrex.resolve``: ``smollm2``, ``ruleworld``, a
directory or a hub id) and loaded with SDPA attention, as ``build_backbone`` builds the shapes,
so the two time the same attention kernels.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .config import BenchConfig
from .shapes import SHAPES, build_backbone

ARCHITECTURE = tuple(SHAPES["tiny"])  # the fields a shape is defined by, recorded for a model too


def describe(hf_config: Any) -> dict[str, Any]:
    """The architecture fields of ``hf_config`` that a shape records (and the model type)."""
    fields = {"model_type": hf_config.model_type}
    for key in ARCHITECTURE:
        fields[key] = getattr(hf_config, key, None)
    if fields["num_key_value_heads"] is None:  # multi-head attention: one KV head per head
        fields["num_key_value_heads"] = hf_config.num_attention_heads
    return fields


def load_model(name: str, device: torch.device, dtype: torch.dtype) -> tuple[nn.Module, str]:
    """(model on ``device`` in ``dtype``, eval mode; the path it was loaded from)."""
    from transformers import AutoModelForCausalLM

    from calyrex.resolve import resolve_model

    path = resolve_model(name)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
    return model.to(device).eval(), path


def backbone(cfg: BenchConfig) -> tuple[nn.Module, str, dict[str, Any]]:
    """(backbone, ``"model"`` or ``"shape"``, its record) for a resolved ``cfg``."""
    device, dtype = cfg.torch_device, cfg.torch_dtype
    if cfg.model:
        model, path = load_model(cfg.model, device, dtype)
        return model, "model", {"name": cfg.model, "path": path, **describe(model.config)}
    model = build_backbone(cfg.shape, device, dtype, cfg.seed)
    return model, "shape", {"name": cfg.shape, **SHAPES[cfg.shape]}
