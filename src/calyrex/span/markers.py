"""Fallback for callers that pass only ``input_ids`` (e.g. lm-eval's log-likelihood path).

The fallback finds the same span as :func:`calyrex.encode_chat` (the span rule is in
:mod:`calyrex.span.chat`) from token ids alone, using only what is stable in the template's output:

- ``open``: the ids that start every sequence with a system block — special tokens and the role
  name (``<|im_start|>system``, ``<|begin_of_text|><|start_header_id|>system<|end_header_id|>``).
  Only a block at the very start (after padding and an optional extra BOS) is ever examined.
- ``close``: the special token that ends the block; user text cannot produce it.
- ``patterns``: the block's ids around the system content, learnt by rendering probe
  conversations twice with different dates and tools. Whatever changes between the renders
  (Llama 3's "Today Date: …", the tool JSON) becomes a wildcard, so nothing date-bearing is
  stored: markers built today match a prompt rendered on any other day. Patterns are tried most
  specific first; one whose outer template text is in the block but that does not parse keeps
  a less specific one from taking the block (Qwen's tools block is never content).
- ``texts``: the text of every token that fits in the template's edge next to the content.
  A content may merge with the edge or split it anew (a prompt that starts with a newline
  merges with Qwen's header ``\\n``; a final ``.`` with Qwen's ``\\n\\n# Tools``), so the
  edge is read in characters (:mod:`calyrex.span.patterns`): a token is span iff it holds a
  character of the content, as in ``encode_chat``.
- ``defaults``: contents that the template prints by itself (Qwen2.5's "You are Qwen, …",
  Mistral-Small's dated default): not span, as in ``encode_chat``. The date of Mistral-Small's
  default is a wildcard, so a system message that copies it with *another* date is span for
  ``encode_chat`` (it renders unlike no system message) and no span here.

Where the ids cannot say, the fallback marks nothing (and warns): it never guesses a span.
Templates that print the system prompt inside a user turn (Mistral v0.3 / Nemo, Gemma 3) have no
fallback: from ids alone it cannot be told apart from user text. :func:`span_markers_reason` says
why; such models need ``system_mask`` from ``encode_chat``.
"""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import torch

from .chat import token_owners, tokenise
from .patterns import CONTENT, EDGE, WILD, Item, Pattern, claims, content_span, edges, full
from .render import ChatTemplateError, render, template_today

_DATES = (datetime.date(2024, 7, 26), datetime.date(1999, 3, 13))  # no digit or letter in common
_TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {
        "function": {
            "name": "lookup",
            "description": "Look up a word",
            "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}},
        },
        "type": "function",
    },
)
_PROBES = ("X", "Zebra", "0", "§")  # probe system contents; one that merges with nothing


@dataclass(frozen=True)
class SpanMarkers:
    open: tuple[int, ...]  # ids that open a leading system block
    close: int  # special token that closes it
    patterns: tuple[Pattern, ...] = ((CONTENT,),)  # the block after ``open``, most specific first
    defaults: tuple[Pattern, ...] = ()  # contents that are the template's own text
    bos: int | None = None
    texts: tuple[tuple[int, str], ...] = ()  # (id, text) of every token inside the edges

    @cached_property
    def text_of(self) -> dict[int, str]:
        return dict(self.texts)

    def to_dict(self) -> dict[str, Any]:
        enc = lambda p: [list(i) if isinstance(i, tuple) else i for i in p]  # noqa: E731
        return {
            "version": 3,
            "open": list(self.open),
            "close": self.close,
            "patterns": [enc(p) for p in self.patterns],
            "defaults": [enc(p) for p in self.defaults],
            "bos": self.bos,
            "texts": [list(t) for t in self.texts],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpanMarkers:
        dec = lambda p: tuple(tuple(i) if isinstance(i, list) else i for i in p)  # noqa: E731
        if "header" in data:  # calyrex < issue 12: the exact header ids, a date included
            warnings.warn(
                "span markers of an older calyrex: they hold the template's exact header text "
                "(for Llama 3.x a date), so the input_ids-only fallback stops finding the span on "
                "another day; pass tokenizer= to load_adapter to rebuild them",
                stacklevel=2,
            )
            return cls(tuple(data["header"]), int(data["end"]), bos=data.get("bos"))
        if "texts" not in data:  # calyrex < issue 26
            warnings.warn(
                "span markers of an older calyrex: they lack the text of the template's tokens "
                "around the system prompt, so a prompt whose first or last token merges with the "
                "template gets no span from input_ids alone; pass tokenizer= to load_adapter (or "
                "re-run calyrex export-vllm) to rebuild them",
                stacklevel=2,
            )
        return cls(
            tuple(data["open"]),
            int(data["close"]),
            tuple(dec(p) for p in data["patterns"]),
            tuple(dec(p) for p in data.get("defaults", [])),
            data.get("bos"),
            tuple((int(i), str(t)) for i, t in data.get("texts", [])),
        )


# ---------------------------------------------------------------------------------------------
# matching


def _parse(markers: SpanMarkers, row: Sequence[int], learning: bool = False) -> Any:
    """(start, end) in ``row`` of the leading system block's content, ``None`` where the row has
    no such block, ``"?"`` where the fallback cannot tell (module doc). ``learning``: take the
    content even where a more specific pattern claims the block (defaults are learnt so)."""
    start, n = 0, len(markers.open)
    if markers.bos is not None and (not n or markers.open[0] != markers.bos):
        start = int(len(row) > 0 and row[0] == markers.bos)
    elif markers.bos is not None and len(row) > 1 and row[0] == row[1] == markers.bos:
        start = 1  # a harness added BOS before a template that renders its own
    if tuple(row[start : start + n]) != markers.open:
        return None
    begin = start + n
    try:
        stop = row.index(markers.close, begin)
    except ValueError:
        return None
    block, texts, failed = row[begin:stop], markers.text_of, []
    for pattern in markers.patterns:  # most specific first
        found = content_span(pattern, block, texts)
        if found is None:
            failed.append(pattern)
            continue
        a, b = found
        if a == b or any(full(d, block[a:b]) for d in markers.defaults):
            return begin, begin  # no content, or the template's own: no span
        if not learning and any(claims(q, block, texts) for q in failed):
            return "?"
        return begin + a, begin + b
    return "?"


def _find(markers: SpanMarkers, row: Sequence[int]) -> tuple[int, int] | None:
    """(start, end) of the span in a row that starts at its first real token, or None."""
    found = _parse(markers, row)
    if found == "?":
        warnings.warn(
            "a leading system block that the input_ids-only span fallback cannot parse: no "
            "system span for this row; pass system_mask from calyrex.encode_chat",
            stacklevel=3,
        )
    return found if isinstance(found, tuple) and found[0] < found[1] else None


def find_span(markers: SpanMarkers, ids: Sequence[int]) -> tuple[int, int] | None:
    """(start, end) of the system span in one unpadded sequence of ids, or None.

    The span rule of :func:`detect_system_mask` for one row: a serving engine computes it once
    per request from the whole prompt (``calyrex.vllm``).
    """
    return _find(markers, list(ids))


def detect_system_mask(
    input_ids: torch.Tensor, attention_mask: torch.Tensor | None, markers: SpanMarkers
) -> torch.Tensor:
    """(B, T) ids → (B, T) bool system mask, found at the start of each row only."""
    out = torch.zeros_like(input_ids, dtype=torch.bool)
    for b in range(input_ids.shape[0]):  # fallback path only; the main path gets system_mask
        first = 0 if attention_mask is None else int(attention_mask[b].long().argmax())
        found = _find(markers, input_ids[b, first:].tolist())
        if found is not None:
            out[b, first + found[0] : first + found[1]] = True
    return out


# ---------------------------------------------------------------------------------------------
# building


def _template_kwargs(date: datetime.date) -> dict[str, Any]:
    return {"date_string": date.strftime("%d %b %Y")}  # Llama 3.1's variable


def _diff(a: Sequence[int], b: Sequence[int]) -> list[Item]:
    """Ids common to both lists at the start and at the end, one wildcard for what differs."""
    if list(a) == list(b):
        return [tuple(a)] if a else []
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    m = 0
    while m < min(len(a), len(b)) - n and a[-1 - m] == b[-1 - m]:
        m += 1
    out: list[Item] = [tuple(a[:n]), WILD, tuple(a[len(a) - m :])]
    return [i for i in out if i != ()]


def _probe(tokenizer: Any, system: str | None, tools: Any, date: datetime.date) -> Any:
    conv = [{"role": "user", "content": "Hello"}]
    if system is not None:
        conv = [{"role": "system", "content": system}, *conv]
    with template_today(date):
        rendered = render(
            tokenizer, conv, False, [tools] if tools else None, **_template_kwargs(date)
        )
    ids, offsets = tokenise(tokenizer, rendered)
    return ids, offsets, rendered, token_owners(offsets, rendered.contents)


def _structure(tokenizer: Any, specials: set[int]) -> tuple[Any, str]:
    """(open, close, {variant: (pre, post) per date}) from probes, or (None, reason)."""
    for probe in _PROBES:
        runs: dict[str | None, list] = {}
        for tools in (None, _TOOLS[0], _TOOLS[1]):
            for date in _DATES:
                try:
                    ids, offsets, rendered, owners = _probe(tokenizer, probe, tools, date)
                except ChatTemplateError as err:
                    if tools is None:
                        return None, f"the chat template cannot render a system message: {err}"
                    continue
                sys_tok = [k for k, o in enumerate(owners) if o == {0}]
                (a, b, _), (ua, ub, _) = sorted(rendered.contents, key=lambda c: c[2])
                before = [k for k in range(sys_tok[0]) if ids[k] in specials] if sys_tok else []
                if not sys_tok or not before:
                    return None, "the system prompt is not inside a block opened by special tokens"
                after = next((k for k in range(sys_tok[-1], len(ids)) if ids[k] in specials), None)
                if after is None or offsets[before[-1]][1] <= ua < offsets[after][0]:
                    return None, (
                        "the chat template prints the system prompt inside a user turn; token ids "
                        "cannot tell it from user text, so there is no input_ids-only fallback"
                    )
                if any(o for o in owners[: before[-1]]):
                    return None, "the system block is not the first thing in the sequence"
                straddle = offsets[sys_tok[0]][0] < a or offsets[sys_tok[-1]][1] > b
                opener = tuple(ids[: before[-1] + 1])
                runs.setdefault("key", []).append((opener, ids[after]))
                runs.setdefault(str(tools is not None) + str(tools), []).append(
                    (ids[before[-1] + 1 : sys_tok[0]], ids[sys_tok[-1] + 1 : after], straddle)
                )
        if any(s for k, v in runs.items() if k != "key" for *_, s in v):
            continue  # this probe content merged with the template text; try another
        if len(set(runs["key"])) != 1:
            return None, "the system block opens or closes differently across dates and tools"
        return runs, ""
    return None, "every probe system prompt merges with the template text"


def span_markers_reason(tokenizer: Any) -> tuple[SpanMarkers | None, str]:
    """The fallback markers of ``tokenizer``'s template, or None and the reason there are none."""
    try:
        specials = set(tokenizer.all_special_ids) | {
            i for i, t in tokenizer.added_tokens_decoder.items() if t.special
        }
        runs, reason = _structure(tokenizer, specials)
    except ChatTemplateError as err:
        return None, str(err)
    except Exception as err:  # never let a template crash wrap() / load_adapter()
        return None, f"the chat template failed on a probe conversation: {err!r}"
    if runs is None:
        return None, reason
    (opener, close), *_ = runs.pop("key")
    if close not in specials:
        return None, "the system block is not closed by a special token"
    patterns = []
    for (pre1, post1, _), (pre2, post2, _), *_ in _pairs(runs):
        patterns.append((*_diff(pre1, pre2), CONTENT, *_diff(post1, post2)))
    patterns = sorted(set(patterns), key=lambda p: -sum(len(i) for i in p if isinstance(i, tuple)))
    opener, patterns = _widen_open(opener, patterns)
    if any(WILD in edges(p) for p in patterns):
        return None, "the template prints varying text (a date, the tools) next to the content"
    texts = _edge_texts(tokenizer, patterns)
    markers = SpanMarkers(opener, close, tuple(patterns), (), tokenizer.bos_token_id, texts)
    return _with_defaults(tokenizer, markers), "ok"


def _edge_texts(tokenizer: Any, patterns: Sequence[Pattern]) -> tuple[tuple[int, str], ...]:
    """(id, text) of the template's tokens next to the content (``EDGE`` characters on each
    side) and of every token whose text lies inside them, across both for an empty content:
    the tokens a content can re-tokenise the template's edge into (module doc)."""
    anchor = tokenizer("a", add_special_tokens=False)["input_ids"]
    decode = lambda ids: tokenizer.decode(  # noqa: E731
        ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
    )
    prefix, known = decode(anchor), {}

    def text(i: int) -> str:  # the text of token i within a sequence (no SentencePiece strip)
        if i not in known:
            whole = decode([*anchor, i])
            known[i] = whole[len(prefix) :] if whole.startswith(prefix) else ""
        return known[i]

    def edge(lit: Item, backwards: bool) -> list[int]:
        out, size = [], 0
        for i in reversed(lit) if backwards else lit:
            if not text(i) or (out and size + len(text(i)) > EDGE):
                break
            out, size = out + [i], size + len(text(i))
        return out[::-1] if backwards else out

    out: dict[int, str] = {}
    for pattern in patterns:
        before, after = (edge(lit, k == 0) for k, lit in enumerate(edges(pattern)))
        window = "".join(text(i) for i in before + after)
        pieces = [window[a:b] for a in range(len(window)) for b in range(a + 1, len(window) + 1)]
        found = tokenizer(pieces, add_special_tokens=False)["input_ids"] if pieces else []
        for i in {i for ids in [before + after, *found] for i in ids}:
            if text(i) and text(i) in window:
                out[i] = text(i)
    return tuple(sorted(out.items()))


def _pairs(runs: dict[str, list]) -> list[list]:
    """Per tools variant, the (pre, post) of both dates; the two tool variants paired as well."""
    out = [v for k, v in runs.items() if k.startswith("False")]
    tools = [v for k, v in runs.items() if k.startswith("True")]
    if len(tools) == 2:
        out.append([tools[0][0], tools[1][1]])  # tool 1 on date 1 vs tool 2 on date 2
    return [p for p in out if len(p) >= 2]


def _widen_open(opener: tuple[int, ...], patterns: list[Pattern]) -> tuple[tuple, list[Pattern]]:
    """Move the literal tokens every pattern starts with (the role name) into ``open``, keeping
    the one token next to the content, which may merge with it."""
    heads = [p[0] if isinstance(p[0], tuple) else () for p in patterns]
    limit = min(
        len(h) - (len(h) > 0 and p[1] == CONTENT) for h, p in zip(heads, patterns, strict=True)
    )
    common = 0
    while common < limit and len({h[common] for h in heads}) == 1:
        common += 1
    if not common:
        return opener, patterns
    cut = [((p[0][common:],) if len(p[0]) > common else ()) + p[1:] for p in patterns]
    return opener + heads[0][:common], cut


def _with_defaults(tokenizer: Any, markers: SpanMarkers) -> SpanMarkers:
    """Add the contents the template prints with no system message (Qwen2.5's default), with
    and without tools; dates and tools vary between the two probes of each."""
    defaults = []
    for probes in ((None, None), _TOOLS):
        found = []
        for tools, date in zip(probes, _DATES, strict=True):
            try:
                ids, _, _, owners = _probe(tokenizer, None, tools, date)
            except ChatTemplateError:
                break
            span = _parse(markers, ids, learning=True)
            if not isinstance(span, tuple) or span[0] == span[1]:
                break
            if any(owners[k] for k in range(*span)):
                break
            found.append(ids[span[0] : span[1]])
        if len(found) == 2:
            defaults.append(tuple(_diff(found[0], found[1])))
    return replace(markers, defaults=tuple(defaults))


def span_markers(tokenizer: Any) -> SpanMarkers | None:
    """Markers of the system block under ``tokenizer``'s template, or None (never raises)."""
    return span_markers_reason(tokenizer)[0]
