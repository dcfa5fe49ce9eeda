"""The ``calyrex`` model for lm-evaluation-harness: base + adapter, with the system span.

    python -m calyrex.eval.harness run --model calyrex \\
        --model_args pretrained=Qwen/Qwen2.5-1.5B-Instruct,adapter=out/cal \\
        --tasks ifeval mmlu gsm8k squadv2 --apply_chat_template --system_instruction "..."

lm-eval renders the chat template to a string and tokenises it, so the model only sees
``input_ids`` (and no attention mask in the log-likelihood path). Both paths here find the
system span from those ids with the template's markers (:func:`calyrex.detect_system_mask`:
only at the start of the sequence, delimited by special tokens user text cannot produce) and
pass it to the model explicitly as ``system_mask``. Without ``--apply_chat_template`` and a
system instruction there is no system span, and a CAL model is exactly its base model.

Importing this module registers the model name: ``python -m calyrex.eval.harness`` is the
``lm_eval`` command with it registered (lm-eval has no plugin discovery); from Python,
``import calyrex.eval.lm`` before ``lm_eval.simple_evaluate(model="calyrex", ...)``.
"""

from __future__ import annotations

from typing import Any

import torch
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM

from ..markers import detect_system_mask, span_markers
from .generate import uses_system_span
from .models import attach_adapter


@register_model("calyrex")
class CalyrexLM(HFLM):
    """``HFLM`` plus ``adapter=`` (a CAL, ParallelMLP or PEFT LoRA adapter directory / hub id)."""

    def __init__(self, pretrained: Any, adapter: str | None = None, **kwargs: Any) -> None:
        self.adapter = adapter
        super().__init__(pretrained=pretrained, **kwargs)
        self.markers = span_markers(self.tokenizer)
        if uses_system_span(self.model) and self.markers is None:
            raise ValueError(
                "the tokenizer's chat template has no recognisable system segment; "
                "a CALYREX model cannot find its system span in lm-eval prompts"
            )

    def _create_model(self, pretrained: str, **kwargs: Any) -> None:
        super()._create_model(pretrained, **kwargs)
        if self.adapter:
            self._model = attach_adapter(self._model, self.adapter, tokenizer=self.tokenizer)

    def system_mask(self, ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """(B, T) ids → (B, T) bool system span, found only at the start of each row."""
        return detect_system_mask(ids, attention_mask, self.markers)

    def _model_call(
        self, inps: torch.Tensor, attn_mask: torch.Tensor | None = None, labels: Any = None
    ) -> torch.Tensor:
        if not uses_system_span(self.model):
            return super()._model_call(inps, attn_mask, labels)
        with (
            torch.no_grad(),
            torch.autocast(
                device_type=self.device.type,
                dtype=self.mixed_precision_dtype,
                enabled=self.mixed_precision_dtype is not None,
            ),
        ):
            # right-padded batches: the span search starts at position 0 of every row
            return self.model(inps, system_mask=self.system_mask(inps, None)).logits

    def _model_generate(
        self, context: torch.Tensor, max_length: int, stop: list[str], **generation_kwargs: Any
    ) -> torch.Tensor:
        if uses_system_span(self.model):
            mask = generation_kwargs.get("attention_mask")  # left padding: the span starts after it
            generation_kwargs["system_mask"] = self.system_mask(context, mask)
        return super()._model_generate(context, max_length, stop, **generation_kwargs)
