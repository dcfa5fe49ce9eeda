"""Small informational subcommands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.placement import PRESETS, placement_layers
from .fields import options_from


@dataclass
class PlacementsOptions:
    """``calyrex placements``'s options."""

    num_layers: int = 28
    """The decoder layers of the model (SmolLM2-135M: 30, Qwen2.5-1.5B: 28)."""


@options_from(PlacementsOptions)
def placements(**options: Any) -> None:
    """Print the layers each placement preset puts CAL blocks after, for a model of NUM_LAYERS."""
    num_layers = PlacementsOptions(**options).num_layers
    for name in PRESETS:
        layers = placement_layers(name, num_layers)
        print(f"{name:13s} {len(layers):3d} blocks  {layers}")


@dataclass
class InspectOptions:
    """``calyrex inspect``'s options."""

    adapter: str
    """An adapter directory: calyrex's files (CALYREX, ParallelMLP) or PEFT's (LoRA)."""


@options_from(InspectOptions)
def inspect_adapter(**options: Any) -> None:
    """Print an adapter's method, configuration, base model and size without loading a model."""
    from ..core.adapter_io import read_adapter

    config, state = read_adapter(Path(InspectOptions(**options).adapter))
    shown = {k: config[k] for k in ("method", "config", "base_model") if k in config}
    samples = shown.get("base_model", {}).pop("weight_samples", None)
    print(json.dumps(shown, indent=2))
    if samples is not None:
        print(f"base weights fingerprinted in {len(samples)} tensors")
    print(f"{sum(t.numel() for t in state.values()):,} adapter parameters in {len(state)} tensors")
