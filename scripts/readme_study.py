"""Rewrite the real-model study's results block in the README and the study page.

    python scripts/readme_study.py            # rewrite docs/study.md (and README.md) between the markers
    python scripts/readme_study.py --check    # exit 1 if either is not what the files give

Source: ``results/study-real-smollm2/report.json`` (written by ``calyrex study real``) and the
mixes' ``data/*.stats.json``. Nothing is retyped: the tables are :mod:`calyrex.research.study.markdown`'s
rendering of that file; docs/study.md holds every study's full block, the README the trained
study's short one. A missing report leaves the pages alone; a page without the markers is an
error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from doc_blocks import rewrite

from calyrex.research.study.config import FULL, V1, StudyConfig
from calyrex.research.study.markdown import (
    change_tables,
    claims,
    compute_words,
    differences_table,
    dpo_rewards,
    dpo_table,
    dpo_verdict,
    results_table,
    rewards_by_tag_table,
    rewards_by_tag_words,
    sweep_table,
    trained_again_lines,
    training_table,
    verdict_counts,
)

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "results" / "study-real-smollm2" / "report.json"
# the powered evaluation (issue 37), its own block under the first study's
REPORT_V2 = ROOT / "results" / "study-real-smollm2-v2" / "report.json"
REPORTS = {"study-real": REPORT, "study-real-v2": REPORT_V2}
CONFIGS: dict[str, StudyConfig] = {"study-real": V1, "study-real-v2": FULL}
STUDY_PAGE = ROOT / "docs" / "study.md"  # every block, in full
# the README carries the trained study's short block; the first (superseded) study's is in docs only
PAGES = {"study-real": [STUDY_PAGE], "study-real-v2": [ROOT / "README.md", STUDY_PAGE]}
LABELS = ["base", "calyrex-late8th", "calyrex-analyze", "lora", "parallel_mlp", "lora-equal-time"]
LABELS += ["calyrex-equal-time", "calyrex-fewer-granted", "lora-fewer-granted"]
LABELS += ["calyrex-dpo", "lora-dpo", "parallel_mlp-dpo", "calyrex-rpo", "lora-rpo"]


def _filled(lines: list[str]) -> list[str]:
    """A table with rows, followed by a blank line; nothing for a header alone."""
    return [*lines, ""] if len(lines) > 2 else []


def _paragraph(lines: list[str]) -> list[str]:
    """Lines followed by a blank line; nothing for none."""
    return [*lines, ""] if lines else []


def mix_line(marker: str) -> str:
    """The training mixes' recipe and counts, from the stats ``calyrex mix`` wrote beside them."""
    said = []
    data = REPORTS[marker].parent / "data"
    for kind in ("sft", "preference"):
        file = data / f"{kind}.stats.json"
        if not file.is_file():
            continue
        stats = json.loads(file.read_text())
        parts = []
        for part, n in stats["counts"].items():
            tags = stats["tags"].get(part, {})
            detail = (
                f"{len(tags)} kinds"
                if len(tags) > 5
                else ", ".join(f"{t} {k:,}" for t, k in tags.items())
            )
            parts.append(f"{part} {n:,}" + (f" ({detail})" if detail else ""))
        sources = ", ".join(f"{src} {n:,}" for src, n in stats["sources"].items())
        held = stats.get("validation", {}).get("rows")
        split = f" (+ {held:,} held out for validation)" if held else ""
        said.append(f"{kind} {stats['rows']:,} rows{split}: {'; '.join(parts)} — from {sources}")
    arms = CONFIGS[marker].arms
    for access, name in sorted({(a.access, a.data) for a in arms if a.access is not None}):
        changed = (data / name).with_suffix(".stats.json")
        if said and changed.is_file():  # a change's mix: the same but for its access dialogues
            tags = json.loads(changed.read_text())["tags"]["access"]
            said.append(
                f"The change's mix `--access {access}` differs only in access ("
                + ", ".join(f"{t} {k:,}" for t, k in tags.items())
                + ")"
            )
    if not said:
        return ""
    return f"Training mixes (`calyrex mix`, seed 0, counts from `data/*.stats.json`): {'. '.join(said)}."


def block(report: dict, full: bool, marker: str = "study-real") -> str:
    """The results block: ``full`` (docs/study.md) adds the difference, change, DPO and
    training tables to what the README shows (the table, the verdicts and the claims in words)."""
    runs = report.get("runs_evaluated", [])
    done = [r for r in runs if r != "base"]
    state = (
        "" if done else " The study is in progress: only the base model's finished suites are in."
    )
    counts, said, change = verdict_counts(report), claims(report), change_tables(report)
    dpo = [line for line in [dpo_verdict(report)] if line]
    if full:
        details = [
            *_filled(differences_table(report)),
            *_paragraph(counts),
            *_paragraph(said),
            *change,
            *_filled(dpo_table(report)),
            *_paragraph(dpo),
            *_filled(training_table(report)),
            *sweep_table(report),
            *dpo_rewards(report),
            *rewards_by_tag_table(report),
            *trained_again_lines(report),
        ]
    else:  # the README: no per-metric tables (they are in docs/study.md), their verdicts in words
        details = [
            *_paragraph(counts),
            *_paragraph(said),
            *_paragraph([line for line in change if line.startswith("- ")]),
            *_paragraph(dpo),
            *_paragraph(rewards_by_tag_words(report)),
            "Per-metric differences, the changes, DPO and training tables: "
            "[docs/study.md](docs/study.md#results).",
            "",
        ]
    mix = mix_line(marker)
    source = REPORTS[marker]
    return "\n".join(
        [
            f"<!-- BEGIN {marker} -->",
            f"Generated by `scripts/readme_study.py` from `{source.relative_to(ROOT)}`; "
            f"{compute_words(report)}; runs evaluated: {', '.join(runs)}; other "
            f"placement (`calyrex-analyze`): {report.get('placement')}.{state}",
            "",
            *_paragraph([mix] if mix else []),
            *_filled(results_table(report, LABELS)),
            *details,
            f"<!-- END {marker} -->",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    blocks = {}
    for marker, source in REPORTS.items():
        if not source.is_file():
            print(f"left alone: {source} missing", file=sys.stderr)
            continue
        report = json.loads(source.read_text())
        for page in PAGES[marker]:
            blocks[(page, marker)] = block(report, page == STUDY_PAGE, marker)
    if not blocks:
        return 0
    return rewrite(blocks, ROOT, args.check, "python scripts/readme_study.py")


if __name__ == "__main__":
    sys.exit(main())
