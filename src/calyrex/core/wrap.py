"""Build CAL (or ParallelMLP) blocks for a backbone and attach them."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from ..span.markers import span_markers_reason
from . import hf
from .block import CALBlock
from .config import CalyrexConfig
from .model import CalyrexModel, check_unwrapped


def place(model: nn.Module, blocks: dict[int, nn.Module]) -> dict[int, nn.Module]:
    """Put each block on its host layer's device and in the base dtype."""
    layers = hf.decoder_layers(model)
    for i, block in blocks.items():
        ref = next(layers[i].parameters())
        block.to(device=ref.device, dtype=ref.dtype)
    return blocks


def seeded(seed: int | None, build: Any) -> Any:
    """``build()`` with the CPU RNG seeded, leaving the process-wide RNG as it was."""
    if seed is None:
        return build()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def new_block(model: nn.Module, cfg: CalyrexConfig) -> CALBlock:
    """One CAL block for ``model`` with the resolved ``cfg``."""
    return CALBlock(model.config.hidden_size, cfg, model.config.num_attention_heads)


def check_host_gate(model: nn.Module, cfg: CalyrexConfig) -> None:
    """``host_gate`` reaches the host attention through SDPA's ``position_bias`` over absolute
    key positions: refuse attention kernels that would ignore it and sliding-window layers."""
    impl = getattr(model.config, "_attn_implementation", None)
    if impl != "sdpa":
        raise ValueError(
            f"host_gate biases the host's attention through SDPA, but this model uses "
            f"attn_implementation={impl!r}; load it with attn_implementation='sdpa'"
        )
    types = getattr(model.config, "layer_types", None) or []
    windowed = [i for i in cfg.layers if i < len(types) and types[i] != "full_attention"]
    if windowed:
        raise ValueError(f"host_gate needs full-attention host layers; layers {windowed} are not")


def wrap(
    model: nn.Module,
    config: CalyrexConfig | None = None,
    tokenizer: Any = None,
    seed: int | None = None,
) -> CalyrexModel:
    """Freeze ``model`` and insert CAL blocks; the result equals ``model`` bit for bit at init.

    ``tokenizer`` (optional) gives the fallback span markers for calls that pass only input_ids.
    ``seed`` seeds the blocks' initialisation without touching the process-wide RNG.
    """
    layers = hf.decoder_layers(model)  # fails early, naming an unsupported architecture
    check_unwrapped(model)  # before anything is built or copied
    cfg = (config or CalyrexConfig()).resolve(model.config)
    if (
        cfg.init_from_host
        and getattr(layers[cfg.layers[0]].self_attn.q_proj, "bias", None) is not None
    ):
        cfg = dataclasses.replace(cfg, attention_bias=True)  # copy the host's q/k/v biases too
    if cfg.host_gate:
        check_host_gate(model, cfg)
    blocks = seeded(seed, lambda: {i: new_block(model, cfg) for i in cfg.layers})
    if cfg.init_from_host:
        for i, block in blocks.items():
            block.copy_from_host(layers[i])
    markers, reason = span_markers_reason(tokenizer) if tokenizer is not None else (None, "")
    return CalyrexModel(
        model, place(model, blocks), "calyrex", cfg, markers, reason or "no tokenizer was given"
    )
