"""``calyrex report``: several runs side by side, deltas against a baseline run, and plots.

A run is a ``calyrex eval`` output directory (``summary.json`` plus ``NAME.json`` per
benchmark). Rows are benchmark metrics, columns are runs (their labels); with a baseline,
each other column also shows its difference to the baseline. Benchmarks that record curves
(``"curves"`` in ``NAME.json``: MSJ success vs shots, Long-IFEval accuracy vs length, SysBench
adherence per turn) get one plot each, all runs overlaid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_run(directory: Path) -> tuple[str, dict[str, dict[str, Any]]]:
    """(label, {benchmark: record}) of one run directory."""
    summary_file = directory / "summary.json"
    if not summary_file.is_file():
        raise FileNotFoundError(f"{directory} is not a calyrex eval run (no summary.json)")
    summary = json.loads(summary_file.read_text())
    records = {}
    for name in summary["suites"]:
        file = directory / f"{name}.json"
        records[name] = json.loads(file.read_text()) if file.is_file() else {"status": "missing"}
    return summary.get("label") or directory.name, records


def _cell(value: float | None, base: float | None) -> str:
    if value is None:
        return "–"
    if base is None:
        return f"{value:.4f}"
    return f"{value:.4f} ({value - base:+.4f})"


def table(runs: list[tuple[str, dict[str, dict[str, Any]]]], baseline: str | None) -> str:
    """The markdown table: one row per (benchmark, metric), one column per run."""
    from .runner import headline

    labels = [label for label, _ in runs]
    if baseline is not None and baseline not in labels:
        raise ValueError(f"baseline {baseline!r} is not one of the runs {labels}")
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for label, records in runs:
        for bench, record in records.items():
            for metric, value in headline(record).items():
                rows.setdefault((bench, metric), {})[label] = value
    head = "| benchmark | metric | " + " | ".join(labels) + " |"
    lines = [head, "|" + "---|" * (len(labels) + 2)]
    for (bench, metric), values in rows.items():
        base = values.get(baseline) if baseline else None
        cells = [_cell(values.get(label), None if label == baseline else base) for label in labels]
        lines.append(f"| {bench} | {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plots(runs: list[tuple[str, dict[str, dict[str, Any]]]], out: Path) -> list[Path]:
    """One PNG per recorded curve, every run that has it overlaid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for label, records in runs:
        for record in records.values():
            for name, curve in (record.get("curves") or {}).items():
                curves.setdefault(name, []).append((label, curve))
    files = []
    for name, series in curves.items():
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for label, curve in series:
            ax.plot(curve["x"], curve["y"], marker="o", label=label)
        first = series[0][1]
        ax.set_xlabel(first.get("xlabel", "")), ax.set_ylabel(first.get("ylabel", ""))
        if first.get("xscale"):
            ax.set_xscale(first["xscale"], base=2)
        ax.set_title(name), ax.legend(), fig.tight_layout()
        files.append(out / f"{name}.png")
        fig.savefig(files[-1], dpi=120)
        plt.close(fig)
    return files


def report(run_dirs: list[Path], out: Path, baseline: str | None = None) -> str:
    """Write ``out/report.md`` (table + plot links) and the plots; return the markdown."""
    runs = [load_run(d) for d in run_dirs]
    out.mkdir(parents=True, exist_ok=True)
    text = table(runs, baseline)
    figures = plots(runs, out)
    if figures:
        text += "\n\n" + "\n".join(f"![{f.stem}]({f.name})" for f in figures)
    (out / "report.md").write_text(text + "\n", encoding="utf-8")
    return text
