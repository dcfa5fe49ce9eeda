"""CALYREX variants of vLLM's Qwen2 (Qwen2 / 2.5), Qwen3 and Llama (Llama 3.x, Mistral) models.

The stock model is built unchanged; each placed decoder layer then gets a :class:`KeyBiasCAL`
(``model.layers.<i>.cal``) applied to its output. vLLM layers return ``(hidden, residual)``
un-summed for the next layer's fused add + RMSNorm: a CAL layer returns ``(0, x)`` with
``x = CAL(hidden + residual)``, so the next layer and the final norm see exactly ``x``.

The per-token system flags of a step are data of that one forward call: the model's ``forward``
computes them from the runner's ``calyrex_spans`` (``calyrex.vllm.runner``) and its CAL layers
read them during that call only. vLLM's model loop calls every decoder layer as
``layer(positions, hidden_states, residual)``, with no slot for more, so rather than as an
argument (which would mean copying vLLM's model forward, one per family) they travel in a
context variable that the model's ``forward`` sets around the stock forward and resets in
``finally`` (:func:`step_flags`, :func:`current_flags`). No layer holds them: a step's flags
cannot outlive its call, and another thread (or a nested call) sees its own.

Legend: T scheduled tokens, D hidden, R requests in the step.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
from torch import nn

from ..core.names import BLOCKS_PREFIX
from .block import KeyBiasCAL
from .span import token_flags

_STEP_FLAGS: ContextVar[torch.Tensor | None] = ContextVar("calyrex_step_flags", default=None)


@contextmanager
def step_flags(flags: torch.Tensor) -> Iterator[None]:
    """Within the block, :func:`current_flags` is ``flags`` (T,) bool (then what it was)."""
    token = _STEP_FLAGS.set(flags)
    try:
        yield
    finally:
        _STEP_FLAGS.reset(token)


def current_flags() -> torch.Tensor:
    """(T,) bool: the system flags of the forward call being run (:func:`step_flags`)."""
    flags = _STEP_FLAGS.get()
    if flags is None:
        raise RuntimeError("a calyrex CAL layer ran outside a calyrex model's forward")
    return flags


class CalLayerMixin:
    """A stock decoder layer followed by its CAL block (``self.cal``)."""

    cal: KeyBiasCAL

    def forward(
        self, positions: torch.Tensor, hidden_states: torch.Tensor, residual: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h, r = super().forward(positions, hidden_states, residual)  # type: ignore[misc]
        x = h if r is None else h + r  # (T, D) the residual stream after this layer
        x = self.cal(x, current_flags())
        return torch.zeros_like(x), x


_LAYER_CLASSES: dict[type, type] = {}


def _cal_layer_class(host: type) -> type:
    """``host``'s decoder-layer class with a CAL block after it (one subclass per host class)."""
    if host not in _LAYER_CLASSES:
        _LAYER_CLASSES[host] = type(f"Cal{host.__name__}", (CalLayerMixin, host), {})
    return _LAYER_CLASSES[host]


def calyrex_settings(hf_config: Any) -> dict[str, Any]:
    """The ``calyrex`` entry an exported config carries (``calyrex export-vllm``)."""
    settings = getattr(hf_config, "calyrex", None)
    if not isinstance(settings, dict) or "config" not in settings:
        raise ValueError(
            "this model directory has no 'calyrex' entry in its config.json: build one with "
            "`calyrex export-vllm --model M --adapter A --out DIR`"
        )
    return settings


class CalyrexMixin:
    """Adds CAL blocks to a stock vLLM causal LM after its ``__init__``."""

    model: Any
    token_lookback_depth = 0  # the span is fixed per request (calyrex.vllm.inputs), no lookback

    def _add_cal(self, vllm_config: Any, prefix: str) -> None:
        from vllm.distributed import get_pp_group, get_tensor_model_parallel_world_size
        from vllm.platforms import current_platform

        if get_tensor_model_parallel_world_size() > 1 or get_pp_group().world_size > 1:
            raise ValueError("calyrex.vllm runs with tensor/pipeline parallel size 1 only")
        if vllm_config.use_v2_model_runner:
            raise ValueError(
                "calyrex.vllm passes the system span through vLLM's V1 model runner; start vLLM "
                "with VLLM_USE_V2_MODEL_RUNNER=0 (a V2 ModelState path is not written yet)"
            )
        if not vllm_config.model_config.enforce_eager:
            raise ValueError(
                "calyrex.vllm needs --enforce-eager (enforce_eager=True): a compiled or "
                "CUDA-graph-captured forward would keep the system span of the capture batch"
            )
        cfg = calyrex_settings(vllm_config.model_config.hf_config)["config"]
        hidden = vllm_config.model_config.hf_config.get_text_config().hidden_size
        base = f"{prefix}.model" if prefix else "model"
        for i in cfg["layers"]:
            layer = self.model.layers[i]
            layer.__class__ = _cal_layer_class(type(layer))
            layer.cal = KeyBiasCAL(
                hidden,
                cfg,
                vllm_config.cache_config,
                prefix=f"{base}.layers.{i}.cal",
                supported=_cpu_head_sizes() if current_platform.is_cpu() else None,
            )

    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor,
        intermediate_tensors: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        calyrex_spans: torch.Tensor | None = None,  # (R, 2) [start, end) per request
        calyrex_query_start_loc: torch.Tensor | None = None,  # (R+1,)
        **kwargs: Any,
    ) -> Any:
        if calyrex_spans is None or calyrex_query_start_loc is None:
            raise RuntimeError(
                "the vLLM model runner passed no calyrex_spans: calyrex.register() did not "
                "patch it (is the calyrex plugin allowed by VLLM_PLUGINS?)"
            )
        with step_flags(token_flags(calyrex_spans, calyrex_query_start_loc, positions)):
            return super().forward(  # type: ignore[misc]
                input_ids, positions, intermediate_tensors, inputs_embeds, **kwargs
            )

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Adapter tensors into the CAL blocks; everything else to vLLM's own loader."""
        ours: dict[str, torch.Tensor] = {}

        def stock() -> Iterable[tuple[str, torch.Tensor]]:
            for name, tensor in weights:
                if name.startswith(BLOCKS_PREFIX):
                    ours[name] = tensor
                else:
                    yield name, tensor

        loaded = set(super().load_weights(stock()))  # type: ignore[misc]
        return loaded | self._load_cal(ours)

    def _load_cal(self, tensors: dict[str, torch.Tensor]) -> set[str]:
        params = {
            f"{BLOCKS_PREFIX}{name.split('.layers.')[1].replace('.cal.', '.', 1)}": (name, p)
            for name, p in self.named_parameters()  # type: ignore[attr-defined]
            if ".cal." in name
        }
        missing, unexpected = sorted(set(params) - set(tensors)), sorted(set(tensors) - set(params))
        if missing or unexpected:
            raise ValueError(
                f"calyrex adapter tensors do not match the model's CAL blocks: missing "
                f"{missing[:4]}, unexpected {unexpected[:4]}"
            )
        loaded = set()
        for key, (name, param) in params.items():
            value = tensors[key]
            if value.shape != param.shape:
                raise ValueError(
                    f"adapter tensor {key} has shape {tuple(value.shape)}, the model's "
                    f"{name} {tuple(param.shape)}"
                )
            with torch.no_grad():
                param.copy_(value.to(param.dtype))
            loaded.add(name)
        return loaded


def _cpu_head_sizes() -> list[int]:
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return CPUAttentionBackend.get_supported_head_sizes()


def _model_class(stock: type, name: str) -> type:
    def __init__(self: nn.Module, *, vllm_config: Any, prefix: str = "") -> None:
        stock.__init__(self, vllm_config=vllm_config, prefix=prefix)
        self._add_cal(vllm_config, prefix)

    return type(name, (CalyrexMixin, stock), {"__init__": __init__})


# calyrex variant → (vLLM model module, the stock class it extends)
_STOCK = {
    "CalyrexQwen2ForCausalLM": ("qwen2", "Qwen2ForCausalLM"),
    "CalyrexQwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),
    "CalyrexLlamaForCausalLM": ("llama", "LlamaForCausalLM"),
}


def __getattr__(name: str) -> type:
    """``calyrex.vllm.models:CalyrexQwen2ForCausalLM`` (vLLM's lazy registry imports by name)."""
    if name not in _STOCK:
        raise AttributeError(name)
    module, stock = _STOCK[name]
    vllm_module = importlib.import_module(f"vllm.model_executor.models.{module}")
    cls = _model_class(getattr(vllm_module, stock), name)
    globals()[name] = cls
    return cls
