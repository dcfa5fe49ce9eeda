"""The backbone every section measures: a random-weight shape (``--shape``) or a real model
(``--model``), with the record that names it in the results.

A real model is loaded by the one loader (``calyrex.adapters.loading.load_model``: ``smollm2``,
``ruleworld``, a directory or a hub id) with SDPA attention, as ``build_backbone`` builds the
shapes, so the two time the same attention kernels.
"""

from __future__ import annotations

from typing import Any

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


def backbone(cfg: BenchConfig) -> tuple[nn.Module, str, dict[str, Any]]:
    """(backbone, ``"model"`` or ``"shape"``, its record) for a resolved ``cfg``."""
    if cfg.model:  # the one loader, with the SDPA kernels the random-weight shapes use
        from calyrex.adapters.loading import load_model

        model, _ = load_model(cfg.model, None, cfg.dtype, cfg.device, attn_implementation="sdpa")
        record = {"name": cfg.model, "path": model.name_or_path, **describe(model.config)}
        return model, "model", record
    model = build_backbone(cfg.shape, cfg.torch_device, cfg.torch_dtype, cfg.seed)
    return model, "shape", {"name": cfg.shape, **SHAPES[cfg.shape]}
