"""Attach the adapter under evaluation to a loaded model (the model itself is loaded by
:func:`calyrex.adapters.loading.load_model`, the one loader of every command).

Every adapter goes through :func:`calyrex.load_adapter`, which checks and loads CAL and
ParallelMLP adapters and hands a PEFT adapter (the LoRA baseline) to PEFT's own loader.
"""

from __future__ import annotations

from typing import Any


def attach_adapter(model: Any, adapter: str, tokenizer: Any = None) -> Any:
    """``model`` with the adapter at ``adapter`` loaded (eval mode): CAL, ParallelMLP or PEFT LoRA."""
    from ..adapters.loading import load_adapter

    return load_adapter(model, adapter, tokenizer=tokenizer).eval()
