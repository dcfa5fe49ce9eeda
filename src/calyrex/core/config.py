"""Typed configuration of adapter blocks. Serialised as JSON next to the adapter weights."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Self

from .placement import placement_layers


@dataclass
class BlockConfig:
    """What every adapter-block method shares: placement, FFN width, norm eps, init std.

    Fields left at ``None`` are taken from the backbone by :meth:`resolve`.
    """

    placement: str = "late8th"
    layers: list[int] | None = None  # explicit layer indices; overrides ``placement``
    intermediate_size: int | None = None
    norm_eps: float | None = None
    init_std: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def resolve(self, hf_config: Any) -> Self:
        """A copy with the layer list and every geometry field filled from ``hf_config``."""
        placement = self.layers if self.layers is not None else self.placement
        return dataclasses.replace(
            self,
            layers=placement_layers(placement, hf_config.num_hidden_layers),
            intermediate_size=self.intermediate_size or hf_config.intermediate_size,
            norm_eps=self.norm_eps or getattr(hf_config, "rms_norm_eps", 1e-6),
            init_std=self.init_std or getattr(hf_config, "initializer_range", 0.02),
            **self._resolve_more(hf_config),
        )

    def _resolve_more(self, hf_config: Any) -> dict[str, Any]:
        return {}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields {sorted(unknown)}")
        return cls(**data)


@dataclass
class CalyrexConfig(BlockConfig):
    """Where CAL blocks go and their geometry: heads, kv heads (GQA), head_dim default to the host's."""

    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    attention_bias: bool = False
    init_from_host: bool = False  # copy W_Q/W_K/W_V and the attention norm from the host layer
    ffn: bool = True  # False: attention-only blocks (no SwiGLU after the cross-attention)
    # not the paper's method: each block also re-weights its host layer's self-attention to
    # tokens outside the system span (a learned per-query, per-head logit bias, 0 at init)
    host_gate: bool = False

    def variant(self) -> list[str]:
        """The fields in which this block departs from the paper's (``["ffn=False"]``), or []."""
        paper = {"ffn": True, "host_gate": False}
        return [f"{k}={getattr(self, k)}" for k, v in paper.items() if getattr(self, k) != v]

    def _resolve_more(self, hf_config: Any) -> dict[str, Any]:
        heads = self.num_heads or hf_config.num_attention_heads
        host_head_dim = (
            getattr(hf_config, "head_dim", None)
            or hf_config.hidden_size // hf_config.num_attention_heads
        )
        return {
            "num_heads": heads,
            "num_kv_heads": self.num_kv_heads
            or getattr(hf_config, "num_key_value_heads", None)
            or heads,
            "head_dim": self.head_dim or host_head_dim,
        }
