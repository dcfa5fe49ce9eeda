"""The system span from the structure of a conversation (architecture.md, "The system span").

**One definition.** The span is the set of tokens whose characters come from the content of the
caller's leading system message, as the chat template printed it. A token that straddles a
boundary (Qwen's header ``\\n`` merged with a system prompt that starts with a newline, a final
``.`` merged with the template's ``\\n\\n``) is span iff it holds at least one character of the
system content and none of any other message's content: template text is trusted, user text
never is. An empty system message has no character, so no span (a template token that stands
where it would be is template text). Template-injected text is not span: a default system prompt (Qwen2.5 "You are Qwen,
...", Mistral-Small's dated default), a tools block, Llama 3's "Cutting Knowledge Date / Today
Date" preamble. A system message that renders exactly like no system message (an empty one
under Llama 3, or one equal to the template's default) is no span either: the same tokens arise
without it, and the input_ids-only fallback (:mod:`calyrex.span.markers`) must give the same span.

**Token parity.** The ids are the tokenizer's own tokenisation of the rendered string, so they
equal ``tokenizer.apply_chat_template(..., tokenize=True)`` — the tokens every server feeds the
model — on byte-level BPE and SentencePiece alike. The only exception keeps user text plain: a
message content that contains a special-token string (``<|im_start|>``) is tokenised with
``split_special_tokens=True`` inside the piece of text between the template's own special
tokens, so it can never produce a special token. Offsets (fast tokenizers) map tokens to
characters.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import BatchEncoding

from .render import ChatTemplateError, Message, Rendered, render, system_is_default

IGNORE_INDEX = -100

__all__ = [
    "IGNORE_INDEX",
    "ChatTemplateError",
    "Segment",
    "SystemPromptTruncatedError",
    "encode_chat",
    "encode_one",
    "pad_batch",
    "segments",
    "tokenise",
]


class SystemPromptTruncatedError(ValueError):
    """``max_length`` would cut the system prompt; a truncated rule is worse than none."""


@dataclass
class Segment:
    ids: list[int]
    role: str | None  # None for template text; the message role for message content


def _special_pattern(tokenizer: Any) -> re.Pattern | None:
    """Regex of every special-token string, longest first (as the tokenizer's own splitter)."""
    strings = {t.content for t in tokenizer.added_tokens_decoder.values() if t.special}
    strings |= set(getattr(tokenizer, "all_special_tokens", []))
    strings = sorted((s for s in strings if s), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, strings))) if strings else None


def _encode(tokenizer: Any, text: str, plain: bool) -> tuple[list[int], list[tuple[int, int]]]:
    enc = tokenizer(
        text,
        add_special_tokens=False,
        split_special_tokens=plain,
        return_offsets_mapping=True,
    )
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def tokenise(tokenizer: Any, rendered: Rendered) -> tuple[list[int], list[tuple[int, int]]]:
    """(ids, character offsets) of a rendered conversation (module doc, "Token parity").

    Linear in the text: every lookup below is a bisection over positions in text order (a
    conversation of many messages full of special-token strings is a request like any other).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ChatTemplateError(
            "calyrex needs a fast tokenizer (tokenizer.json) to map characters to tokens"
        )
    ids, offsets = _encode(tokenizer, rendered.text, plain=False)
    pattern = _special_pattern(tokenizer)
    if pattern is None:
        return ids, offsets
    matches = list(pattern.finditer(rendered.text))
    hits = [m.start() for m in matches]  # in text order
    inside = _inside(rendered.contents)
    if not any(inside(h) for h in hits):
        return ids, offsets
    # pieces between the template's own special tokens; re-tokenise as plain text those that hold
    # a special-token string written inside a message content
    cuts = [0] + [x for m in matches if not inside(m.start()) for x in m.span()]
    cuts.append(len(rendered.text))
    pieces = [
        (a, b)
        for a, b in zip(cuts[::2], cuts[1::2], strict=True)
        if bisect.bisect_left(hits, a) < bisect.bisect_left(hits, b)  # a hit starts in [a, b)
    ]
    out_ids: list[int] = []
    out_off: list[tuple[int, int]] = []
    k = 0
    for a, b in pieces:
        while k < len(ids) and offsets[k][0] < a:
            out_ids.append(ids[k])
            out_off.append(offsets[k])
            k += 1
        while k < len(ids) and offsets[k][0] < b:
            k += 1  # the tokeniser's own split of this piece, spoofed special tokens included
        new_ids, new_off = _encode(tokenizer, rendered.text[a:b], plain=True)
        out_ids += new_ids
        out_off += [(s + a, e + a) for s, e in new_off]
    return out_ids + ids[k:], out_off + offsets[k:]


def _inside(contents: Sequence[tuple[int, int, int]]) -> Any:
    """``pos -> bool``: is ``pos`` inside a content? (contents in text order, disjoint)"""
    starts, ends = [a for a, _, _ in contents], [b for _, b, _ in contents]

    def inside(pos: int) -> bool:
        j = bisect.bisect_right(starts, pos) - 1
        return j >= 0 and pos < ends[j]

    return inside


def token_owners(
    offsets: Sequence[tuple[int, int]], contents: Sequence[tuple[int, int, int]]
) -> list[frozenset[int]]:
    """For each token, the indices of the messages whose content characters it holds.

    ``contents`` are in text order and disjoint (as :func:`~calyrex.span.render.render` gives them),
    so each token looks only at the contents it overlaps: linear in tokens + contents. Equal sets
    are one shared frozenset (a long conversation is not a million small objects). An empty
    content has no character, so no token holds it (not even one that spans its place).
    """
    contents = [c for c in contents if c[0] < c[1]]
    starts, ends = [a for a, _, _ in contents], [b for _, b, _ in contents]
    shared: dict[tuple[int, ...], frozenset[int]] = {}
    out = []
    for s, e in offsets:
        e = max(e, s + 1)  # a zero-width token (a prepended ▁) belongs where it stands
        j = k = bisect.bisect_right(ends, s)  # the first content ending after s
        while k < len(contents) and starts[k] < e:
            k += 1
        owners = tuple(c[2] for c in contents[j:k])
        out.append(shared.get(owners) or shared.setdefault(owners, frozenset(owners)))
    return out


def encode_one(
    tokenizer: Any,
    conversation: Sequence[Message],
    add_generation_prompt: bool = False,
    max_length: int | None = None,
    tools: Sequence[dict] | None = None,
    **template_kwargs: Any,
) -> dict[str, list[int]]:
    """``input_ids``, ``system_mask`` and ``labels`` of one conversation, unpadded.

    ``system_mask`` is 1 on the span (module doc). ``labels`` equal the ids on assistant contents
    and the end-of-turn token that follows each, ``-100`` elsewhere; where the template moved the
    system prompt into the last user turn (``Rendered.history_end``), only the assistant turns
    after it are labelled.
    """
    rendered = render(tokenizer, conversation, add_generation_prompt, tools, **template_kwargs)
    ids, offsets = tokenise(tokenizer, rendered)
    owners = token_owners(offsets, rendered.contents)
    anchored = bool(conversation) and conversation[0]["role"] == "system"
    if anchored and not rendered.history_end:
        anchored = not system_is_default(
            tokenizer, conversation, add_generation_prompt, tools, **template_kwargs
        )
    system = [int(anchored and o == {0}) for o in owners]
    labels, previous = [], False
    for tok, o in zip(ids, owners, strict=True):
        answer = any(
            conversation[i]["role"] == "assistant" and i >= rendered.history_end for i in o
        )
        labels.append(tok if answer or (previous and not o) else IGNORE_INDEX)
        previous = answer
    if max_length is not None and len(ids) > max_length:
        if any(system[max_length:]):
            raise SystemPromptTruncatedError(
                f"the system prompt ends at token {max(i for i, s in enumerate(system) if s) + 1} "
                f"but max_length is {max_length}"
            )
        ids, system, labels = ids[:max_length], system[:max_length], labels[:max_length]
    return {"input_ids": ids, "system_mask": system, "labels": labels}


def segments(
    tokenizer: Any, conversation: Sequence[Message], add_generation_prompt: bool = False
) -> list[Segment]:
    """Runs of tokens of one conversation: template text (role None) and message contents."""
    rendered = render(tokenizer, conversation, add_generation_prompt)
    ids, offsets = tokenise(tokenizer, rendered)
    out: list[Segment] = []
    for tok, o in zip(ids, token_owners(offsets, rendered.contents), strict=True):
        role = conversation[min(o)]["role"] if o else None
        if out and out[-1].role == role:
            out[-1].ids.append(tok)
        else:
            out.append(Segment([tok], role))
    return out


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
    tools: Sequence[dict] | None = None,
    **template_kwargs: Any,
) -> BatchEncoding:
    """Encode conversations with the tokenizer's chat template and mark their system spans.

    Returns ``input_ids`` (equal to ``apply_chat_template(..., tokenize=True)``),
    ``attention_mask``, ``system_mask`` (1 on the span, module doc) and, with ``with_labels``,
    ``labels`` (-100 except on assistant contents and their end-of-turn token), padded on
    ``tokenizer.padding_side``. ``tools`` and ``template_kwargs`` (``enable_thinking=``,
    ``date_string=``) go to the template.
    """
    if conversations and isinstance(conversations[0], dict):
        conversations = [conversations]  # one conversation given bare
    rows = [
        encode_one(tokenizer, c, add_generation_prompt, max_length, tools, **template_kwargs)
        for c in conversations
    ]
    return pad_batch(tokenizer, rows, with_labels)
