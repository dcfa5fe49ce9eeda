"""A system block's token ids against the template's patterns (:mod:`calyrex.span.markers`).

A pattern is the block as the template prints it around the system content: literal id tuples,
``WILD`` where the template's text varies (a date, the tools) and one ``CONTENT``. The span is
the tokens that hold a character of the content, as in :func:`calyrex.encode_chat`. Next to
the content a tokenizer may merge template text with it (Qwen's header ``\\n`` with a prompt
that starts with a newline, a final ``.`` with ``\\n\\n# Tools``) or split it anew; so the
markers keep the text of every token that fits inside the template's ``EDGE`` characters next to
the content, and the edge is read in characters: a known token whose text continues the
template's is template, the next one holds the rest of the template and content (span). Where
the ids cannot say (a merge reaches past the edge, a wildcard next to the content), nothing
parses and the fallback marks no span.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

WILD, CONTENT = "*", "content"  # pattern items besides literal id tuples
Item = tuple[int, ...] | str
Pattern = tuple[Item, ...]
EDGE = 32  # characters of template text on each side of the content whose tokens are known


def prefix_ends(items: Sequence[Item], ids: Sequence[int], pos: int) -> Iterator[int]:
    """Every end position where ``items`` (literals and wildcards) match ids[pos:end], shortest
    first."""
    if not items:
        yield pos
        return
    head, rest = items[0], items[1:]
    if head == WILD:
        for k in range(pos, len(ids) + 1):
            yield from prefix_ends(rest, ids, k)
    elif tuple(ids[pos : pos + len(head)]) == head:
        yield from prefix_ends(rest, ids, pos + len(head))


def full(items: Sequence[Item], ids: Sequence[int]) -> bool:
    return 0 in suffix_starts(items, ids, 0)


def suffix_starts(items: Sequence[Item], ids: Sequence[int], lo: int) -> list[int]:
    """Every start position >= lo where ``items`` match ids[start:] to the end, last first
    (linear: a wildcard matches from the last start of what follows it back to ``lo``)."""
    if not items:
        return [len(ids)]
    after = suffix_starts(items[1:], ids, lo)
    if items[0] == WILD:
        return list(range(after[0], lo - 1, -1)) if after else []
    n = len(items[0])
    return [q - n for q in after if q - n >= lo and tuple(ids[q - n : q]) == items[0]]


def _text(texts: dict[int, str], ids: Sequence[int]) -> str | None:
    parts = [texts.get(i) for i in ids]
    return None if None in parts else "".join(parts)  # type: ignore[arg-type]


def _start(
    lit: tuple[int, ...], texts: dict[int, str], block: Sequence[int], p: int, guess: bool
) -> tuple[int, str] | None:
    """(index of the first span token, template text it holds) when the literal ``lit`` of the
    template starts at block[p]; None where the ids cannot say.

    The tokens of ``lit`` match, or its end re-tokenised with the content: tokens whose text
    continues ``lit``'s are template; the next one holds the rest of ``lit`` and content
    (chat.py's straddling token). ``guess``: ``lit`` follows a wildcard, so at least one token
    must be template before a straddling one (else any token of the wildcard would do).
    """
    j = 0
    while j < len(lit) and p + j < len(block) and block[p + j] == lit[j]:
        j += 1
    if j == len(lit):
        return p + j, ""
    rest = _text(texts, lit[j:])
    if rest is None:
        return None
    k, pos = p + j, 0
    while k < len(block) and pos < len(rest) and rest.startswith(texts.get(block[k], "\0"), pos):
        pos, k = pos + len(texts[block[k]]), k + 1
    if (pos < len(rest) and k == len(block)) or (guess and k == p):
        return None
    return k, rest[pos:]


def _end(
    lit: tuple[int, ...], texts: dict[int, str], block: Sequence[int], e: int, a: int, guess: bool
) -> tuple[int, str] | None:
    """(end of the span, template text its last token holds) when ``lit`` ends at block[e]; the
    mirror of :func:`_start`, never before ``a``."""
    j = 0
    while j < len(lit) and e - j - 1 >= a and block[e - j - 1] == lit[-1 - j]:
        j += 1
    if j == len(lit):
        return e - j, ""
    rest = _text(texts, lit[: len(lit) - j])
    if rest is None:
        return None
    k, pos = e - j, len(rest)
    while k > a and pos > 0 and rest.endswith(texts.get(block[k - 1], "\0"), 0, pos):
        pos, k = pos - len(texts[block[k - 1]]), k - 1
    if (pos > 0 and k == a) or (guess and k == e):
        return None
    return k, rest[:pos]


def content_span(pattern: Pattern, block: Sequence[int], texts: dict[int, str]) -> Any:
    """(start, end) of the content in ``block`` under ``pattern`` (tokens that hold a character
    of it, as in ``encode_chat``), (0, 0) for an empty content, or None if it does not parse."""
    cut = pattern.index(CONTENT)
    pre, post = pattern[:cut], pattern[cut + 1 :]
    if pre and pre[-1] == WILD or post and post[0] == WILD:
        return None  # the content's edge is not in the ids
    heads = [(0, "")]
    if pre:
        guess = len(pre) > 1 and pre[-2] == WILD
        found = (_start(pre[-1], texts, block, p, guess) for p in prefix_ends(pre[:-1], block, 0))
        heads = [s for s in found if s is not None]
    for a, head in heads:
        tails: Any = [(len(block), "")]
        if post:
            guess = len(post) > 1 and post[1] == WILD
            at = suffix_starts(post[1:], block, a)
            tails = (_end(post[0], texts, block, e, a, guess) for e in at)
        for found in tails:
            if found is None or found[0] < a:
                continue
            b, tail_text = found
            middle = _text(texts, block[a:b])
            if a == b or (middle is not None and middle == head + tail_text):
                return 0, 0  # no character of the content: no span (encode_chat's rule)
            return a, b
    return None


def _far(lit: tuple[int, ...], texts: dict[int, str], backwards: bool) -> tuple[int, ...]:
    """``lit`` without its tokens within ``EDGE`` characters of the content (those a content
    may re-tokenise), ``backwards`` for a literal that ends at the content."""
    size, n = 0, 0
    for i in reversed(lit) if backwards else lit:
        t = texts.get(i)
        if t is None or (n and size + len(t) > EDGE):
            break
        size, n = size + len(t), n + 1
    return lit[: len(lit) - n] if backwards else lit[n:]


def claims(pattern: Pattern, block: Sequence[int], texts: dict[int, str]) -> bool:
    """``block`` starts or ends with ``pattern``'s outermost template text (away from the
    content): a block this pattern rendered, though it did not parse. A less specific pattern
    must not take it (Qwen's ``content`` would make a whole tools block span)."""
    cut = pattern.index(CONTENT)
    first, last = pattern[0], pattern[-1]
    if cut == 1 and first != WILD:
        first = _far(first, texts, True)  # type: ignore[arg-type]
    if cut == len(pattern) - 2 and last != WILD:
        last = _far(last, texts, False)  # type: ignore[arg-type]
    at_start = cut > 0 and isinstance(first, tuple) and first
    at_end = cut < len(pattern) - 1 and isinstance(last, tuple) and last
    return bool(
        (at_start and tuple(block[: len(first)]) == first)
        or (at_end and len(block) >= len(last) and tuple(block[len(block) - len(last) :]) == last)
    )


def edges(pattern: Pattern) -> tuple[Item, Item]:
    """The items just before and just after the content (``()`` where there is none)."""
    cut = pattern.index(CONTENT)
    return (pattern[cut - 1] if cut else ()), (pattern[cut + 1] if cut + 1 < len(pattern) else ())
