"""Load the model under evaluation: a base model plus an optional adapter of any method.

``attach_adapter`` is the one place that decides how an adapter directory is loaded: a PEFT
adapter (``adapter_config.json`` with ``peft_type``, e.g. the LoRA baseline) through
``peft.PeftModel``; a calyrex adapter (CAL or ParallelMLP) through :func:`calyrex.load_adapter`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def adapter_config(path_or_id: str) -> dict[str, Any]:
    """``adapter_config.json`` of a local directory or a hub repo."""
    local = Path(path_or_id)
    if local.is_dir():
        file = local / "adapter_config.json"
    else:
        from huggingface_hub import hf_hub_download

        file = Path(hf_hub_download(path_or_id, "adapter_config.json"))
    if not file.is_file():
        raise FileNotFoundError(f"{file} does not exist: {path_or_id} is not an adapter")
    return json.loads(file.read_text())


def attach_adapter(model: Any, adapter: str, tokenizer: Any = None) -> Any:
    """``model`` with the adapter at ``adapter`` loaded (eval mode)."""
    if "peft_type" in adapter_config(adapter):
        from peft import PeftModel

        return PeftModel.from_pretrained(model, adapter).eval()
    from ..adapter_io import load_adapter

    return load_adapter(model, adapter, tokenizer=tokenizer).eval()


def load_model(
    model: str, adapter: str | None = None, dtype: str = "auto", device: str | None = None
) -> tuple[Any, Any]:
    """(model, tokenizer) for ``model`` (a directory or hub id) with ``adapter`` attached."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    hf_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype).to(device).eval()
    if adapter:
        hf_model = attach_adapter(hf_model, adapter, tokenizer=tok)
    return hf_model, tok
