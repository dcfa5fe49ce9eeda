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
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..resolve import resolve_model

    model = resolve_model(model)
    tok = AutoTokenizer.from_pretrained(model)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    hf_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype).to(device).eval()
    if adapter:
        hf_model = attach_adapter(hf_model, adapter, tokenizer=tok)
    return hf_model, tok
