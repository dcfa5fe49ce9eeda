"""Small informational subcommands."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.placement import PRESETS, placement_layers


def placements(num_layers: int = 28) -> None:
    """Print the layers each placement preset puts CAL blocks after, for a model of NUM_LAYERS.

    Args:
        num_layers: the decoder layers of the model (SmolLM2-135M: 30, Qwen2.5-1.5B: 28)
    """
    for name in PRESETS:
        layers = placement_layers(name, num_layers)
        print(f"{name:13s} {len(layers):3d} blocks  {layers}")


def inspect_adapter(adapter: str) -> None:
    """Print an adapter's method, configuration, base model and size without loading a model.

    Args:
        adapter: an adapter directory: calyrex's files (CALYREX, ParallelMLP) or PEFT's (LoRA)
    """
    from ..core.adapter_io import read_adapter

    config, state = read_adapter(Path(adapter))
    shown = {k: config[k] for k in ("method", "config", "base_model") if k in config}
    samples = shown.get("base_model", {}).pop("weight_samples", None)
    print(json.dumps(shown, indent=2))
    if samples is not None:
        print(f"base weights fingerprinted in {len(samples)} tensors")
    print(f"{sum(t.numel() for t in state.values()):,} adapter parameters in {len(state)} tensors")
