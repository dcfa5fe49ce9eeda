"""The one model loader of every command (``load_model``: a name, directory or hub id through
:func:`calyrex.backbones.resolve.resolve_model`, plus an optional adapter) and ``load_adapter``: files
(checked by ``calyrex.core.adapter_io``) → a wrapped model (``calyrex.adapters.methods``).

Every model these return takes the batch ``encode_chat`` returns, ``system_mask`` included
(:func:`calyrex.adapters.methods.accept_system_mask`): callers never branch on the method.
"""

from __future__ import annotations

import os
from typing import Any

from torch import nn

from ..core.adapter_io import (
    WEIGHTS_NAME,
    AdapterError,
    check_base,
    is_peft_adapter,
    read_config,
    read_weights,
    resolve_dir,
)
from ..span.markers import SpanMarkers, span_markers_reason
from .methods import accept_system_mask, build


def load_adapter(
    model: nn.Module,
    path_or_id: str | os.PathLike,
    revision: str | None = None,
    tokenizer: Any = None,
) -> nn.Module:
    """Wrap ``model`` with the adapter saved at ``path_or_id`` (a directory or a hub id).

    CALYREX and ParallelMLP adapters are checked and loaded here; a PEFT (LoRA) adapter is
    handed to PEFT's own loader (its model then takes ``system_mask`` and ignores it).
    ``tokenizer`` (optional) rebuilds the fallback span markers; without it the markers saved
    with the adapter are used.
    """
    directory = resolve_dir(path_or_id, revision)
    if is_peft_adapter(directory):
        from peft import PeftModel

        return accept_system_mask(PeftModel.from_pretrained(model, str(directory)))
    config = read_config(directory)
    check_base(config, model, directory)
    state = read_weights(directory, config)
    wrapped = build(config["method"], model, config["config"])
    expected = set(wrapped.adapter_state_dict())
    if set(state) != expected:
        wrapped.remove()
        raise AdapterError(
            f"{directory / WEIGHTS_NAME} does not match its config: missing "
            f"{sorted(expected - set(state))[:4]}, unexpected {sorted(set(state) - expected)[:4]}"
        )
    try:
        wrapped.load_adapter_state_dict(state)
    except RuntimeError as err:
        wrapped.remove()
        raise AdapterError(
            f"{directory / WEIGHTS_NAME} has tensors of the wrong shape: {err}"
        ) from err
    if tokenizer is not None:
        wrapped.markers, wrapped.markers_reason = span_markers_reason(tokenizer)
    elif config.get("span_markers"):
        wrapped.markers = SpanMarkers.from_dict(config["span_markers"])
    else:
        wrapped.markers_reason = "the adapter was saved without them; pass tokenizer="
    return wrapped


def save_adapter(model: nn.Module, directory: str | os.PathLike) -> None:
    """Write a calyrex model's adapter (``model.save_adapter``); PEFT models save themselves."""
    if hasattr(model, "save_adapter"):
        model.save_adapter(str(directory))
    else:
        model.save_pretrained(str(directory))


def load_model(
    model: str,
    adapter: str | None = None,
    dtype: str = "auto",
    device: str | None = None,
    revision: str | None = None,
    trust_remote_code: bool = False,
    **from_pretrained: Any,
) -> tuple[nn.Module, Any]:
    """(model in eval mode, tokenizer): ``model`` through the one resolver, ``adapter`` on it.

    ``model``: a directory, a hub id or a registered name (``calyrex.backbones.resolve.NAMED_MODELS``:
    ``ruleworld``, ``smollm2``). ``dtype``: ``auto`` (bf16 where this machine is fast at it, else
    fp32: ``calyrex.backbones.precision``), or ``float32`` / ``bfloat16`` / ``float16``; ``device`` None:
    CUDA when available; ``revision`` and ``trust_remote_code`` as for ``from_pretrained``, for
    the model and its tokenizer; ``from_pretrained``: more keywords for the model's
    ``from_pretrained`` (``attn_implementation``). Whatever the method (none, CAL, ParallelMLP,
    LoRA), the model takes ``system_mask``.
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
    return accept_system_mask(loaded.to(torch_dtype).eval()), tok
