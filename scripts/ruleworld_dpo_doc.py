"""Write the RuleWorld SFT → DPO block of docs/dpo.md and its verdict in README.md from
``results/ruleworld-dpo/dpo-study.json`` (``--check``: exit 1 when a page is stale)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from calyrex.ruleworld.dpo_report import markdown, verdict

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "results" / "ruleworld-dpo" / "dpo-study.json"
SOURCE = (
    "`calyrex ruleworld-dpo --out results/ruleworld-dpo` (`results/ruleworld-dpo/dpo-study.json`)"
)


def blocks(result: dict) -> dict[tuple[Path, str], list[str]]:
    said = verdict(result) if result.get("seeds") else "The RuleWorld DPO study has no seed yet."
    return {
        (ROOT / "docs" / "dpo.md", "ruleworld-dpo"): [f"{SOURCE}:", "", *markdown(result)],
        (ROOT / "README.md", "dpo-verdict"): [said, "Details: [docs/dpo.md](docs/dpo.md)."],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if not RESULT.is_file():
        print(f"left alone: {RESULT} missing", file=sys.stderr)
        return 0
    stale = []
    for (page, name), lines in blocks(json.loads(RESULT.read_text())).items():
        begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
        text = page.read_text(encoding="utf-8")
        if begin not in text or end not in text:
            print(f"{page.relative_to(ROOT)} has no {begin} … {end} markers", file=sys.stderr)
            return 1
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        new = head + "\n".join([begin, *lines, end]) + tail
        if new != text:
            stale.append(str(page.relative_to(ROOT)))
            if not args.check:
                page.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(
            f"stale: {', '.join(stale)}: run python scripts/ruleworld_dpo_doc.py", file=sys.stderr
        )
    return int(args.check and bool(stale))


if __name__ == "__main__":
    sys.exit(main())
