"""Registry of adapter methods: name → builder. Adding a method is one function and one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from .config import CalyrexConfig
from .wrap import wrap


def _calyrex(model: nn.Module, config: dict[str, Any]) -> nn.Module:
    return wrap(model, CalyrexConfig.from_dict(config))


BUILDERS: dict[str, Callable[[nn.Module, dict[str, Any]], nn.Module]] = {
    "calyrex": _calyrex,
}


def build(method: str, model: nn.Module, config: dict[str, Any]) -> nn.Module:
    if method not in BUILDERS:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(BUILDERS)}")
    return BUILDERS[method](model, config)
