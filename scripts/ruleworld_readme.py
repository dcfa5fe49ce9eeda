"""Rewrite the RuleWorld page's results (docs/ruleworld.md) from the result files in docs/ruleworld/.

    python scripts/ruleworld_readme.py                     # regenerate the page's results
    python scripts/ruleworld_readme.py --add RUN_DIR NAME  # record a demo run, then regenerate
    python scripts/ruleworld_readme.py --check             # exit 1 when the page is stale

Run it before committing: the page then cannot drift from the result files. The block between
the ``ruleworld-results`` markers is :func:`calyrex.research.ruleworld.readme.section`, with its image
paths made relative to the page (the renderer writes them from the repository root).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from doc_blocks import rewrite

from calyrex.research.ruleworld.readme import BEGIN, record, section

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "ruleworld"
PAGE = ROOT / "docs" / "ruleworld.md"
NAME = BEGIN.removeprefix("<!-- BEGIN ").removesuffix(" -->")  # the block section() writes


def regenerate(check: bool = False) -> int:
    """Rewrite the page (or, with ``check``, return 1 if it is stale)."""
    old = PAGE.read_text(encoding="utf-8")
    block = section(DOCS).replace("](docs/", "](")  # the page lives in docs/
    status = rewrite({(PAGE, NAME): block}, ROOT, check, "python scripts/ruleworld_readme.py")
    if not check and not status:
        changed = PAGE.read_text(encoding="utf-8") != old
        name = PAGE.relative_to(ROOT)
        print(f"{name} RuleWorld results rewritten" if changed else f"{name} up to date")
    return status


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
