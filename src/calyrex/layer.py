"""A host decoder layer followed by an adapter block, in the host layer's place in the module tree.

The host is called unmodified with whatever HF passes it; the block is added on its output
(litgpt's adapter-as-a-diff style). Being an ordinary module (no hooks, no closures), it is
copied, pickled, compiled, swapped and sharded like any other layer.

Per-call state reaches the layer as keyword arguments, which HF's decoder models pass to every
layer unchanged (``**kwargs``): the system mask of the call (``calyrex_system_mask``) and, when
there is no HF cache, a per-call :class:`~calyrex.span.CALCache` (``calyrex_cache``). Keyword
arguments rather than a context variable because activation checkpointing recomputes a layer in
backward on autograd's own thread, where a context variable set by the forward is not visible,
while the recomputation gets the same arguments.

Legend: B batch, T tokens in this call, W tokens covered by the system mask, D hidden.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from . import hf
from .mask import span_key_flags
from .span import CACHE_ATTR, CALCache, SpanStep

SYSTEM_MASK_KW = "calyrex_system_mask"  # (B, W) bool, absolute positions 0 … W-1 of the sequence
CAL_CACHE_KW = "calyrex_cache"  # a per-call CALCache when the call has no HF cache


def reads_span(block: nn.Module) -> bool:
    """Whether ``block`` reads the system span, looking through delegating wrappers (FSDP
    auto-wrap, activation-checkpoint wrappers, ``torch.compile``'s module): the module tree is
    the truth, not the outer module's type."""
    return any(getattr(m, "uses_span", False) for m in block.modules())


def host_gate(block: nn.Module) -> nn.Module | None:
    """The block's :class:`~calyrex.block.HostGate`, looking through wrappers (None without)."""
    return next((m.cal_host_gate for m in block.modules() if hasattr(m, "cal_host_gate")), None)


class CalyrexLayer(nn.Module):
    """``host`` (frozen decoder layer ``index``) then ``cal_block`` on its hidden states."""

    def __init__(self, host: nn.Module, block: nn.Module, index: int, opens_span: bool) -> None:
        super().__init__()
        self.host = host
        self.cal_block = block
        self.index = index
        self.opens_span = opens_span  # the lowest span-reading layer opens each call's SpanStep
        self.checkpoint_block = False

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        system_mask = kwargs.pop(SYSTEM_MASK_KW, None)
        per_call = kwargs.pop(CAL_CACHE_KW, None)
        step = None
        if reads_span(self.cal_block):  # before the host adds its tokens
            step = self._span_step(hidden_states, system_mask, per_call, kwargs)
        gate = host_gate(self.cal_block)
        if gate is not None and step is not None and not step.empty:
            kwargs["position_bias"] = host_bias(gate, hidden_states, step, kwargs)
        out = self.host(hidden_states, *args, **kwargs)
        h = hf.layer_hidden(out)  # (B, T, D)
        if self.checkpoint_block and self.training and torch.is_grad_enabled():
            h = checkpoint(self.cal_block, h, step, self.index, use_reentrant=False)
        else:
            h = self.cal_block(h, step, self.index)
        return hf.with_layer_hidden(out, h)

    def _span_step(
        self,
        hidden: torch.Tensor,
        system_mask: torch.Tensor | None,
        per_call: CALCache | None,
        kwargs: dict[str, Any],
    ) -> SpanStep:
        cache = hf.layer_cache(kwargs)
        store = per_call if cache is None else getattr(cache, CACHE_ATTR, None)
        if store is not None and not self.opens_span and store.step is not None:
            return store.step  # opened by the lowest span layer of this same call
        batch, length = hidden.shape[:2]
        past = hf.cache_length(cache, self.index)
        if store is None:
            if past > 0:
                raise ValueError(
                    f"this cache holds {past} tokens but no CAL keys/values: it was not filled by "
                    "a calyrex model, so its system span is unknown"
                )
            store = CALCache.fresh(batch, hidden.device)
            if cache is not None:
                setattr(cache, CACHE_ATTR, store)
        return store.begin(new_span(system_mask, past, length), past, length, batch)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:  # HF reads attributes of its layers (e.g. ``attention_type``)
            return getattr(super().__getattr__("host"), name)


def host_bias(
    gate: nn.Module, hidden: torch.Tensor, step: SpanStep, kwargs: dict[str, Any]
) -> torch.Tensor:
    """The (B, Hh, T, K) logit bias of a :class:`~calyrex.block.HostGate` for this call's host
    attention: K is the attention mask's key length (a static cache's size), else every token
    of the sequence so far; key ``k`` is absolute position ``k``."""
    mask = kwargs.get("attention_mask")
    length = mask.shape[-1] if isinstance(mask, torch.Tensor) else step.store.length
    keys = span_key_flags(step.store.key_pos, step.store.key_valid, length)  # (B, K)
    return gate(hidden, step.has_key, keys).to(hidden.dtype)


def new_span(system_mask: torch.Tensor | None, past: int, length: int) -> torch.Tensor | None:
    """The (B, T) part of an absolute (B, W) system mask that falls in this call, or None.

    Positions at or beyond ``W`` are never span (generated tokens, later turns)::

        system_mask  0 1 1 1 0      past=2, length=4  →  1 1 0 0
    """
    if system_mask is None or system_mask.shape[1] <= past:
        return None
    part = system_mask[:, past : past + length].bool()
    if part.shape[1] < length:
        part = torch.nn.functional.pad(part, (0, length - part.shape[1]))
    return part
