"""A frozen HF causal LM with adapter blocks after some of its decoder layers.

The blocks are ordinary modules in the host's module tree: decoder layer ``i`` is replaced by a
:class:`~calyrex.core.layer.CalyrexLayer` holding the original layer and the block. This module is
the entry point of a call: it turns ``system_mask`` (or, for callers that pass only
``input_ids``, the fallback markers) into the call's :class:`~calyrex.core.cal_cache.SpanCall`, once,
and hands it with the CAL cache to the HF model as keyword arguments for the layers
(``calyrex.core.layer``). Nothing about a call is stored on a module, so copies, threads, re-entrant
calls and two models over one process never see each other's span.

``system_mask`` is aligned with the ``input_ids`` it comes with, in every entry point: in
:meth:`forward` it covers the call's tokens (B, T); in :meth:`generate` the whole ``input_ids``
given (B, N), and :meth:`prepare_inputs_for_generation` cuts each step's part out of it, as HF
cuts ``input_ids`` (positions past N are generated tokens: never span).

``generate`` is HF's own (this class is a ``GenerationMixin`` host whose steps call
:meth:`forward`), so greedy, sampling, beams, assisted decoding and chunked prefill all carry
the span; the CAL keys/values live on the HF cache (``calyrex.core.cal_cache``).

Legend: B batch, T tokens in this call, P tokens already in the cache, N tokens given to generate.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn
from transformers.generation.utils import GenerationMixin

from ..span.markers import SpanMarkers, detect_system_mask
from . import hf
from .adapter_io import block_tensors, load_block_tensors, write_adapter
from .adapter_io import whole as whole  # re-exported: calyrex.core.model.whole
from .cal_cache import CALCache, cal_cache, for_call
from .layer import CACHE_KW, SPAN_KW, CalyrexLayer, reads_span
from .mask import call_span, positions_restart
from .names import ADAPTER_PREFIX, is_adapter_param
from .version import __version__

__all__ = [
    "ADAPTER_PREFIX",
    "AlreadyWrappedError",
    "CalyrexModel",
    "UnloadedError",
    "is_adapter_param",
]


class AlreadyWrappedError(ValueError):
    """The HF model already carries adapter blocks (wrapped once, or loaded into twice)."""


class UnloadedError(RuntimeError):
    """An adapted model used after ``unload()`` / ``remove()`` gave its base model back."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__(
            f"this {type(model).__name__} was unloaded: its base model was given back and no "
            "longer carries the adapter; use the model unload() returned, or adapt it again"
        )


def check_unpacked(
    span: torch.Tensor, attention_mask: Any, position_ids: Any, past: int, kwargs: dict[str, Any]
) -> None:
    """Refuse packed documents under a system span: a row holding several documents (a 4-D
    block-diagonal mask, positions that restart, flash-attention's ``cu_seq_lens``) would let
    a later document's tokens see the first document's system prompt."""
    if not bool(span.any()):
        return
    four_d = isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4
    # a dict of prebuilt masks comes from HF's own generate (static cache), never from packing;
    # its left padding would look like restarting positions
    restart = not isinstance(attention_mask, dict) and positions_restart(
        position_ids, attention_mask, past
    )
    if four_d or "cu_seq_lens_q" in kwargs or restart:
        raise ValueError(
            "packed sequences (several documents in one row: a 4-D attention mask, restarting "
            "position_ids or cu_seq_lens) are not supported with a system span: a later "
            "document would see the first one's system prompt; give one conversation per row "
            "(TRL: packing=False; no DataCollatorWithFlattening)"
        )


def check_unwrapped(model: nn.Module) -> None:
    """Refuse a model that already carries adapters (calyrex blocks, or PEFT's), before any
    change: a refused wrap leaves the first wrapper exactly as it was."""
    if isinstance(model, CalyrexModel) or hasattr(model, "peft_config"):
        kind = "calyrex" if isinstance(model, CalyrexModel) else "PEFT"
        raise AlreadyWrappedError(
            f"this {type(model).__name__} is already a {kind} model; adapt its base model instead"
        )
    if any(isinstance(layer, CalyrexLayer) for layer in hf.decoder_layers(model)):
        raise AlreadyWrappedError(
            f"this {type(model).__name__} already carries calyrex blocks (wrapped or loaded "
            "before); call .remove() on that model first, or load a fresh base model"
        )


class BlockView(Mapping):
    """``model.cal_blocks``: layer index (str) → block, read from the layers themselves.

    Assigning ``model.cal_blocks["23"] = block`` replaces the block inside layer 23, so a swap
    (FSDP auto-wrap, a user's own module) always takes effect.
    """

    def __init__(self, layers: nn.ModuleList) -> None:
        self._layers = {
            str(layer.index): layer for layer in layers if isinstance(layer, CalyrexLayer)
        }

    def __getitem__(self, key: str) -> nn.Module:
        return self._layers[str(key)].cal_block

    def __setitem__(self, key: str, block: nn.Module) -> None:
        self._layers[str(key)].cal_block = block

    def __iter__(self) -> Iterator[str]:
        return iter(self._layers)

    def __len__(self) -> int:
        return len(self._layers)

    def parameters(self) -> Iterator[nn.Parameter]:
        for layer in self._layers.values():
            yield from layer.cal_block.parameters()


class PassThrough(nn.Module):
    """What :meth:`CalyrexModel.disable_adapter` puts in place of a block: adds nothing."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h


class CalyrexModel(nn.Module, GenerationMixin):
    """``base`` (frozen) with ``blocks[i]`` after decoder layer ``i``.

    It answers the adapter contract (:class:`calyrex.adapters.contract.Adapted`, PEFT's names):
    ``disable_adapter()``, ``adapter_state_dict()`` / ``load_adapter_state_dict()``,
    ``save_adapter()``, ``unload()`` (also ``remove()``), ``get_base_model()``,
    ``get_nb_trainable_parameters()``, ``system_mask`` in ``forward`` and ``generate``.
    """

    def __init__(
        self,
        base: nn.Module,
        blocks: dict[int, nn.Module],
        method: str,
        config: Any,
        markers: SpanMarkers | None = None,
        markers_reason: str = "no tokenizer was given",
    ) -> None:
        super().__init__()
        check_unwrapped(base)
        layers = hf.decoder_layers(base)
        self.base = base
        # the caller's flags, put back by remove(): wrapping freezes the base, removing unfreezes
        self.base_requires_grad = {n: p.requires_grad for n, p in base.named_parameters()}
        for i, block in sorted(blocks.items()):
            layers[i] = CalyrexLayer(layers[i], block, i)
        self.method = method
        self.adapter_config = config
        self.markers = markers
        self.markers_reason = markers_reason  # why there is no fallback, when there is none
        self.unloaded = False  # set by unload(): the base model no longer carries the blocks
        for name, param in self.named_parameters():
            param.requires_grad_(is_adapter_param(name))

    # -- structure -----------------------------------------------------------------------------
    def cal_layers(self) -> list[CalyrexLayer]:
        return [m for m in hf.decoder_layers(self.base) if isinstance(m, CalyrexLayer)]

    @property
    def cal_blocks(self) -> BlockView:
        return BlockView(hf.decoder_layers(self.base))

    @property
    def uses_span(self) -> bool:
        return any(reads_span(layer.cal_block) for layer in self.cal_layers())

    def get_base_model(self) -> nn.Module:
        """The HF model under the blocks (PEFT's name); it carries them until :meth:`unload`."""
        return self.base

    def get_nb_trainable_parameters(self) -> tuple[int, int]:
        """(trainable, all) parameters, as PEFT's method of that name counts them."""
        params = list(self.parameters())
        return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)

    def unload(self) -> nn.Module:
        """Put the host layers back and give the bare base model back (blocks detached), with
        every parameter's ``requires_grad`` as it was before wrapping (PEFT's ``unload``). This
        wrapper is spent: calling it afterwards raises :class:`UnloadedError`."""
        self.check_loaded()
        layers = hf.decoder_layers(self.base)
        for i, layer in enumerate(layers):
            if isinstance(layer, CalyrexLayer):
                layers[i] = layer.host
        for name, param in self.base.named_parameters():
            param.requires_grad_(self.base_requires_grad.get(name, param.requires_grad))
        self.unloaded = True
        return self.base

    remove = unload  # calyrex's first name for it

    def check_loaded(self) -> None:
        """Raise :class:`UnloadedError` once :meth:`unload` gave the base model back."""
        if self.unloaded:
            raise UnloadedError(self)

    @contextlib.contextmanager
    def disable_adapter(self) -> Iterator[None]:
        """Run as the frozen base model while inside (PEFT's ``disable_adapter()``).

        Every block is swapped for a :class:`PassThrough`: a layer then returns its host
        layer's output tensor itself (a span, if given, goes unused), so the logits equal the
        bare base model's bit for bit (the free reference model of DPO, ``training.dpo``). The
        module tree changes for the duration, as with PEFT: do not run this model from another
        thread meanwhile. Nesting is fine; the blocks come back on exit, exceptions included.
        """
        layers = self.cal_layers()
        blocks = [layer.cal_block for layer in layers]
        off = PassThrough()
        for layer in layers:
            layer.cal_block = off
        try:
            yield
        finally:
            for layer, block in zip(layers, blocks, strict=True):
                layer.cal_block = block

    # -- the span of a call --------------------------------------------------------------------
    def span_mask(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: Any,
        system_mask: torch.Tensor | None,
        past: int = 0,
    ) -> torch.Tensor | None:
        """(B, T) bool span of ``input_ids`` from ``system_mask`` (B, T) or the fallback markers
        (only where a sequence starts: ``past`` 0); padding is never span."""
        if system_mask is None:
            if past > 0 or not self.uses_span:
                return None  # a continuation: the span is on the cache
            if self.markers is None or input_ids is None or input_ids.dim() != 2:
                why = (
                    f"no fallback span markers ({self.markers_reason})"
                    if self.markers is None
                    else "the call has no 2-D input_ids for the fallback markers"
                )
                warnings.warn(
                    f"calyrex: no system_mask and {why}: the CAL blocks see no system prompt "
                    "in this call, "
                    "so the model runs as its base model; pass system_mask (calyrex.encode_chat)",
                    stacklevel=3,
                )
                return None
            system_mask = detect_system_mask(input_ids, _mask2d(attention_mask), self.markers)
        system_mask = system_mask.bool()
        mask2d = _mask2d(attention_mask)
        if mask2d is not None:  # padding is never a key; the mask may also cover the cache
            system_mask = (
                system_mask & mask2d[:, -system_mask.shape[1] :].to(system_mask.device).bool()
            )
        return system_mask

    # -- the HF-facing surface -----------------------------------------------------------------
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        system_mask: torch.Tensor | None = None,
        cache: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The HF forward plus ``system_mask`` (B, T): 1 on this call's system-content tokens.

        With a cache, the call continues the sequence: its span tokens join those cached (a
        prefill in chunks gives each chunk its part of the mask). ``cache`` (HF's new name for
        ``past_key_values``) is named so ``generate`` accepts it.
        """
        if cache is not None:
            kwargs["cache"] = cache
        self.check_loaded()
        tokens = input_ids if input_ids is not None else inputs_embeds
        cache = hf.layer_cache(kwargs)
        past = hf.cache_length(cache)
        if (
            system_mask is not None
            and tokens is not None
            and system_mask.shape[:2] != tokens.shape[:2]
        ):
            raise ValueError(
                f"system_mask has shape {tuple(system_mask.shape)} but the call has "
                f"{tuple(tokens.shape[:2])} tokens: it covers this call's tokens only"
            )
        # the call's span, once, for every layer: a cache that has CAL keys keeps following
        # its sequence (no walk over the module tree per decode step)
        if tokens is not None and (cal_cache(cache) is not None or self.uses_span):
            span = self.span_mask(input_ids, attention_mask, system_mask, past)  # (B, T)
            if span is not None:
                check_unpacked(span, attention_mask, position_ids, past, kwargs)
                span = span.to(tokens.device)
            batch, length = tokens.shape[:2]
            store = for_call(cache, batch, past, tokens.device)
            kwargs[SPAN_KW] = store.begin(span, past, length, batch)
            kwargs[CACHE_KW] = store
        if self._frozen_prefix(input_ids, inputs_embeds):
            with torch.no_grad():
                inputs_embeds = self.base.get_input_embeddings()(input_ids)
            # detached: a hook such as enable_input_require_grads may have marked it
            inputs_embeds, input_ids = inputs_embeds.detach(), None
        return self.base(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            labels=labels,
            **kwargs,
        )

    def _frozen_prefix(self, input_ids: Any, inputs_embeds: Any) -> bool:
        """Nothing below the first block needs a graph: neither its weights nor its input."""
        if not torch.is_grad_enabled() or input_ids is None or inputs_embeds is not None:
            return False
        layers = hf.decoder_layers(self.base)
        first = min(layer.index for layer in self.cal_layers())
        modules = [self.base.get_input_embeddings(), *layers[: first + 1]]
        return not any(
            p.requires_grad
            for m in modules
            for n, p in m.named_parameters()
            if not is_adapter_param(n)
        )

    def generate(
        self,
        inputs: torch.Tensor | None = None,
        system_mask: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> Any:
        """HF ``generate`` with the system span; ``system_mask`` (B, N) covers the ``input_ids``
        given (the whole sequence, cached tokens included)."""
        self.check_loaded()
        input_ids = kwargs.pop("input_ids", inputs)
        starts = hf.cache_length(hf.layer_cache(kwargs)) == 0
        if system_mask is not None or starts:
            system_mask = self.span_mask(input_ids, kwargs.get("attention_mask"), system_mask)
        if system_mask is not None:
            kwargs["system_mask"] = system_mask  # each step's part: prepare_inputs_for_generation
        return GenerationMixin.generate(self, input_ids, **kwargs)

    def prepare_inputs_for_generation(
        self, input_ids: torch.Tensor, system_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> Any:
        """The host model's step inputs, and the step's part (B, T) of generate's (B, N)
        ``system_mask``: the T tokens after the P the cache holds (HF cuts ``input_ids`` so)."""
        inputs = self.base.prepare_inputs_for_generation(input_ids, **kwargs)
        if system_mask is not None:
            tokens = inputs.get("input_ids")
            tokens = tokens if tokens is not None else inputs["inputs_embeds"]
            past = hf.cache_length(hf.layer_cache(inputs))
            inputs["system_mask"] = call_span(system_mask, past, tokens.shape[1])
        return inputs

    # GenerationMixin asks the model these; answer for the host model, not for this wrapper
    def _get_candidate_generator(self, **kwargs: Any) -> Any:
        """Assisted decoding: the draft model (a plain HF model) gets no calyrex arguments."""
        kwargs["model_kwargs"] = _without_span(kwargs["model_kwargs"])  # HF passes keywords only
        return GenerationMixin._get_candidate_generator(self, **kwargs)

    def _supports_logits_to_keep(self) -> bool:
        return self.base._supports_logits_to_keep()

    def _valid_auto_compile_criteria(self, *args: Any, **kwargs: Any) -> bool:
        return False  # HF would compile the host's forward, which skips this one

    # -- training conveniences -----------------------------------------------------------------
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
        for layer in self.cal_layers():
            layer.checkpoint_block = True

    def activation_checkpointing_disable(self) -> None:
        disable = (
            getattr(self.base, "activation_checkpointing_disable", None)
            or self.base.gradient_checkpointing_disable
        )
        disable()
        for layer in self.cal_layers():
            layer.checkpoint_block = False

    def gradient_checkpointing_enable(
        self, gradient_checkpointing_kwargs: dict | None = None
    ) -> None:
        self.activation_checkpointing_enable(gradient_checkpointing_kwargs)

    def gradient_checkpointing_disable(self) -> None:
        self.activation_checkpointing_disable()

    # -- adapter state -------------------------------------------------------------------------
    def span_kv(self, cache: Any) -> CALCache | None:
        """The CAL keys/values a call left on ``cache`` (to reuse across conversations)."""
        return cal_cache(cache)

    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        """Adapter tensors under their file names: ``cal_blocks.<layer>.<block parameter>``.

        Under FSDP2 the parameters are sharded DTensors: each is gathered whole, a collective
        that every rank must join (call this on all ranks, write on one).
        """
        self.check_loaded()
        return block_tensors(self.cal_blocks)

    def load_adapter_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Inverse of :meth:`adapter_state_dict`: ``state`` must have exactly its keys and
        shapes, else :class:`~calyrex.core.adapter_io.AdapterError` and nothing is loaded."""
        self.check_loaded()
        load_block_tensors(self.cal_blocks, state)

    def adapter_record(self) -> dict[str, Any]:
        """What ``adapter_config.json`` says about this adapter (weights' checksum added at save)."""
        return {
            "calyrex_version": __version__,
            "method": self.method,
            "config": self.adapter_config.to_dict(),
            "base_model": hf.base_identity(self.base),
            "span_markers": self.markers.to_dict() if self.markers else None,
        }

    def save_adapter(self, directory: str, state: dict[str, torch.Tensor] | None = None) -> None:
        """Write the adapter; ``state``: an :meth:`adapter_state_dict` already gathered (FSDP2)."""
        state = self.adapter_state_dict() if state is None else state
        write_adapter(directory, state, self.adapter_record())

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("base"), name)


def _without_span(model_kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in model_kwargs.items() if k != "system_mask"}


def _mask2d(attention_mask: Any) -> torch.Tensor | None:
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2:
        return attention_mask
    return None


def count_trainable(model: nn.Module) -> int:
    """Number of trainable parameters (works for calyrex models and PEFT models alike)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
