"""The system span from the structure of a conversation (architecture.md, "The system span").

A conversation is rendered with the tokenizer's own chat template; message contents are
located by rendering the same conversation with unguessable placeholders, never by searching
user text. Template text is tokenised with special tokens; message contents are tokenised with
``split_special_tokens=True``, so a user writing ``<|im_start|>system`` gets plain text.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import BatchEncoding

Message = dict[str, Any]
IGNORE_INDEX = -100


class ChatTemplateError(ValueError):
    """The tokenizer has no chat template, or one calyrex cannot map to message boundaries."""


class SystemPromptTruncatedError(ValueError):
    """``max_length`` would cut the system prompt; a truncated rule is worse than none."""


@dataclass
class Segment:
    ids: list[int]
    role: str | None  # None for template text; the message role for message content


def _template(tokenizer: Any, conversation: Sequence[Message], add_generation_prompt: bool) -> str:
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template; "
            "calyrex needs it to find the system prompt (set tokenizer.chat_template)"
        )
    return tokenizer.apply_chat_template(
        list(conversation), tokenize=False, add_generation_prompt=add_generation_prompt
    )


def _pieces(
    tokenizer: Any, conversation: Sequence[Message], add_generation_prompt: bool
) -> list[tuple[str, str | None]]:
    """Split the rendered conversation into (text, role) pieces; role None = template text."""
    slots = [f"CALYREXSLOT{secrets.token_hex(8)}X" for _ in conversation]
    placeholder = [{**m, "content": s} for m, s in zip(conversation, slots, strict=True)]
    rendered = _template(tokenizer, placeholder, add_generation_prompt)
    template_text: list[str] = []
    rest = rendered
    for slot, message in zip(slots, conversation, strict=True):
        head, sep, rest = rest.partition(slot)
        if not sep or slot in rest:
            raise ChatTemplateError(
                f"the chat template does not place the {message['role']!r} message content exactly "
                "once; calyrex cannot map message boundaries to tokens"
            )
        template_text.append(head)
    template_text.append(rest)
    real = _template(tokenizer, conversation, add_generation_prompt)
    for transform in (lambda s: s, str.strip):  # some templates (Llama 3) trim contents
        contents = [transform(str(m["content"])) for m in conversation]
        pieces = [(template_text[0], None)]
        for content, message, text in zip(contents, conversation, template_text[1:], strict=True):
            pieces += [(content, message["role"]), (text, None)]
        if "".join(p for p, _ in pieces) == real:
            return pieces
    raise ChatTemplateError("the chat template rewrites message contents; calyrex cannot map them")


def _check_roles(conversation: Sequence[Message]) -> None:
    for i, m in enumerate(conversation):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"message {i} must be a dict with 'role' and 'content', got {m!r}")
        if m["role"] == "system" and i > 0:
            raise ValueError(
                "only the first message may be a system message (it anchors every turn)"
            )


def segments(
    tokenizer: Any, conversation: Sequence[Message], add_generation_prompt: bool = False
) -> list[Segment]:
    """Token segments of one conversation, template text and message contents apart."""
    _check_roles(conversation)
    out = []
    for text, role in _pieces(tokenizer, conversation, add_generation_prompt):
        if not text:
            continue
        ids = tokenizer(text, add_special_tokens=False, split_special_tokens=role is not None)[
            "input_ids"
        ]
        out.append(Segment(list(ids), role))
    return out


def encode_one(
    tokenizer: Any,
    conversation: Sequence[Message],
    add_generation_prompt: bool = False,
    max_length: int | None = None,
) -> dict[str, list[int]]:
    """``input_ids``, ``system_mask`` and ``labels`` of one conversation, unpadded.

    ``system_mask`` is 1 on the content of a leading system message. ``labels`` equal the ids on
    assistant contents and the end-of-turn token that follows each, ``-100`` elsewhere.
    """
    ids: list[int] = []
    system: list[int] = []
    labels: list[int] = []
    previous_role: str | None = None
    for seg in segments(tokenizer, conversation, add_generation_prompt):
        ids += seg.ids
        system += [int(seg.role == "system")] * len(seg.ids)
        if seg.role == "assistant":
            labels += seg.ids
        elif seg.role is None and previous_role == "assistant":
            labels += seg.ids[:1] + [IGNORE_INDEX] * (len(seg.ids) - 1)  # the end-of-turn token
        else:
            labels += [IGNORE_INDEX] * len(seg.ids)
        previous_role = seg.role
    if max_length is not None and len(ids) > max_length:
        if any(system[max_length:]):
            raise SystemPromptTruncatedError(
                f"the system prompt ends at token {max(i for i, s in enumerate(system) if s) + 1} "
                f"but max_length is {max_length}"
            )
        ids, system, labels = ids[:max_length], system[:max_length], labels[:max_length]
    return {"input_ids": ids, "system_mask": system, "labels": labels}


def pad_batch(
    tokenizer: Any, rows: Sequence[dict[str, list[int]]], with_labels: bool
) -> BatchEncoding:
    """Pad encoded rows to one tensor batch on ``tokenizer.padding_side``."""
    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    if pad_id is None:
        raise ValueError("tokenizer has neither a pad nor an eos token to pad with")
    width = max(len(r["input_ids"]) for r in rows)
    left = tokenizer.padding_side == "left"
    fills = {"input_ids": pad_id, "attention_mask": 0, "system_mask": 0, "labels": IGNORE_INDEX}
    keys = ["input_ids", "attention_mask", "system_mask"] + (["labels"] if with_labels else [])
    batch: dict[str, list[list[int]]] = {k: [] for k in keys}
    for r in rows:
        r = {**r, "attention_mask": [1] * len(r["input_ids"])}
        for k in keys:
            pad = [fills[k]] * (width - len(r[k]))
            batch[k].append(pad + r[k] if left else r[k] + pad)
    return BatchEncoding({k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()})


def encode_chat(
    tokenizer: Any,
    conversations: Sequence[Sequence[Message]],
    add_generation_prompt: bool = False,
    with_labels: bool = False,
    max_length: int | None = None,
) -> BatchEncoding:
    """Encode conversations with the tokenizer's chat template and mark their system spans.

    Returns ``input_ids``, ``attention_mask``, ``system_mask`` (1 on system-content tokens) and,
    with ``with_labels``, ``labels`` (-100 except on assistant contents and their end-of-turn
    token), padded on ``tokenizer.padding_side``.
    """
    if conversations and isinstance(conversations[0], dict):
        conversations = [conversations]  # one conversation given bare
    rows = [encode_one(tokenizer, c, add_generation_prompt, max_length) for c in conversations]
    return pad_batch(tokenizer, rows, with_labels)
