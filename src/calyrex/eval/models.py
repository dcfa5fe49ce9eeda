"""Load the model under evaluation: a base model plus an optional adapter of any method.

Every adapter goes through :func:`calyrex.load_adapter`, which checks and loads CAL and
ParallelMLP adapters and hands a PEFT adapter (the LoRA baseline) to PEFT's own loader.
"""

from __future__ import annotations

from typing import Any


def attach_adapter(model: Any, adapter: str, tokenizer: Any = None) -> Any:
    """``model`` with the adapter at ``adapter`` loaded (eval mode): CAL, ParallelMLP or PEFT LoRA."""
    from ..loading import load_adapter

    return load_adapter(model, adapter, tokenizer=tokenizer).eval()


def load_model(
    model: str, adapter: str | None = None, dtype: str = "auto", device: str | None = None
) -> tuple[Any, Any]:
    """(model, tokenizer) for ``model`` (a directory or hub id) with ``adapter`` attached."""
    from ..loading import load_model as load

    return load(model, adapter, dtype, device)
