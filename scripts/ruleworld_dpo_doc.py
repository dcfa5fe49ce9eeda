"""Write the RuleWorld SFT → DPO block of docs/dpo.md and its verdict in README.md from
``results/ruleworld-dpo/dpo-study.json`` (``--check``: exit 1 when a page is stale)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from doc_blocks import rewrite

from calyrex.research.ruleworld.dpo_report import markdown, verdict

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "results" / "ruleworld-dpo" / "dpo-study.json"
SOURCE = (
    "`calyrex ruleworld-dpo --out results/ruleworld-dpo` (`results/ruleworld-dpo/dpo-study.json`)"
)


def blocks_of(result: dict) -> dict[tuple[Path, str], list[str]]:
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
    blocks = {
        (page, name): "\n".join([f"<!-- BEGIN {name} -->", *lines, f"<!-- END {name} -->"])
        for (page, name), lines in blocks_of(json.loads(RESULT.read_text())).items()
    }
    return rewrite(blocks, ROOT, args.check, "python scripts/ruleworld_dpo_doc.py")


if __name__ == "__main__":
    sys.exit(main())
