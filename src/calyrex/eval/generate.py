"""Chat generation and scoring on a loaded model, with the system span passed explicitly.

Legend: B batch, T tokens.

Every model gets the same batch from :func:`calyrex.encode_chat`, ``system_mask`` included (the
span is read from the conversation's structure): a calyrex model reads it, a base or PEFT model
ignores it (:func:`calyrex.adapters.methods.accept_system_mask`). A prompt that does not fit the model's
context window is never truncated: it comes back as a :class:`Skip`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..adapters.methods import accept_system_mask
from ..core import hf
from ..span.chat import encode_chat, encode_one, pad_batch

Message = dict[str, Any]
# what a model's evaluation computed (``calyrex eval`` records it per suite; what
# benchmarks/eval_cost.py prints): prompts run, their real and padded tokens, the target tokens
# teacher-forced after them and the reply tokens generated (end of turn not counted)
COST_KEYS = ("prompts", "prompt_tokens", "padded_tokens", "target_tokens", "new_tokens")


def new_cost() -> dict[str, int]:
    """A zeroed cost counter (:data:`COST_KEYS`)."""
    return dict.fromkeys(COST_KEYS, 0)


@dataclass(frozen=True)
class Skip:
    """A prompt that was not run, and why (recorded in the results, never scored as zero)."""

    reason: str


CHATML_END = "<|im_end|>"


def end_ids(tokenizer: Any, model: Any = None) -> set[int]:
    """The tokens that end a reply: :func:`calyrex.core.hf.eos_ids` (the model's generation
    config's and the tokenizer's end of sequence) and ChatML's end of turn where the tokenizer
    has it (looked up by name, a missing token reads as the unknown token's id, or None)."""
    ends = hf.eos_ids(model, tokenizer)
    turn = tokenizer.convert_tokens_to_ids(CHATML_END)
    if turn != tokenizer.unk_token_id:
        ends.add(turn)
    return {e for e in ends if isinstance(e, int) and e >= 0}


def context_window(model: Any, tokenizer: Any) -> int:
    config = getattr(model, "config", None)
    window = getattr(config, "max_position_embeddings", None)
    return int(window) if window else int(getattr(tokenizer, "model_max_length", 1 << 30))


class Generator:
    """Greedy chat completions from ``model`` in batches of ``batch_size`` (left padding)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_new_tokens: int = 1024,
        batch_size: int = 8,
        stats: dict[str, int] | None = None,
    ) -> None:
        self.model = accept_system_mask(model).eval()
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.window = context_window(model, tokenizer)
        self.stats = new_cost() if stats is None else stats  # what it computed (COST_KEYS)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def prompt_length(self, conversation: Sequence[Message]) -> int:
        return len(
            encode_one(self.tokenizer, conversation, add_generation_prompt=True)["input_ids"]
        )

    def chat(self, conversations: Sequence[Sequence[Message]]) -> list[str | Skip]:
        """One completion (or a Skip) per conversation, in order."""
        out: list[str | Skip] = [Skip("not run")] * len(conversations)
        runnable = []
        for i, conv in enumerate(conversations):
            length = self.prompt_length(conv)
            if length + self.max_new_tokens > self.window:
                out[i] = Skip(
                    f"prompt of {length} tokens + {self.max_new_tokens} new tokens exceeds the "
                    f"model's context window of {self.window}"
                )
            else:
                runnable.append((length, i))
        runnable.sort()  # similar lengths together: less padding
        for start in range(0, len(runnable), self.batch_size):
            chunk = [i for _, i in runnable[start : start + self.batch_size]]
            for i, text in zip(
                chunk, self._generate([conversations[i] for i in chunk]), strict=True
            ):
                out[i] = text
        return out

    @torch.no_grad()
    def _generate(self, conversations: Sequence[Sequence[Message]]) -> list[str]:
        tok = self.tokenizer
        side, tok.padding_side = tok.padding_side, "left"
        try:
            batch = encode_chat(tok, list(conversations), add_generation_prompt=True)
        finally:
            tok.padding_side = side
        batch = {k: v.to(self.device) for k, v in batch.items()}  # (B, T) each
        ids = self.model.generate(
            **batch,
            max_new_tokens=self.max_new_tokens,
            do_sample=False,
            eos_token_id=sorted(end_ids(tok, self.model)) or None,  # the reader's (eval.prefill)
            pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        )
        width = batch["input_ids"].shape[1]
        self._count(batch["attention_mask"], ids[:, width:])
        return [tok.decode(row[width:], skip_special_tokens=True) for row in ids]

    def _count(self, mask: torch.Tensor, new: torch.Tensor) -> None:
        """Add a generate call to :attr:`stats`: ``mask`` (B, T) the prompts', ``new`` (B, N)
        the tokens after them, each row's counted up to its first end-of-turn or pad token."""
        stops = end_ids(self.tokenizer, self.model)
        if self.tokenizer.pad_token_id is not None:
            stops.add(self.tokenizer.pad_token_id)
        stop = torch.isin(new, torch.tensor(sorted(stops)))
        self.stats["prompts"] += mask.shape[0]
        self.stats["prompt_tokens"] += int(mask.sum())
        self.stats["padded_tokens"] += mask.numel()
        self.stats["new_tokens"] += int((stop.cumsum(-1) == 0).sum())  # before the first end

    @torch.no_grad()
    def target_nll(self, conversation: Sequence[Message], target: str) -> float | Skip:
        """Mean negative log-likelihood per token of ``target`` as the assistant's next reply."""
        full = [*conversation, {"role": "assistant", "content": target}]
        row = encode_one(self.tokenizer, full)
        if len(row["input_ids"]) > self.window:
            return Skip(
                f"prompt of {len(row['input_ids'])} tokens exceeds the context window of {self.window}"
            )
        batch = pad_batch(self.tokenizer, [row], with_labels=True)
        batch = {k: v.to(self.device) for k, v in batch.items()}
        return float(self.model(**batch).loss)
