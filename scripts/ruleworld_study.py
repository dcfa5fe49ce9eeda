"""The gap to LoRA: train CALYREX variants and parameter-matched LoRA on RuleWorld, evaluate.

    python scripts/ruleworld_study.py --out runs/study                 # every variant (an hour or more on 2 cores)
    python scripts/ruleworld_study.py --out runs/study --variants late8th lora
    python scripts/ruleworld_study.py --out runs/study --record        # also docs/ + README

``--record`` copies ``OUT/study.json`` to ``docs/ruleworld/study.json``, draws
``docs/ablation-ruleworld.png`` from it and regenerates the README's RuleWorld section.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from calyrex.ruleworld.readme import rewrite
from calyrex.ruleworld.study import VARIANTS, run_study
from calyrex.ruleworld.study_report import plot, render_study

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "ruleworld"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="ruleworld-study")
    parser.add_argument("--variants", nargs="+", choices=[v.name for v in VARIANTS])
    parser.add_argument("--quick", action="store_true", help="a CI-sized run (wiring only)")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    entry = run_study(args.out, args.variants, args.quick)
    study = Path(args.out) / "study.json"
    print(render_study(study))
    if args.record:
        shutil.copyfile(study, DOCS / "study.json")
        plot(entry["results"]["methods"], ROOT / "docs" / "ablation-ruleworld.png")
        readme = ROOT / "README.md"
        readme.write_text(rewrite(readme.read_text(), DOCS))
        print(f"recorded -> {DOCS / 'study.json'}, docs/ablation-ruleworld.png, README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
