"""The ``calyrex`` model for lm-evaluation-harness: base + adapter, with the system span.

    python -m calyrex.eval.harness run --model calyrex \\
        --model_args pretrained=Qwen/Qwen2.5-1.5B-Instruct,adapter=out/cal \\
        --tasks ifeval mmlu gsm8k squadv2 --apply_chat_template --system_instruction "..."

lm-eval renders the chat template to a string and tokenises it, so the model only sees
``input_ids`` (and no attention mask in the log-likelihood path). The span comes from the one
path every runner uses: each conversation lm-eval renders (``apply_chat_template``) is encoded
with :func:`calyrex.encode_chat` too, whose ids equal lm-eval's (token parity), and its
``system_mask`` is kept by those ids; a row that starts with them gets that mask. Rows no
conversation produced fall back to the template's markers (:func:`calyrex.detect_system_mask`:
only at the start of the sequence, delimited by special tokens user text cannot produce); a
template without a fallback (Mistral v0.3 / Nemo) says so once. Without
``--apply_chat_template`` and a system instruction there is no system span, and a CAL model is
exactly its base model.

Importing this module registers the model name: ``python -m calyrex.eval.harness`` is the
``lm_eval`` command with it registered (lm-eval has no plugin discovery); from Python,
``import calyrex.eval.lm`` before ``lm_eval.simple_evaluate(model="calyrex", ...)``.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM

from ..adapters.methods import accept_system_mask, is_calyrex
from ..span.chat import ChatTemplateError, encode_one
from ..span.markers import detect_system_mask, span_markers_reason
from .generate import new_cost
from .models import attach_adapter


@register_model("calyrex")
class CalyrexLM(HFLM):
    """``HFLM`` plus ``adapter=`` (a CAL, ParallelMLP or PEFT LoRA adapter directory / hub id)."""

    def __init__(self, pretrained: Any, adapter: str | None = None, **kwargs: Any) -> None:
        self.adapter = adapter
        super().__init__(pretrained=pretrained, **kwargs)
        accept_system_mask(self.model)  # loaded here or given: every call below passes system_mask
        self.markers, reason = span_markers_reason(self.tokenizer)
        self.spans: dict[tuple[int, ...], list[int]] = {}  # prompt ids → encode_chat's mask
        self.stats = new_cost()  # what the log-likelihood path computed (COST_KEYS)
        if is_calyrex(self.model) and self.markers is None:
            warnings.warn(
                f"no input_ids-only span fallback for this tokenizer ({reason}); the system span "
                "comes only from conversations rendered with --apply_chat_template",
                stacklevel=2,
            )

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        """lm-eval's rendering; the span of the same conversation is kept by its ids."""
        text = super().apply_chat_template(chat_history, add_generation_prompt)
        if not add_generation_prompt:
            return text  # lm-eval then continues the final message: not a calyrex rendering
        try:
            row = encode_one(
                self.tokenizer, chat_history, add_generation_prompt, **self.chat_template_args
            )
        except (ChatTemplateError, ValueError):
            return text
        for prompt in {text, text.rstrip()}:  # lm-eval moves trailing spaces to continuations
            ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
            if ids == row["input_ids"][: len(ids)]:
                self.spans[tuple(ids)] = row["system_mask"][: len(ids)]
        return text

    def _create_model(self, pretrained: str, **kwargs: Any) -> None:
        super()._create_model(pretrained, **kwargs)
        if self.adapter:
            self._model = attach_adapter(self._model, self.adapter, tokenizer=self.tokenizer)

    def system_mask(self, ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """(B, T) ids → (B, T) bool system span: ``encode_chat``'s for a row that starts with a
        rendered conversation, else the fallback's (start of the row only)."""
        out = (
            detect_system_mask(ids, attention_mask, self.markers)
            if self.markers is not None
            else torch.zeros_like(ids, dtype=torch.bool)
        )
        lengths = sorted({len(k) for k in self.spans}, reverse=True)
        for b in range(ids.shape[0]):
            first = 0 if attention_mask is None else int(attention_mask[b].long().argmax())
            row = tuple(ids[b, first:].tolist())
            for n in lengths:
                mask = self.spans.get(row[:n]) if n <= len(row) else None
                if mask is not None:
                    out[b] = False
                    out[b, first : first + n] = torch.tensor(mask, dtype=torch.bool)
                    break
        return out

    def _model_call(
        self, inps: torch.Tensor, attn_mask: torch.Tensor | None = None, labels: Any = None
    ) -> torch.Tensor:
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

    def _loglikelihood_tokens(
        self,
        requests: list[tuple[tuple[str, str], list[int], list[int]]],
        disable_tqdm: bool = False,
        override_bs: int | None = None,
    ) -> list[tuple[float, bool]]:
        """lm-eval's ``(log P(continuation | context), is_greedy)`` per request, with each
        distinct context run **once** and its continuations teacher-forced on copies of its
        cache (:class:`calyrex.eval.prefill.Reader`): a multiple-choice question's context is
        prefilled once for all its choices, and only the continuation positions reach the output
        layer. The same numbers as ``HFLM``'s one-sequence-per-request path (tested); a request
        that does not fit the window goes to that path (which truncates from the left)."""
        from .generate import Generator
        from .prefill import Answer, Reader

        if self.backend != "causal":
            return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)
        contexts: dict[tuple[int, ...], list[int]] = {}  # context ids → request indices
        for i, (_, context, _) in enumerate(requests):
            contexts.setdefault(tuple(context), []).append(i)
        keys = list(contexts)
        encs, targets = [], []
        for key in keys:
            ids = torch.tensor([key])
            span = self.system_mask(ids, None)[0].long().tolist()
            encs.append({"input_ids": list(key), "system_mask": span})
            # a choice is named by its place within its context, so that the batch's k-th
            # choices are teacher-forced together (one forward each, not one per request)
            targets.append({str(j): list(requests[i][2]) for j, i in enumerate(contexts[key])})
        batch = self.batch_size if isinstance(self.batch_size, int) else 8
        reader = Reader(Generator(self.model, self.tokenizer, 0, batch, stats=self.stats))
        reader.gen.window = min(reader.gen.window, self.max_length)
        out: list[tuple[float, bool] | None] = [None] * len(requests)
        for key, answer in zip(
            keys, reader.read_encoded(encs, targets, [0] * len(keys)), strict=True
        ):
            if isinstance(answer, Answer):
                for j, i in enumerate(contexts[key]):
                    out[i] = (answer.logprobs[str(j)], answer.greedy[str(j)])
        rest = [i for i, r in enumerate(out) if r is None]
        if rest:
            done = super()._loglikelihood_tokens(
                [requests[i] for i in rest], disable_tqdm, override_bs
            )
            for i, r in zip(rest, done, strict=True):
                out[i] = r
        for (request, _, _), r in zip(requests, out, strict=True):
            self.cache_hook.add_partial("loglikelihood", request, r)
        return out  # type: ignore[return-value]

    def _model_generate(
        self, context: torch.Tensor, max_length: int, stop: list[str], **generation_kwargs: Any
    ) -> torch.Tensor:
        mask = generation_kwargs.get("attention_mask")  # left padding: the span starts after it
        generation_kwargs["system_mask"] = self.system_mask(context, mask)
        return super()._model_generate(context, max_length, stop, **generation_kwargs)
