"""Rewrite the RuleWorld page's results (docs/ruleworld.md) from the result files in docs/ruleworld/.

    python scripts/ruleworld_readme.py                     # regenerate the page's results
    python scripts/ruleworld_readme.py --add RUN_DIR NAME  # record a demo run, then regenerate
    python scripts/ruleworld_readme.py --check             # exit 1 when the page is stale

Run it before committing: the page then cannot drift from the result files. The block between
the ``ruleworld-results`` markers is :func:`calyrex.ruleworld.readme.section`, with its image
paths made relative to the page (the renderer writes them from the repository root).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from calyrex.ruleworld.readme import BEGIN, END, record, section

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "ruleworld"
PAGE = ROOT / "docs" / "ruleworld.md"


def rewrite(text: str) -> str:
    """``text`` (the page) with its results block regenerated from ``DOCS``."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has no {BEGIN} … {END} markers")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    block = section(DOCS).replace("](docs/", "](")  # the page lives in docs/
    return text[:start] + block + text[end:]


def regenerate(check: bool = False) -> int:
    """Rewrite the page (or, with ``check``, return 1 if it is stale)."""
    old = PAGE.read_text(encoding="utf-8")
    new = rewrite(old)
    name = PAGE.relative_to(ROOT)
    if check:
        if new != old:
            print(f"{name} is stale: run python scripts/ruleworld_readme.py", file=sys.stderr)
        return int(new != old)
    PAGE.write_text(new, encoding="utf-8")
    print(f"{name} RuleWorld results rewritten" if new != old else f"{name} up to date")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add", nargs=2, metavar=("RUN_DIR", "NAME"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.add:
        print(f"recorded -> {record(Path(args.add[0]), DOCS, args.add[1])}")
    return regenerate(args.check)


if __name__ == "__main__":
    sys.exit(main())
