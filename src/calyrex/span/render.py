"""Render a conversation with the tokenizer's own chat template and locate every message content.

The rendered string is what a server (vLLM, TGI, ``transformers serve``) tokenises, so calyrex
tokenises that same string. To know where each message content landed, the conversation is
rendered a second time with unguessable placeholders in place of the contents: the template
text around the placeholders is the same in both renders, so the real render is parsed as
``T0 c0' T1 c1' ...`` where each ``ci'`` is the content as the template printed it (verbatim, or
trimmed — Llama 3 trims, Qwen3 strips leading newlines of the last reply). User text is never
searched for marker strings.

Templates that move the system prompt into the *last* user turn (Mistral v0.3, Nemo) drop it when
the conversation ends with an assistant turn, so no training sample could carry it. Such a
conversation is rendered the way the template serves its final turn: the conversation up to the
last user message (system prompt included, as served), then the remaining assistant turns as the
template renders them. ``Rendered.history_end`` then marks the earlier assistant turns as history.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]


class ChatTemplateError(ValueError):
    """The tokenizer has no chat template, or one calyrex cannot map to message boundaries."""


@dataclass(frozen=True)
class Rendered:
    text: str
    contents: tuple[tuple[int, int, int], ...]  # (start, end, message index): characters of text
    history_end: int = 0  # assistant messages before this index are history, never labelled


def apply_template(
    tokenizer: Any,
    conversation: Sequence[Message],
    add_generation_prompt: bool = False,
    tools: Sequence[dict] | None = None,
    **template_kwargs: Any,
) -> str:
    """The template's rendering of ``conversation``; template errors become ChatTemplateError."""
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template; "
            "calyrex needs it to find the system prompt (set tokenizer.chat_template)"
        )
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(
            list(conversation),
            tools=list(tools) if tools else None,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **template_kwargs,
        )
    except TemplateError as err:
        why = f"the chat template refuses this conversation: {err}"
        if conversation and conversation[0].get("role") == "system":
            why += (
                " (a template that rejects a system message gives CALYREX no system prompt to "
                "anchor; merge the rules into the first user message or use another model)"
            )
        raise ChatTemplateError(why) from err


@contextmanager
def template_today(day: datetime.date) -> Iterator[None]:
    """Render templates as if today were ``day`` (their ``strftime_now``; Llama 3.2, Mistral-Small).

    transformers' ``strftime_now`` reads ``datetime.now()`` of its module and cannot be passed as
    a template variable (variables are converted to plain data), so the module's ``datetime`` is
    swapped for the duration: process-wide, for marker building and tests only.
    """
    from transformers.utils import chat_template_utils as ctu

    class Fixed(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime.datetime:  # noqa: ARG003
            return cls(day.year, day.month, day.day, 12)

    saved = ctu.datetime
    ctu.datetime = Fixed
    try:
        yield
    finally:
        ctu.datetime = saved


def _check_roles(conversation: Sequence[Message]) -> None:
    for i, m in enumerate(conversation):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"message {i} must be a dict with 'role' and 'content', got {m!r}")
        if m["role"] == "system" and i > 0:
            raise ValueError(
                "only the first message may be a system message (it anchors every turn)"
            )


def _compose(tokenizer: Any, conv: Sequence[Message], slot: str, **kw: Any) -> tuple[str, int]:
    """(text, history_end) of the placeholder conversation: the template's own rendering, or the
    final-turn rendering where the template drops the system prompt (module doc)."""
    text = apply_template(tokenizer, conv, **kw)
    if not conv or conv[0]["role"] != "system" or slot in text:
        return text, 0
    users = [i for i, m in enumerate(conv) if m["role"] == "user"]
    if not users or users[-1] == len(conv) - 1:
        return text, 0  # the template really drops it; the caller reports that
    final = _final_turn(tokenizer, conv, users[-1] + 1, **kw)
    return (final, users[-1] + 1) if final is not None and slot in final else (text, 0)


def _variants(content: str) -> list[str]:
    """The forms a template may print a content in, the verbatim one first."""
    out = []
    for v in (
        content,
        content.strip(),
        content.lstrip("\n"),
        content.rstrip(),
        content.lstrip(),
        content.strip("\n"),
        content.rstrip("\n"),
    ):
        if v not in out:
            out.append(v)
    return out


def _align(
    real: str, template: Sequence[str], contents: Sequence[str]
) -> list[tuple[int, int]] | None:
    """Parse ``real`` as template[0] c0' template[1] c1' ...; the (start, end) of each ci'.

    A depth-first search over the variants of each content, in order (the first parse found is
    the answer), kept on an explicit stack so a conversation of any length fits; a (message,
    position) that failed once is never searched again.
    """

    def ends(i: int, pos: int) -> Iterator[int]:  # where content i may end when it starts at pos
        for v in _variants(contents[i]):
            end = pos + len(v)
            if real.startswith(v, pos) and real.startswith(template[i + 1], end):
                yield end

    if not real.startswith(template[0]):
        return None
    if not contents:
        return [] if len(template[0]) == len(real) else None
    starts, chosen = [len(template[0])], [0]  # per open message: its start and the end tried
    frames, failed = [ends(0, starts[0])], set()
    while frames:
        i = len(frames) - 1
        end = next(frames[i], None)
        if end is None:  # every variant of message i failed here: back to message i - 1
            failed.add((i, starts.pop()))
            del frames[-1], chosen[-1]
            continue
        chosen[i], after = end, end + len(template[i + 1])
        if i + 1 == len(contents):
            if after == len(real):
                return list(zip(starts, chosen, strict=True))
        elif (i + 1, after) not in failed:
            starts.append(after)
            chosen.append(0)
            frames.append(ends(i + 1, after))
    return None


def render(
    tokenizer: Any,
    conversation: Sequence[Message],
    add_generation_prompt: bool = False,
    tools: Sequence[dict] | None = None,
    **template_kwargs: Any,
) -> Rendered:
    """The rendered conversation and the character range of every message content in it."""
    _check_roles(conversation)
    kw = dict(add_generation_prompt=add_generation_prompt, tools=tools, **template_kwargs)
    slots = [f"CALYREXSLOT{secrets.token_hex(8)}X" for _ in conversation]
    placeholder = [{**m, "content": s} for m, s in zip(conversation, slots, strict=True)]
    marked, history_end = _compose(tokenizer, placeholder, slots[0], **kw)
    found = []
    for i, (slot, message) in enumerate(zip(slots, conversation, strict=True)):
        count = marked.count(slot)
        if count != 1:
            where = "drops" if count == 0 else "repeats"
            raise ChatTemplateError(
                f"the chat template {where} the content of message {i} ({message['role']!r}); "
                "calyrex cannot map message boundaries to tokens"
            )
        found.append((marked.index(slot), i))
    found.sort()
    template, rest = [], marked
    for _, i in found:
        head, _, rest = rest.partition(slots[i])
        template.append(head)
    template.append(rest)
    real = (
        _final_turn(tokenizer, conversation, history_end, **kw)
        if history_end
        else apply_template(tokenizer, conversation, **kw)
    )
    if real is None:
        raise ChatTemplateError("the chat template renders the conversation inconsistently")
    ranges = _align(real, template, [str(conversation[i]["content"]) for _, i in found])
    if ranges is None:
        raise ChatTemplateError(
            "the chat template renders message contents differently from the placeholders "
            "(it rewrites them or branches on their text); calyrex cannot map them to tokens"
        )
    contents = tuple((a, b, i) for (a, b), (_, i) in zip(ranges, found, strict=True))
    return Rendered(real, contents, history_end)


def _final_turn(tokenizer: Any, conv: Sequence[Message], history_end: int, **kw: Any) -> str | None:
    """The conversation up to its last user message as served (system prompt included), then the
    assistant tail as the template renders it; None if the tail is not a plain suffix."""
    head_kw = {**kw, "add_generation_prompt": False}
    head = apply_template(tokenizer, conv[:history_end], **head_kw)
    bare_full = apply_template(tokenizer, conv[1:], **kw)
    bare_head = apply_template(tokenizer, conv[1:history_end], **head_kw)
    if not bare_full.startswith(bare_head):
        return None
    return head + bare_full[len(bare_head) :]


def system_is_default(
    tokenizer: Any,
    conversation: Sequence[Message],
    add_generation_prompt: bool = False,
    tools: Sequence[dict] | None = None,
    **template_kwargs: Any,
) -> bool:
    """True when the system message renders exactly like no system message at all.

    A template's own default prompt (Qwen2.5's "You are Qwen, ...") or an empty system message
    under a template that always prints a system block (Llama 3) is not a system span: the same
    tokens arise without one, and the input_ids-only fallback must agree with ``encode_chat``.
    """
    if not conversation or conversation[0]["role"] != "system":
        return False
    kw = dict(add_generation_prompt=add_generation_prompt, tools=tools, **template_kwargs)
    try:
        bare = apply_template(tokenizer, conversation[1:], **kw)
    except ChatTemplateError:
        return False
    return bare == apply_template(tokenizer, conversation, **kw)
