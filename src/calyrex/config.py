"""Typed configuration of the CAL blocks. Serialised as JSON next to the adapter weights."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .placement import placement_layers


@dataclass
class CalyrexConfig:
    """Where CAL blocks go and their geometry.

    Every geometry field left at ``None`` is taken from the backbone (heads, kv heads for GQA,
    head_dim, intermediate size, RMSNorm eps, init std) by :meth:`resolve`.
    """

    placement: str = "late8th"
    layers: list[int] | None = None  # explicit layer indices; overrides ``placement``
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    norm_eps: float | None = None
    init_std: float | None = None
    attention_bias: bool = False
    init_from_host: bool = False  # copy W_Q/W_K/W_V and the attention norm from the host layer
    extra: dict[str, Any] = field(default_factory=dict)

    def resolve(self, hf_config: Any) -> CalyrexConfig:
        """A copy with the layer list and every geometry field filled from ``hf_config``."""
        heads = self.num_heads or hf_config.num_attention_heads
        hidden = hf_config.hidden_size
        host_head_dim = (
            getattr(hf_config, "head_dim", None) or hidden // hf_config.num_attention_heads
        )
        return dataclasses.replace(
            self,
            layers=placement_layers(
                self.layers if self.layers is not None else self.placement,
                hf_config.num_hidden_layers,
            ),
            num_heads=heads,
            num_kv_heads=self.num_kv_heads
            or getattr(hf_config, "num_key_value_heads", None)
            or heads,
            head_dim=self.head_dim or host_head_dim,
            intermediate_size=self.intermediate_size or hf_config.intermediate_size,
            norm_eps=self.norm_eps or getattr(hf_config, "rms_norm_eps", 1e-6),
            init_std=self.init_std or getattr(hf_config, "initializer_range", 0.02),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CalyrexConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown CalyrexConfig fields {sorted(unknown)}")
        return cls(**data)
