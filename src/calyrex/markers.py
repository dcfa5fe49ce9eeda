"""Fallback for callers that pass only ``input_ids`` (e.g. lm-eval's log-likelihood path).

The fallback finds the same span as :func:`calyrex.encode_chat` (the span rule is in
:mod:`calyrex.chat`) from token ids alone, using only what is stable in the template's output:

- ``open``: the ids that start every sequence with a system block — special tokens and the role
  name (``<|im_start|>system``, ``<|begin_of_text|><|start_header_id|>system<|end_header_id|>``).
  Only a block at the very start (after padding and an optional extra BOS) is ever examined.
- ``close``: the special token that ends the block; user text cannot produce it.
- ``patterns``: the block's ids around the system content, learnt by rendering probe
  conversations twice with different dates and tools. Whatever changes between the renders
  (Llama 3's "Today Date: …", the tool JSON) becomes a wildcard, so nothing date-bearing is
  stored: markers built today match a prompt rendered on any other day. The token next to the
  content may differ from the probe's (a system prompt that starts with a newline merges with
  Qwen's header ``\\n``; a final ``.`` merges with Qwen's ``\\n\\n# Tools``): that one straddling
  token is span, as in ``encode_chat``.
- ``defaults``: contents that the template prints by itself (Qwen2.5's "You are Qwen, …",
  Mistral-Small's dated default): not span, as in ``encode_chat``.

Templates that print the system prompt inside a user turn (Mistral v0.3 / Nemo, Gemma 3) have no
fallback: from ids alone it cannot be told apart from user text. :func:`span_markers_reason` says
why; such models need ``system_mask`` from ``encode_chat``.
"""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .chat import token_owners, tokenise
from .render import ChatTemplateError, render, template_today

WILD, CONTENT = "*", "content"  # pattern items besides literal id tuples
Item = tuple[int, ...] | str
Pattern = tuple[Item, ...]

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

    def to_dict(self) -> dict[str, Any]:
        enc = lambda p: [list(i) if isinstance(i, tuple) else i for i in p]  # noqa: E731
        return {
            "version": 2,
            "open": list(self.open),
            "close": self.close,
            "patterns": [enc(p) for p in self.patterns],
            "defaults": [enc(p) for p in self.defaults],
            "bos": self.bos,
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
        return cls(
            tuple(data["open"]),
            int(data["close"]),
            tuple(dec(p) for p in data["patterns"]),
            tuple(dec(p) for p in data.get("defaults", [])),
            data.get("bos"),
        )


# ---------------------------------------------------------------------------------------------
# matching


def _ends(items: Sequence[Item], ids: Sequence[int], pos: int) -> Iterator[int]:
    """Every end position where ``items`` (literals and wildcards) match ids[pos:end], shortest
    first."""
    if not items:
        yield pos
        return
    head, rest = items[0], items[1:]
    if head == WILD:
        for k in range(pos, len(ids) + 1):
            yield from _ends(rest, ids, k)
    elif tuple(ids[pos : pos + len(head)]) == head:
        yield from _ends(rest, ids, pos + len(head))


def _full(items: Sequence[Item], ids: Sequence[int]) -> bool:
    return any(end == len(ids) for end in _ends(items, ids, 0))


def _content(pattern: Pattern, block: Sequence[int]) -> tuple[int, int] | None:
    """(start, end) of the content in ``block`` under ``pattern``, straddling tokens included."""
    cut = pattern.index(CONTENT)
    pre, post = list(pattern[:cut]), list(pattern[cut + 1 :])
    starts = list(_ends(pre, block, 0))
    if not starts and pre and isinstance(pre[-1], tuple):  # the last header token merged
        shorter = pre[:-1] + ([pre[-1][:-1]] if len(pre[-1]) > 1 else [])
        starts = [e for e in _ends(shorter, block, 0) if e < len(block)]
    for p in starts:
        for r in range(len(block), p - 1, -1):  # the content is as long as it can be
            if _full(post, block[r:]):
                return p, r
            if post and isinstance(post[0], tuple) and r < len(block):
                merged = ([post[0][1:]] if len(post[0]) > 1 else []) + post[1:]
                if _full(merged, block[r + 1 :]) and block[r] != post[0][0]:
                    return p, r + 1
    return None


def _find(markers: SpanMarkers, row: Sequence[int]) -> tuple[int, int] | None:
    """(start, end) of the span in a row that starts at its first real token, or None."""
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
    block = row[begin:stop]
    for pattern in markers.patterns:
        found = _content(pattern, block)
        if found is None:
            continue
        a, b = found
        if a == b or any(_full(d, block[a:b]) for d in markers.defaults):
            return None
        return begin + a, begin + b
    warnings.warn(
        "a leading system block that the input_ids-only span fallback cannot parse: no system "
        "span for this row; pass system_mask from calyrex.encode_chat",
        stacklevel=3,
    )
    return None


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
    markers = SpanMarkers(opener, close, tuple(patterns), (), tokenizer.bos_token_id)
    return _with_defaults(tokenizer, markers), "ok"


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
            span = _find(markers, ids)
            if span is None or any(owners[k] for k in range(*span)):
                break
            found.append(ids[span[0] : span[1]])
        if len(found) == 2:
            defaults.append(tuple(_diff(found[0], found[1])))
    return SpanMarkers(markers.open, markers.close, markers.patterns, tuple(defaults), markers.bos)


def span_markers(tokenizer: Any) -> SpanMarkers | None:
    """Markers of the system block under ``tokenizer``'s template, or None (never raises)."""
    return span_markers_reason(tokenizer)[0]
