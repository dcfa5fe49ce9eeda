"""Rewrite the README's RuleWorld results from the committed result files in docs/ruleworld/.

    python scripts/ruleworld_readme.py                     # regenerate the README section
    python scripts/ruleworld_readme.py --add RUN_DIR NAME  # record a demo run, then regenerate
    python scripts/ruleworld_readme.py --check             # exit 1 when the README is stale

Run it before committing: the README then cannot drift from the result files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from calyrex.ruleworld.readme import record, rewrite

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "ruleworld"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add", nargs=2, metavar=("RUN_DIR", "NAME"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.add:
        print(f"recorded -> {record(Path(args.add[0]), DOCS, args.add[1])}")
    readme = ROOT / "README.md"
    old = readme.read_text()
    new = rewrite(old, DOCS)
    if args.check:
        if new != old:
            print("README.md is stale: run python scripts/ruleworld_readme.py", file=sys.stderr)
        return int(new != old)
    readme.write_text(new)
    print("README.md RuleWorld results rewritten" if new != old else "README.md up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
