"""Registry of adapter methods: name → :class:`Method`. Adding a method is one line.

Each method builds a fresh adapter on a base model from a :class:`CalyrexConfig` (for CALYREX
the block configuration; for the baselines the parameter budget, and for ParallelMLP the
placement, to match) and rebuilds a saved one from the config in its files. Every model they
give answers the adapter contract (:mod:`calyrex.adapters.contract`).

One batch feeds every model: ``encode_chat``'s ``input_ids``, ``attention_mask`` and
``system_mask``. A calyrex model (CAL or ParallelMLP blocks) reads ``system_mask``; LoRA takes it
and ignores it; a bare HF model is given that too by :func:`accept_system_mask`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from ..core.config import CalyrexConfig
from ..core.model import CalyrexModel
from ..core.wrap import wrap
from .baselines import ParallelMLPConfig, new_lora, parallel_mlp_config, wrap_parallel_mlp
from .contract import Adapted


@dataclass(frozen=True)
class Method:
    """How a method adapts a base model: anew (``config``, ``seed``), or from its saved config."""

    new: Callable[[nn.Module, CalyrexConfig, int | None], nn.Module]
    saved: Callable[[nn.Module, dict[str, Any]], nn.Module]


METHODS: dict[str, Method] = {
    "calyrex": Method(
        lambda m, cfg, seed: wrap(m, cfg, seed=seed),
        lambda m, saved: wrap(m, CalyrexConfig.from_dict(saved)),
    ),
    "parallel_mlp": Method(
        lambda m, cfg, seed: wrap_parallel_mlp(m, parallel_mlp_config(m, cfg), seed),
        lambda m, saved: wrap_parallel_mlp(m, ParallelMLPConfig.from_dict(saved)),
    ),
    "lora": Method(new_lora, lambda m, saved: _lora().from_config(m, saved)),
}


def _lora() -> type:
    """:class:`~calyrex.adapters.lora.LoraBaseline`, imported when LoRA is used: PEFT is an
    optional dependency (``calyrex[lora]``)."""
    from .lora import LoraBaseline

    return LoraBaseline


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
    from ..core.model import check_unwrapped

    check_method(method)
    check_unwrapped(model)  # before any method touches it (PEFT would inject into calyrex layers)
    return METHODS[method].new(model, config or CalyrexConfig(), seed)


def rebuild(method: str, model: nn.Module, config: dict[str, Any]) -> nn.Module:
    """``model`` with a fresh adapter of ``method`` built from its saved ``config``."""
    if method not in METHODS:
        raise ValueError(f"unknown adapter method {method!r}; the methods are {sorted(METHODS)}")
    return METHODS[method].saved(model, config)


# children through which a wrapper runs the model it wraps: torch.compile, FSDP1, (D)DP
WRAPPED_CHILD = ("_orig_mod", "_fsdp_wrapped_module", "module")


def is_calyrex(model: Any) -> bool:
    """True for a :class:`CalyrexModel` (CAL or ParallelMLP blocks: it reads ``system_mask``
    itself), also inside ``torch.compile``, FSDP1 or (Distributed)DataParallel; False for an HF
    or PEFT model."""
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    while isinstance(model, nn.Module) and not isinstance(model, CalyrexModel):
        children = model._modules
        name = next((n for n in WRAPPED_CHILD if n in children), None)
        if name is None or (
            name == "module" and not isinstance(model, DataParallel | DistributedDataParallel)
        ):
            return False
        model = children[name]
    return isinstance(model, CalyrexModel)


def accept_system_mask(model: nn.Module) -> nn.Module:
    """``model``, its ``forward`` and ``generate`` taking ``system_mask`` and ignoring it.

    A model that answers the adapter contract comes back untouched (it takes the span). A bare
    HF model gets a forward pre-hook that drops the keyword, and a ``generate`` that drops it
    before HF validates its keywords (HF rejects unknown ones). Both are a module-level
    function, so ``copy.deepcopy`` and pickle keep them. Idempotent.
    """
    if is_calyrex(model) or isinstance(model, Adapted):
        return model
    current = vars(model).get("generate")
    if not (isinstance(current, functools.partial) and current.func is _generate_without_span):
        model.register_forward_pre_hook(_drop_system_mask, with_kwargs=True)
        model.generate = functools.partial(_generate_without_span, model)
    return model


def _drop_system_mask(
    module: nn.Module, args: tuple, kwargs: dict[str, Any]
) -> tuple[tuple, dict[str, Any]] | None:
    if "system_mask" not in kwargs:
        return None
    return args, {k: v for k, v in kwargs.items() if k != "system_mask"}


def _generate_without_span(model: nn.Module, *args: Any, system_mask: Any = None, **kw: Any) -> Any:
    return type(model).generate(model, *args, **kw)  # the class's generate: HF's
