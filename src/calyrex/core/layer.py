"""A host decoder layer followed by an adapter block, in the host layer's place in the module tree.

The host is called unmodified with whatever HF passes it; the block is added on its output
(litgpt's adapter-as-a-diff style). Being an ordinary module (no hooks, no closures), it is
copied, pickled, compiled, swapped and sharded like any other layer.

Per-call state reaches the layer as two keyword arguments, which HF's decoder models pass to
every layer unchanged (``**kwargs``), both made once per call by ``CalyrexModel.forward``: the
call's :class:`~calyrex.core.cal_cache.SpanCall` (immutable) and the
:class:`~calyrex.core.cal_cache.CALCache` it extends. Keyword arguments rather than a context
variable because activation checkpointing recomputes a layer in backward on autograd's own
thread, where a context variable set by the forward is not visible, while the recomputation
gets the same arguments.

A span-reading block gets the span keys/values cached before this call and returns those of
the call's new span tokens; the layer appends them to the cache. A block that does not read the
span (ParallelMLP, a pass-through) gets the hidden states alone.

Legend: B batch, T tokens in this call, D hidden.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from . import hf
from .cal_cache import CALCache, SpanCall, attach
from .mask import span_key_flags

SPAN_KW = "calyrex_span"  # the SpanCall of this forward call
CACHE_KW = "calyrex_cache"  # the CALCache it extends (the HF cache's, or this call's own)


def reads_span(block: nn.Module) -> bool:
    """Whether ``block`` reads the system span, looking through delegating wrappers (FSDP
    auto-wrap, activation-checkpoint wrappers, ``torch.compile``'s module): the module tree is
    the truth, not the outer module's type."""
    return any(getattr(m, "uses_span", False) for m in block.modules())


def host_gate(block: nn.Module) -> nn.Module | None:
    """The block's :class:`~calyrex.core.block.HostGate`, looking through wrappers (None without)."""
    return next((m.cal_host_gate for m in block.modules() if hasattr(m, "cal_host_gate")), None)


class CalyrexLayer(nn.Module):
    """``host`` (frozen decoder layer ``index``) then ``cal_block`` on its hidden states."""

    def __init__(self, host: nn.Module, block: nn.Module, index: int) -> None:
        super().__init__()
        self.host = host
        self.cal_block = block
        self.index = index
        self.checkpoint_block = False

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        span: SpanCall | None = kwargs.pop(SPAN_KW, None)
        store: CALCache | None = kwargs.pop(CACHE_KW, None)
        gate = host_gate(self.cal_block)
        if gate is not None and span is not None and not span.empty:
            kwargs["position_bias"] = host_bias(gate, hidden_states, span, kwargs)
        out = self.host(hidden_states, *args, **kwargs)
        h = hf.layer_hidden(out)  # (B, T, D)
        if not reads_span(self.cal_block):
            return hf.with_layer_hidden(out, self._block(h))
        if store is not None:  # HF makes a cache inside the call when given none (use_cache)
            attach(hf.layer_cache(kwargs), store)
        past = None if store is None or span is None else store.past_kv(self.index, span)
        h, new = self._block(h, span, past)
        if new is not None and store is not None:
            store.append(self.index, span, new)
        return hf.with_layer_hidden(out, h)

    def _block(self, *args: Any) -> Any:
        if self.checkpoint_block and self.training and torch.is_grad_enabled():
            return checkpoint(self.cal_block, *args, use_reentrant=False)
        return self.cal_block(*args)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:  # HF reads attributes of its layers (e.g. ``attention_type``)
            return getattr(super().__getattr__("host"), name)


def host_bias(
    gate: nn.Module, hidden: torch.Tensor, span: SpanCall, kwargs: dict[str, Any]
) -> torch.Tensor:
    """The (B, Hh, T, K) logit bias of a :class:`~calyrex.core.block.HostGate` for this call's host
    attention: K is the attention mask's key length (a static cache's size), else every token
    of the sequence so far; key ``k`` is absolute position ``k``."""
    mask = kwargs.get("attention_mask")
    length = mask.shape[-1] if isinstance(mask, torch.Tensor) else span.length
    keys = span_key_flags(span.key_pos, span.key_valid, length)  # (B, K)
    return gate(hidden, span.has_key, keys).to(hidden.dtype)
