"""What the report adds around the main table: ``calyrex report``'s full table and plots in
``OUT/report/``, the mechanistic analysis's recommendation and the placement ablation."""

from __future__ import annotations

import json
from pathlib import Path


def standalone_report(out: Path, labels: list[str]) -> list[Path]:
    """``calyrex report --runs OUT/eval/LABEL… --baseline base --out OUT/report``; its plots."""
    from ...eval.report import report

    runs = [out / "eval" / label for label in labels]
    report(runs, out / "report", "base" if "base" in labels else None)
    return sorted((out / "report").glob("*.png"))


def extras(out: Path) -> list[str]:
    """Markdown lines: links to every metric and plot, the analysis and the ablation."""
    lines = ["", "![main table](report_main.png)", ""]
    lines.append("Every metric of every benchmark, with differences to base: `report/report.md`.")
    lines += [f"![{p.stem}](report/{p.name})" for p in sorted((out / "report").glob("*.png"))]
    analysis = out / "analyze" / "analysis.json"
    if analysis.is_file():
        from ...analysis.recommend import summary

        lines += [
            "",
            "## Mechanistic analysis (`analyze/`)",
            "",
            "```",
            summary(json.loads(analysis.read_text())),
            "```",
            "",
            "![analysis](analyze/analysis.png)",
        ]
    ablation = out / "ablate" / "ablation.md"
    if ablation.is_file():
        lines += ["", "## Placement ablation (`ablate/`)", "", ablation.read_text().rstrip()]
        lines += ["", "![ablation](ablate/ablation.png)"]
    return lines
