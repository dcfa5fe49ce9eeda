"""The adapter contract: the calls every method's adapted model answers, modelled on PEFT's.

CALYREX and ParallelMLP (:class:`calyrex.core.model.CalyrexModel`) and LoRA
(:class:`calyrex.adapters.lora.LoraBaseline`) all answer it, so no caller branches on the
method: training, DPO's free reference, checkpoints, benchmarks and the loaders use these calls
only. A bare HF model answers none of it; :func:`calyrex.adapters.methods.accept_system_mask`
gives it the one call it needs to take the same batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn


@runtime_checkable
class Adapted(Protocol):
    """A frozen base model with one trainable adapter of a registered method."""

    method: str  # a key of calyrex.adapters.methods.METHODS
    uses_span: bool  # whether any adapter parameter reads the system span

    def forward(self, *args: Any, system_mask: torch.Tensor | None = None, **kw: Any) -> Any:
        """HF's forward; ``system_mask`` (B, T) is read by span methods, ignored by the others."""

    def generate(self, *args: Any, system_mask: torch.Tensor | None = None, **kw: Any) -> Any:
        """HF's generate, with ``system_mask`` (B, N) as in ``forward``."""

    def disable_adapter(self) -> contextlib.AbstractContextManager:
        """Inside: the base model's outputs, bit for bit (DPO's free reference)."""

    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        """The adapter tensors under their file keys, each whole (FSDP2: every rank calls)."""

    def load_adapter_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Inverse of ``adapter_state_dict``; a dict with other keys or shapes raises
        ``AdapterError`` and loads nothing."""

    def save_adapter(self, directory: str, state: Mapping[str, torch.Tensor] | None = None) -> None:
        """The method's adapter files (``state``: an ``adapter_state_dict`` already gathered)."""

    def unload(self) -> nn.Module:
        """The base model without the adapter; the wrapper then raises ``UnloadedError``."""

    def get_base_model(self) -> nn.Module:
        """The HF model under the adapter."""

    def get_nb_trainable_parameters(self) -> tuple[int, int]:
        """(trainable, all) parameters."""
