"""Registry of adapter methods: name → builder. Adding a method is one function and one line.

Every builder takes the base model and a :class:`CalyrexConfig`: for CALYREX it is the block
configuration; for the baselines it sets the parameter budget (and, for ParallelMLP, the
placement) to match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from .baselines import (
    ParallelMLPConfig,
    cal_budget,
    parallel_mlp_config,
    wrap_lora,
    wrap_parallel_mlp,
)
from .config import CalyrexConfig
from .wrap import wrap

Builder = Callable[[nn.Module, CalyrexConfig, int | None], nn.Module]

METHODS: dict[str, Builder] = {
    "calyrex": lambda model, cfg, seed: wrap(model, cfg, seed=seed),
    "parallel_mlp": lambda model, cfg, seed: wrap_parallel_mlp(
        model, parallel_mlp_config(model, cfg), seed
    ),
    "lora": lambda model, cfg, seed: wrap_lora(model, cal_budget(model, cfg), seed),
}

# how a saved calyrex-format adapter is rebuilt from its config (LoRA is saved in PEFT's format)
LOADERS: dict[str, Callable[[nn.Module, dict[str, Any]], nn.Module]] = {
    "calyrex": lambda model, c: wrap(model, CalyrexConfig.from_dict(c)),
    "parallel_mlp": lambda model, c: wrap_parallel_mlp(model, ParallelMLPConfig.from_dict(c)),
}


def check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")


def adapt(
    model: nn.Module,
    method: str = "calyrex",
    config: CalyrexConfig | None = None,
    seed: int | None = None,
) -> nn.Module:
    """Freeze ``model`` and add the adapter ``method``, identity at initialisation."""
    from .model import check_unwrapped

    check_method(method)
    check_unwrapped(model)  # before any method touches it (PEFT would inject into calyrex layers)
    return METHODS[method](model, config or CalyrexConfig(), seed)


def build(method: str, model: nn.Module, config: dict[str, Any]) -> nn.Module:
    if method not in LOADERS:
        raise ValueError(
            f"unknown adapter method {method!r}; calyrex-format adapters are {sorted(LOADERS)}"
        )
    return LOADERS[method](model, config)
