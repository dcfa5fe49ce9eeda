"""Rewrite generated blocks between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` markers.

Shared by the scripts that write result tables into the README and the docs pages.
"""

from __future__ import annotations

import sys
from pathlib import Path


def rewrite(blocks: dict[tuple[Path, str], str], root: Path, check: bool, command: str) -> int:
    """Put each block (its markers included) in place of the page's ``name`` block; ``check``:
    change nothing, exit status 1 when a page is stale. A page without the markers is an error."""
    stale = []
    for (page, name), block in blocks.items():
        begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
        text = page.read_text(encoding="utf-8")
        if begin not in text or end not in text:
            print(f"{page.relative_to(root)} has no {begin} … {end} markers", file=sys.stderr)
            return 1
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        new = head + block + tail
        if new != text:
            stale.append(str(page.relative_to(root)))
            if not check:
                page.write_text(new, encoding="utf-8")
    if check and stale:
        pages = dict.fromkeys(stale)  # once each: a page may hold several blocks
        print(f"stale: {', '.join(pages)}: run {command}", file=sys.stderr)
    return int(check and bool(stale))
