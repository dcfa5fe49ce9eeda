"""Parameter-matched baselines (architecture.md, "Baselines").

- ParallelMLP: a zero-initialised SwiGLU on the residual stream at CALYREX's placement, with no
  access to the system span; width solved to match CAL's parameter count.
- LoRA: PEFT on every linear projection of every layer; rank solved to match, with PEFT's
  ``rank_pattern`` giving some projections one more rank so the count lands within a few params.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from . import hf
from .block import CALBlock, ParallelMLPBlock
from .config import CalyrexConfig
from .placement import placement_layers

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class ParallelMLPConfig:
    placement: str = "late8th"
    layers: list[int] | None = None
    intermediate_size: int | None = None
    norm_eps: float | None = None
    init_std: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def resolve(self, hf_config: Any) -> ParallelMLPConfig:
        return dataclasses.replace(
            self,
            layers=placement_layers(
                self.layers if self.layers is not None else self.placement,
                hf_config.num_hidden_layers,
            ),
            intermediate_size=self.intermediate_size or hf_config.intermediate_size,
            norm_eps=self.norm_eps or getattr(hf_config, "rms_norm_eps", 1e-6),
            init_std=self.init_std or getattr(hf_config, "initializer_range", 0.02),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParallelMLPConfig:
        return cls(**data)


def cal_budget(model: nn.Module, config: CalyrexConfig) -> int:
    """Trainable parameters the CAL configuration adds to ``model`` (counted on the meta device)."""
    cfg = config.resolve(model.config)
    with torch.device("meta"):
        block = CALBlock(model.config.hidden_size, cfg)
    return len(cfg.layers) * sum(p.numel() for p in block.parameters())


def parallel_mlp_config(model: nn.Module, config: CalyrexConfig) -> ParallelMLPConfig:
    """The ParallelMLP at CAL's placement whose width matches CAL's parameter count."""
    cfg = config.resolve(model.config)
    hidden = model.config.hidden_size
    per_block = cal_budget(model, config) / len(cfg.layers)
    width = max(1, round((per_block - hidden) / (3 * hidden)))  # norm D + gate/up/down 3·D·W
    return ParallelMLPConfig(layers=cfg.layers, intermediate_size=width).resolve(model.config)


def wrap_parallel_mlp(
    model: nn.Module, config: ParallelMLPConfig, seed: int | None = None
) -> nn.Module:
    from .model import CalyrexModel
    from .wrap import place

    hf.decoder_layers(model)
    cfg = config.resolve(model.config)
    if seed is not None:
        torch.manual_seed(seed)
    hidden = model.config.hidden_size
    blocks = {
        i: ParallelMLPBlock(hidden, cfg.intermediate_size, cfg.norm_eps, cfg.init_std)
        for i in cfg.layers
    }
    return CalyrexModel(model, place(model, blocks), "parallel_mlp", cfg)


def _lora_modules(model: nn.Module) -> list[tuple[str, int]]:
    """(name, in + out features) of every LoRA target projection of every decoder layer."""
    out = []
    for name, module in model.named_modules():
        if (
            isinstance(module, nn.Linear)
            and name.rsplit(".", 1)[-1] in LORA_TARGETS
            and ".layers." in name
        ):
            out.append((name, module.in_features + module.out_features))
    return out


def lora_rank_pattern(model: nn.Module, target: int) -> tuple[int, dict[str, int]]:
    """Base rank and PEFT ``rank_pattern`` whose LoRA parameter count is closest to ``target``."""
    modules = _lora_modules(model)
    per_rank = sum(cost for _, cost in modules)
    rank = max(1, target // per_rank)
    remaining = target - rank * per_rank
    pattern: dict[str, int] = {}
    for name, cost in sorted(modules, key=lambda m: -m[1]):  # big projections first
        if cost <= remaining + cost // 2:
            pattern[f"^{name.replace('.', '[.]')}$"] = rank + 1  # anchored: one module only
            remaining -= cost
    return rank, pattern


def wrap_lora(model: nn.Module, target: int, seed: int | None = None) -> nn.Module:
    """PEFT LoRA on all decoder-layer projections with ``target`` trainable parameters (±1 module)."""
    from peft import LoraConfig, get_peft_model

    hf.decoder_layers(model)
    rank, pattern = lora_rank_pattern(model, target)
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        lora_dropout=0.0,
        target_modules=list(LORA_TARGETS),
        rank_pattern=pattern,
        alpha_pattern={k: 2 * v for k, v in pattern.items()},
        task_type="CAUSAL_LM",
    )
    if seed is not None:
        torch.manual_seed(seed)
    return get_peft_model(model, config)


def matched_counts(model: nn.Module, config: CalyrexConfig) -> dict[str, int]:
    """Trainable parameters of each method at the budget ``config`` sets, without building them."""
    target = cal_budget(model, config)
    rank, pattern = lora_rank_pattern(model, target)
    lora = sum(
        cost * (pattern.get(f"^{name.replace('.', '[.]')}$", rank))
        for name, cost in _lora_modules(model)
    )
    mlp = parallel_mlp_config(model, config)
    hidden = model.config.hidden_size
    return {
        "calyrex": target,
        "lora": lora,
        "parallel_mlp": len(mlp.layers) * (hidden + 3 * hidden * mlp.intermediate_size),
    }
