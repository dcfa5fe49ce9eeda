"""A conversation → the token ids the engine runs, its span, and its cacheable system prefix.

Rendering goes through :func:`calyrex.encode_chat` only: the tokenizer's own chat template,
user-typed special-token strings kept as plain text, the span = the leading system message.
The cacheable prefix is the system turn: the tokens the conversation shares with its system
message rendered alone (``<|im_start|>system\\n…<|im_end|>\\n`` under ChatML), so every
conversation under one system prompt has the same prefix ids and the same cache key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..span.chat import encode_chat, tokenise
from ..span.render import render


@dataclass
class Prompt:
    input_ids: list[int]
    system_mask: list[int]
    prefix_len: int  # tokens through the end of the system turn (0: no system prompt)


def encode_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> Prompt:
    """Encode for generation (``add_generation_prompt``) and find the system-turn prefix."""
    enc = encode_chat(tokenizer, [messages], add_generation_prompt=True)
    ids, span = enc["input_ids"][0].tolist(), enc["system_mask"][0].tolist()
    return Prompt(ids, span, system_prefix(tokenizer, messages, ids, span))


def system_prefix(
    tokenizer: Any, messages: list[dict[str, str]], ids: list[int], span: list[int]
) -> int:
    """Length of the system turn inside ``ids``; at least one token is left to run."""
    if not any(span) or messages[0]["role"] != "system":
        return 0
    alone, _ = tokenise(tokenizer, render(tokenizer, messages[:1]))
    common = 0
    for a, b in zip(alone, ids, strict=False):
        if a != b:
            break
        common += 1
    return min(common, len(ids) - 1)


def system_turn(tokenizer: Any, system: str) -> Prompt:
    """The system turn of any conversation under ``system`` (to pre-warm the cache with it)."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "."}]
    full = encode_prompt(tokenizer, messages)
    k = full.prefix_len
    return Prompt(full.input_ids[:k], full.system_mask[:k], k)
