"""Registry of adapter methods: name → builder. Adding a method is one function and one line.

Every builder takes the base model and a :class:`CalyrexConfig`: for CALYREX it is the block
configuration; for the baselines it sets the parameter budget (and, for ParallelMLP, the
placement) to match.

One batch feeds every method: ``encode_chat``'s ``input_ids``, ``attention_mask`` and
``system_mask``. A calyrex model (CAL or ParallelMLP blocks) reads ``system_mask``; a model with
no span pathway (the base model, PEFT LoRA) takes it and ignores it (:func:`accept_system_mask`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch import nn

from ..core.config import CalyrexConfig
from ..core.model import CalyrexModel
from ..core.wrap import wrap
from .baselines import (
    ParallelMLPConfig,
    cal_budget,
    parallel_mlp_config,
    wrap_lora,
    wrap_parallel_mlp,
)

Builder = Callable[[nn.Module, CalyrexConfig, int | None], nn.Module]

METHODS: dict[str, Builder] = {
    "calyrex": lambda model, cfg, seed: wrap(model, cfg, seed=seed),
    "parallel_mlp": lambda model, cfg, seed: wrap_parallel_mlp(
        model, parallel_mlp_config(model, cfg), seed
    ),
    "lora": lambda model, cfg, seed: accept_system_mask(
        wrap_lora(model, cal_budget(model, cfg), seed)
    ),
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
    from ..core.model import check_unwrapped

    check_method(method)
    check_unwrapped(model)  # before any method touches it (PEFT would inject into calyrex layers)
    return METHODS[method](model, config or CalyrexConfig(), seed)


def build(method: str, model: nn.Module, config: dict[str, Any]) -> nn.Module:
    if method not in LOADERS:
        raise ValueError(
            f"unknown adapter method {method!r}; calyrex-format adapters are {sorted(LOADERS)}"
        )
    return LOADERS[method](model, config)


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

    A calyrex model comes back untouched (it reads the span). Otherwise the HF model (the one
    inside a PEFT model: PEFT's forward calls it, PEFT's ``generate`` calls its ``generate``, and
    ``merge_and_unload`` gives it back) gets a forward pre-hook that drops the keyword, and a
    ``generate`` that drops it before HF validates its keywords (HF rejects unknown ones). Both
    are a module-level function, so ``copy.deepcopy`` and pickle keep them. Idempotent.
    """
    if is_calyrex(model):
        return model
    get_base_model = getattr(model, "get_base_model", None)  # a PEFT model
    host = get_base_model() if get_base_model is not None else model
    current = vars(host).get("generate")
    if not (isinstance(current, functools.partial) and current.func is _generate_without_span):
        host.register_forward_pre_hook(_drop_system_mask, with_kwargs=True)
        host.generate = functools.partial(_generate_without_span, host)
    return model


def _drop_system_mask(
    module: nn.Module, args: tuple, kwargs: dict[str, Any]
) -> tuple[tuple, dict[str, Any]] | None:
    if "system_mask" not in kwargs:
        return None
    return args, {k: v for k, v in kwargs.items() if k != "system_mask"}


def _generate_without_span(model: nn.Module, *args: Any, system_mask: Any = None, **kw: Any) -> Any:
    return type(model).generate(model, *args, **kw)  # the class's generate: HF's
