"""``calyrex chat``: a terminal chat with any model (base + optional adapter), to try injections by hand."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, TextIO

import torch

from ..adapters.methods import accept_system_mask
from ..span.chat import encode_chat
from .fields import options_from


def reply(model: Any, tok: Any, conversation: list[dict[str, str]], max_new_tokens: int) -> str:
    """One greedy assistant turn for ``conversation``: ``encode_chat``'s batch, system span
    included (every model takes it: :func:`calyrex.adapters.methods.accept_system_mask`)."""
    model = accept_system_mask(model)
    batch = encode_chat(tok, [conversation], add_generation_prompt=True)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.no_grad():
        out = model.generate(
            **batch, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad
        )
    return tok.decode(out[0, batch["input_ids"].shape[1] :], skip_special_tokens=True).strip()


def session(
    model: Any, tok: Any, system: str | None, max_new_tokens: int, stdin: TextIO, stdout: TextIO
) -> int:
    """Read user turns from ``stdin`` until EOF or ``/quit``; ``/reset`` starts over. Returns turns."""
    conversation = [{"role": "system", "content": system}] if system else []
    turns = 0
    while True:
        stdout.write("user> ")
        stdout.flush()
        line = stdin.readline()
        if not line or line.strip() == "/quit":
            return turns
        if line.strip() == "/reset":
            conversation = conversation[:1] if system else []
            continue
        conversation.append({"role": "user", "content": line.rstrip("\n")})
        answer = reply(model, tok, conversation, max_new_tokens)
        conversation.append({"role": "assistant", "content": answer})
        stdout.write(f"assistant> {answer}\n")
        turns += 1


@dataclass
class ChatOptions:
    """``calyrex chat``'s options."""

    model: str
    """A hub id, a model directory or a registered name (smollm2, ruleworld)."""
    adapter: str | None = None
    """A trained adapter directory (any method)."""
    system: str | None = None
    """The system prompt of the conversation (kept across /reset)."""
    max_new_tokens: int = 128
    """The longest reply, in tokens."""


@options_from(ChatOptions)
def chat(**options: Any) -> None:
    """Chat in the terminal with MODEL (+ ADAPTER) under an optional --system prompt; /reset, /quit."""
    from ..adapters.loading import load_model

    opts = ChatOptions(**options)
    loaded, tok = load_model(opts.model, opts.adapter)
    session(loaded, tok, opts.system, opts.max_new_tokens, sys.stdin, sys.stdout)
