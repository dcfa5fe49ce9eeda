"""Everything that knows Hugging Face internals lives here, so a transformers change is one file.

calyrex never re-derives HF attention: it calls the original decoder layers opaquely and adds
its blocks on their outputs (``calyrex.core.layer``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .names import host_name, is_adapter_param

# model_type → attribute path of the decoder layer list inside the *ForCausalLM model
DECODER_LAYERS: dict[str, str] = {
    "qwen2": "model.layers",
    "qwen3": "model.layers",
    "llama": "model.layers",
    "mistral": "model.layers",
}

FINGERPRINT_FIELDS = (
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
)


class UnsupportedModelError(ValueError):
    """The backbone's architecture is not one calyrex knows how to wrap."""


def model_type(model: nn.Module) -> str:
    config = getattr(model, "config", None)
    if config is None:
        raise UnsupportedModelError(
            f"{type(model).__name__} has no HF config; pass a transformers model"
        )
    return getattr(config, "model_type", "?")


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layer list of a supported causal LM, or a clear error naming what is not."""
    kind = model_type(model)
    if kind not in DECODER_LAYERS:
        raise UnsupportedModelError(
            f"unsupported architecture {kind!r} ({type(model).__name__}); calyrex supports "
            f"{', '.join(sorted(DECODER_LAYERS))}"
        )
    module: Any = model
    for part in DECODER_LAYERS[kind].split("."):
        module = getattr(module, part, None)
        if module is None:
            raise UnsupportedModelError(
                f"{type(model).__name__} has no {DECODER_LAYERS[kind]!r}; pass the *ForCausalLM model"
            )
    return module


def fingerprint(model: nn.Module) -> dict[str, Any]:
    """Architecture facts an adapter depends on; two models that differ here cannot share one."""
    cfg = model.config
    out = {name: getattr(cfg, name, None) for name in FINGERPRINT_FIELDS}
    out["head_dim"] = out["head_dim"] or cfg.hidden_size // cfg.num_attention_heads
    out["num_key_value_heads"] = out["num_key_value_heads"] or cfg.num_attention_heads
    return out


@torch.no_grad()
def weight_signature(model: nn.Module, n: int = 16) -> list[float]:
    """A few numbers summarising the base weights: tells two checkpoints of one architecture apart.

    Means of ``n`` slices of the input embedding and of the final norm, in float64; stable across
    dtypes to ~1e-2 relative, so a bf16 load of the same weights still matches.
    """
    emb = model.get_input_embeddings().weight
    rows = emb[: max(n, 1)].double()  # (n, D)
    sig = rows.abs().mean(dim=1).tolist()
    final_norm = getattr(getattr(model, "model", model), "norm", None)
    if final_norm is not None and hasattr(final_norm, "weight"):
        sig.append(float(final_norm.weight.double().abs().mean()))
    return [round(float(x), 6) for x in sig]


SAMPLES_PER_TENSOR = 8


def sample_positions(numel: int, n: int) -> torch.Tensor:
    """``min(n, numel)`` evenly spaced flat positions in ``[0, numel)``, first and last included.

    Integer arithmetic (int64): a float32 ``linspace`` cannot represent positions above 2^24, so
    its last sample rounded past the end of any tensor with more than ~16.7 M elements.
    """
    k = min(n, numel)
    if k <= 1:
        return torch.zeros(k, dtype=torch.long)
    steps = torch.arange(k, dtype=torch.long)
    return (steps * (numel - 1) * 2 + (k - 1)) // (2 * (k - 1))  # round(i * (numel-1) / (k-1))


@torch.no_grad()
def weight_samples(model: nn.Module, n: int = SAMPLES_PER_TENSOR) -> dict[str, list[float]]:
    """``n`` values of every base weight tensor at fixed, evenly spaced flat positions.

    Covers every decoder layer, so an adapter trained on one checkpoint is told apart from any
    other checkpoint of the same architecture (a fine-tune changes every layer, not the
    embeddings alone). Names are those of the bare HF model; adapter parameters are skipped.
    """
    out: dict[str, list[float]] = {}
    for name, param in model.named_parameters():
        if is_adapter_param(name):
            continue
        flat = param.detach().reshape(-1)
        idx = sample_positions(flat.numel(), n)
        out[host_name(name)] = [float(x) for x in flat[idx.to(flat.device)].float().tolist()]
    return out


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """Token ids that end a reply: the model's generation config's ``eos_token_id`` (one id or
    a list; none without a model) and the tokenizer's end of sequence."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = set(ids if isinstance(ids, list) else [] if ids is None else [ids])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


def weights_dtype(model: nn.Module) -> str:
    return str(next(model.parameters()).dtype).removeprefix("torch.")


def base_identity(model: nn.Module) -> dict[str, Any]:
    """Name, revision, architecture fingerprint and weight signature of a base model."""
    cfg = model.config
    return {
        "name_or_path": getattr(cfg, "_name_or_path", "") or "",
        "revision": getattr(cfg, "_commit_hash", None),
        "fingerprint": fingerprint(model),
        "weight_signature": weight_signature(model),
        "weights_dtype": weights_dtype(model),
        "weight_samples": weight_samples(model),
    }


def layer_hidden(output: Any) -> torch.Tensor:
    """Hidden states out of a decoder layer: a tensor in transformers 5, a tuple in 4.x."""
    return output if isinstance(output, torch.Tensor) else output[0]


def with_layer_hidden(output: Any, hidden: torch.Tensor) -> Any:
    """Return the layer output in the form it came, with the hidden states replaced."""
    if isinstance(output, torch.Tensor):
        return hidden
    return (hidden, *output[1:])


def layer_cache(kwargs: dict[str, Any]) -> Any:
    """The HF cache a decoder layer (or a causal LM) was called with; the keyword was renamed."""
    cache = kwargs.get("cache")
    return cache if cache is not None else kwargs.get("past_key_values")


def cache_length(cache: Any, layer: int = 0) -> int:
    """Tokens held by ``cache`` for decoder layer ``layer`` (0 without a cache)."""
    if cache is None or not hasattr(cache, "get_seq_length"):
        return 0
    return int(cache.get_seq_length(layer))


def output_cache(output: Any) -> Any:
    return getattr(output, "cache", None) or getattr(output, "past_key_values", None)


def cache_kv(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per decoder layer (K, V), each (B, Hkv, L, Dh), of a full-attention ``DynamicCache``."""
    from transformers.cache_utils import DynamicLayer

    if any(type(layer) is not DynamicLayer for layer in cache.layers):
        raise ValueError(
            "only full-attention DynamicCache layers can be batched (no sliding window or "
            "recurrent layers)"
        )
    return [(layer.keys, layer.values) for layer in cache.layers]


def cache_from_kv(kv: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A ``DynamicCache`` holding these per-layer (K, V) tensors."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=kv)


def cache_kwargs(model: nn.Module, cache: Any) -> dict[str, Any]:
    """The keyword a model's forward takes its KV cache by (``cache`` since transformers 5.x)."""
    import inspect

    base = getattr(model, "base", model)  # a CalyrexModel forwards to its HF model
    names = inspect.signature(base.forward).parameters
    return {"cache": cache} if "cache" in names else {"past_key_values": cache}
