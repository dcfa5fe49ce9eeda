"""The one model loader of every command (``load_model``: a name, directory or hub id through
:func:`calyrex.backbones.resolve.resolve_model`, plus an optional adapter) and ``load_adapter``: files
(read and checked by ``calyrex.core.adapter_io``) → a wrapped model (``calyrex.adapters.methods``).

Every model these return takes the batch ``encode_chat`` returns, ``system_mask`` included
(:func:`calyrex.adapters.methods.accept_system_mask`): callers never branch on the method.
"""

from __future__ import annotations

import os
from typing import Any

from torch import nn

from ..core.adapter_io import check_base, read_adapter, resolve_dir
from ..span.markers import SpanMarkers, span_markers_reason
from .methods import accept_system_mask, rebuild


def load_adapter(
    model: nn.Module,
    path_or_id: str | os.PathLike,
    revision: str | None = None,
    tokenizer: Any = None,
) -> nn.Module:
    """Wrap ``model`` with the adapter saved at ``path_or_id`` (a directory or a hub id), of
    any method: calyrex's files (CALYREX, ParallelMLP; checked against ``model``) or PEFT's
    (LoRA). The adapter comes back trainable, as ``adapt`` gives it (``.eval()`` for inference;
    freeze it with ``requires_grad_(False)``). A state that does not match its config is refused
    and ``model`` given back unwrapped. ``tokenizer`` (optional) rebuilds the fallback span
    markers; without it the markers saved with the adapter are used.
    """
    directory = resolve_dir(path_or_id, revision)
    config, state = read_adapter(directory)
    if config["method"] != "lora":  # PEFT's files record no base model to check
        check_base(config, model, directory)
    wrapped = rebuild(config["method"], model, config["config"])
    try:
        wrapped.load_adapter_state_dict(state)
    except ValueError as err:
        wrapped.unload()
        raise type(err)(f"{directory}: {err}") from err
    if not wrapped.uses_span:
        return wrapped
    if tokenizer is not None:
        wrapped.markers, wrapped.markers_reason = span_markers_reason(tokenizer)
    elif config.get("span_markers"):
        wrapped.markers = SpanMarkers.from_dict(config["span_markers"])
    else:
        wrapped.markers_reason = "the adapter was saved without them; pass tokenizer="
    return wrapped


def save_adapter(model: nn.Module, directory: str | os.PathLike) -> None:
    """Write an adapted model's adapter files (``model.save_adapter``: the method's format)."""
    model.save_adapter(str(directory))


def load_model(
    model: str,
    adapter: str | None = None,
    dtype: str = "auto",
    device: str | None = None,
    revision: str | None = None,
    trust_remote_code: bool = False,
    merge_lora: bool = False,
    **from_pretrained: Any,
) -> tuple[nn.Module, Any]:
    """(model in eval mode, tokenizer): ``model`` through the one resolver, ``adapter`` on it.

    ``model``: a directory, a hub id or a registered name (``calyrex.backbones.resolve.NAMED_MODELS``:
    ``ruleworld``, ``smollm2``). ``dtype``: ``auto`` (bf16 where this machine is fast at it, else
    fp32: ``calyrex.backbones.precision``), or ``float32`` / ``bfloat16`` / ``float16``; ``device`` None:
    CUDA when available; ``revision`` and ``trust_remote_code`` as for ``from_pretrained``, for
    the model and its tokenizer; ``merge_lora``: a LoRA adapter folded into the weights (PEFT's
    ``merge_and_unload``: the same function with no extra matmuls in every layer, for inference;
    CALYREX and ParallelMLP have a pathway of their own and are kept as they are);
    ``from_pretrained``: more keywords for the model's ``from_pretrained``
    (``attn_implementation``). Whatever the method (none, CAL, ParallelMLP, LoRA), the model
    takes ``system_mask``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..backbones.precision import resolve as resolve_precision
    from ..backbones.resolve import resolve_model

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch_dtype = resolve_precision(dtype, device).dtype
    path = resolve_model(model, revision)
    hub = {"revision": revision, "trust_remote_code": trust_remote_code}
    tok = AutoTokenizer.from_pretrained(path, **hub)
    hf_model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch_dtype, **hub, **from_pretrained
    )
    hf_model = hf_model.to(device)
    loaded = load_adapter(hf_model, adapter, tokenizer=tok) if adapter else hf_model
    if merge_lora and getattr(loaded, "method", None) == "lora":
        loaded = loaded.merge_and_unload()
    return accept_system_mask(loaded.to(torch_dtype).eval()), tok
