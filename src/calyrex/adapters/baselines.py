"""Parameter-matched baselines (architecture.md, "Baselines").

- ParallelMLP: a zero-initialised SwiGLU on the residual stream at CALYREX's placement, with no
  access to the system span; width solved to match CAL's parameter count.
- LoRA: PEFT on every linear projection of every layer; rank solved to match, with PEFT's
  ``rank_pattern`` giving some projections one more rank so the count lands within a few params
  (the model: :class:`calyrex.adapters.lora.LoraBaseline`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..core import hf
from ..core.block import ParallelMLPBlock
from ..core.config import BlockConfig, CalyrexConfig
from ..core.model import CalyrexModel
from ..core.wrap import new_block, place, seeded

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class ParallelMLPConfig(BlockConfig):
    """A SwiGLU of width ``intermediate_size`` after each placed layer (solved to match CAL)."""


def cal_budget(model: nn.Module, config: CalyrexConfig) -> int:
    """Trainable parameters the CAL configuration adds to ``model`` (counted on the meta device)."""
    cfg = config.resolve(model.config)
    with torch.device("meta"):
        block = new_block(model, cfg)
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
    hf.decoder_layers(model)
    cfg = config.resolve(model.config)
    hidden = model.config.hidden_size
    blocks = seeded(
        seed,
        lambda: {
            i: ParallelMLPBlock(hidden, cfg.intermediate_size, cfg.norm_eps, cfg.init_std)
            for i in cfg.layers
        },
    )
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


def new_lora(model: nn.Module, config: CalyrexConfig, seed: int | None = None) -> nn.Module:
    """PEFT LoRA on all decoder-layer projections with CAL's trainable parameters at ``config``
    (±1 module), as a :class:`~calyrex.adapters.lora.LoraBaseline`."""
    from .lora import LoraBaseline, LoraConfig  # PEFT: an optional dependency

    hf.decoder_layers(model)
    rank, pattern = lora_rank_pattern(model, cal_budget(model, config))
    lora = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        lora_dropout=0.0,
        target_modules=list(LORA_TARGETS),
        rank_pattern=pattern,
        alpha_pattern={k: 2 * v for k, v in pattern.items()},
        task_type="CAUSAL_LM",
    )
    return seeded(seed, lambda: LoraBaseline.from_config(model, lora))


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
