"""The gap to LoRA: train CALYREX variants and parameter-matched LoRA on RuleWorld, evaluate.

    python scripts/ruleworld_study.py --out runs/study                 # every variant (an hour or more on 2 cores)
    python scripts/ruleworld_study.py --out runs/study --variants late8th lora
    python scripts/ruleworld_study.py --out runs/study --record        # also docs/ruleworld*
    python scripts/ruleworld_study.py --out runs/study --variants late8th-300steps lora-300steps \
        --train-seeds 0 1 2 --record-as study-seeds                    # the verdict over seeds

``--record`` copies ``OUT/study.json`` to ``docs/ruleworld/study.json``, draws
``docs/ablation-ruleworld.png`` from it and regenerates the results on the RuleWorld page
(``docs/ruleworld.md``, as ``scripts/ruleworld_readme.py`` does);
``--record-as NAME`` records it as ``docs/ruleworld/NAME.json`` (no plot). ``--train-seeds``
trains every variant once per seed (seed 0's adapters in ``OUT/NAME`` are reused).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from calyrex.research.ruleworld.study import VARIANTS, run_study
from calyrex.research.ruleworld.study_report import plot, render_study

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "ruleworld"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="ruleworld-study")
    parser.add_argument("--variants", nargs="+", choices=[v.name for v in VARIANTS])
    parser.add_argument("--quick", action="store_true", help="a CI-sized run (wiring only)")
    parser.add_argument("--train-seeds", nargs="+", type=int)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--record-as", metavar="NAME")
    args = parser.parse_args()
    entry = run_study(args.out, args.variants, args.quick, train_seeds=args.train_seeds)
    study = Path(args.out) / "study.json"
    print(render_study(study))
    if args.record or args.record_as:
        name = args.record_as or "study"
        shutil.copyfile(study, DOCS / f"{name}.json")
        if name == "study":
            plot(entry["results"]["methods"], ROOT / "docs" / "ablation-ruleworld.png")
        sys.path.insert(0, str(ROOT / "scripts"))
        from ruleworld_readme import regenerate  # the page's one writer

        regenerate()
        print(f"recorded -> {DOCS / f'{name}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
