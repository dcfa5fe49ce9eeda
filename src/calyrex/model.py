"""A frozen HF causal LM with adapter blocks after some of its decoder layers.

The host is wrapped, not rewritten: forward hooks call each block on the output of its decoder
layer, and a pre-hook on the causal LM reads ``system_mask`` (or finds the span with the
fallback markers) before HF's own forward runs. So ``model(**batch)``, ``model.generate(...)``
and even a direct call of the wrapped HF model all see the system span.

Legend: B batch, T sequence, S system span, D hidden.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from . import hf
from .markers import SpanMarkers, detect_system_mask
from .span import SpanContext, SpanKV

ADAPTER_PREFIX = "cal_"


def is_adapter_param(name: str) -> bool:
    """The one name filter that defines adapter parameters: freezing, saving, counting, optimiser."""
    return any(part.startswith(ADAPTER_PREFIX) for part in name.split("."))


class CalyrexModel(nn.Module):
    """``base`` (frozen) plus ``cal_blocks[str(i)]`` applied after decoder layer ``i``."""

    def __init__(
        self,
        base: nn.Module,
        blocks: dict[int, nn.Module],
        method: str,
        config: Any,
        markers: SpanMarkers | None = None,
    ) -> None:
        super().__init__()
        self.base = base
        self.cal_blocks = nn.ModuleDict({str(i): b for i, b in sorted(blocks.items())})
        self.method = method
        self.adapter_config = config
        self.markers = markers
        self.checkpoint_blocks = False
        self._span: SpanContext | None = None
        self._prefix_grad: bool | None = None
        self._pending_system_mask: torch.Tensor | None = None
        for name, param in self.named_parameters():
            param.requires_grad_(is_adapter_param(name))
        self._install_hooks()

    # -- hooks ---------------------------------------------------------------------------------
    def _install_hooks(self) -> None:
        layers = hf.decoder_layers(self.base)
        first = min(int(i) for i in self.cal_blocks)
        self._handles = [
            self.base.register_forward_pre_hook(self._start, with_kwargs=True),
            self.base.register_forward_hook(self._finish, always_call=True),
            layers[0].register_forward_pre_hook(self._enter_prefix),
        ]
        for key in self.cal_blocks:
            self._handles.append(
                layers[int(key)].register_forward_hook(self._block_hook(int(key), first))
            )

    def _start(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Read the system span of this call (pre-hook of the causal LM)."""
        system_mask = kwargs.pop("system_mask", None)
        tokens, attention_mask, cache = hf.call_inputs(args, kwargs)
        past = hf.cache_length(cache)
        if system_mask is None and self._pending_system_mask is not None and past == 0:
            system_mask = self._pending_system_mask  # handed over by generate()
            # generate() expands rows for beams / several return sequences (repeat_interleave)
            system_mask = system_mask.repeat_interleave(
                tokens.shape[0] // system_mask.shape[0], dim=0
            )
            # without a cache each step recomputes prompt + generated tokens, never system span
            system_mask = F.pad(system_mask, (0, tokens.shape[1] - system_mask.shape[1]))
        if past > 0:
            store = getattr(cache, "_calyrex_span", None)
            if store is None:
                raise ValueError(
                    "this cache was not produced by a calyrex model: its system span is unknown"
                )
            self._span = SpanContext.continuation(store, past, tokens.shape[1])
            return args, kwargs
        batch, length = tokens.shape[:2]
        if system_mask is None and self.markers is not None and tokens.dim() == 2:
            mask2d = (
                attention_mask
                if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2
                else None
            )
            system_mask = detect_system_mask(tokens, mask2d, self.markers)
        if system_mask is None:
            system_mask = torch.zeros(batch, length, dtype=torch.bool, device=tokens.device)
        system_mask = system_mask.to(tokens.device).bool()
        if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2:
            system_mask = system_mask & attention_mask.bool()  # padding is never a key
        self._span = SpanContext.prefill(system_mask)
        return args, kwargs

    def _finish(self, module: nn.Module, args: tuple, output: Any) -> Any:
        """Leave the span's keys/values on the returned cache for the decode steps."""
        if self._prefix_grad is not None:  # the prefix raised before reaching the first block
            torch.set_grad_enabled(self._prefix_grad)
            self._prefix_grad = None
        cache = hf.output_cache(output) if output is not None else None
        if cache is not None and self._span is not None and not hasattr(cache, "_calyrex_span"):
            cache._calyrex_span = self._span.store
        return output

    def _enter_prefix(self, module: nn.Module, args: tuple) -> None:
        """Layers below the first block run without autograd when nothing there is trainable."""
        if torch.is_grad_enabled() and not self._prefix_trainable():
            self._prefix_grad = True
            torch.set_grad_enabled(False)

    def _prefix_trainable(self) -> bool:
        first = min(int(i) for i in self.cal_blocks)
        layers = hf.decoder_layers(self.base)
        modules = [self.base.get_input_embeddings(), *layers[: first + 1]]
        return any(p.requires_grad for m in modules for p in m.parameters())

    def _block_hook(self, layer: int, first: int):  # noqa: ANN202
        block = self.cal_blocks[str(layer)]

        def hook(module: nn.Module, args: tuple, output: Any) -> Any:
            if layer == first and self._prefix_grad is not None:
                torch.set_grad_enabled(self._prefix_grad)
                self._prefix_grad = None
            h = hf.layer_hidden(output)  # (B, T, D)
            if self.checkpoint_blocks and self.training and torch.is_grad_enabled():
                h = checkpoint(block, h, self._span, layer, use_reentrant=False)
            else:
                h = block(h, self._span, layer)
            return hf.with_layer_hidden(output, h)

        return hook

    # -- the HF-facing surface -----------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.base(*args, **kwargs)

    def generate(self, *args: Any, system_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
        """HF ``generate`` with the system span: its keys/values are computed once at prefill."""
        self._pending_system_mask = system_mask
        try:
            return self.base.generate(*args, **kwargs)
        finally:
            self._pending_system_mask = None

    def activation_checkpointing_enable(
        self, activation_checkpointing_kwargs: dict | None = None, **kw: Any
    ) -> None:
        """Checkpoint the host layers (non-reentrant: the frozen input needs no grad) and the blocks."""
        kwargs = {"use_reentrant": False, **(activation_checkpointing_kwargs or {})}
        enable = getattr(self.base, "activation_checkpointing_enable", None)
        if enable is not None:
            enable(activation_checkpointing_kwargs=kwargs, **kw)
        else:  # transformers < 5.20
            self.base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        self.checkpoint_blocks = True

    def activation_checkpointing_disable(self) -> None:
        disable = (
            getattr(self.base, "activation_checkpointing_disable", None)
            or self.base.gradient_checkpointing_disable
        )
        disable()
        self.checkpoint_blocks = False

    def gradient_checkpointing_enable(
        self, gradient_checkpointing_kwargs: dict | None = None
    ) -> None:
        self.activation_checkpointing_enable(gradient_checkpointing_kwargs)

    def gradient_checkpointing_disable(self) -> None:
        self.activation_checkpointing_disable()

    def span_kv(self, cache: Any) -> SpanKV | None:
        """The CAL keys/values a prefill left on ``cache`` (to reuse across conversations)."""
        return getattr(cache, "_calyrex_span", None)

    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.state_dict().items() if is_adapter_param(k)}

    def save_adapter(self, directory: str) -> None:
        from .adapter_io import save_adapter

        save_adapter(self, directory)

    def remove(self) -> nn.Module:
        """Take the hooks off and give the bare base model back."""
        for handle in self._handles:
            handle.remove()
        return self.base

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("base"), name)


def count_trainable(model: nn.Module) -> int:
    """Number of trainable parameters (works for calyrex models and PEFT models alike)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
