"""``OUT/report.md``, ``OUT/report.json`` and ``OUT/report_main.png`` from the built table."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .config import ReproduceConfig
from .table import COLUMNS, ROWS, Cell


def _pct(value: float, signed: bool = False) -> str:
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def cell_text(cell: Cell, signed: bool = False) -> str:
    if cell.value is None:
        return cell.status  # the reason is listed under the table
    text = _pct(cell.value, signed)
    if cell.interval:
        text += f" [{_pct(cell.interval[0], signed)}, {_pct(cell.interval[1], signed)}]"
    return text


def _header(first: str) -> list[str]:
    arrows = {t: "↑" if c.higher_is_better else "↓" for t, c in COLUMNS.items()}
    return [
        f"| {first} | " + " | ".join(f"{t} {arrows[t]}" for t in COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]


def _reasons(built: dict[str, Any]) -> list[str]:
    """One line per (column, reason) of cells without a value, naming the models."""
    reasons: dict[tuple[str, str, str], list[str]] = {}
    for label, cells in built["rows"].items():
        for title, cell in cells.items():
            if cell.value is None:
                key = (title, cell.status, cell.reason)
                reasons.setdefault(key, []).append(ROWS.get(label, label))
    lines = [
        f"- {t}: {s} for {', '.join(m)}" + (f" — {r}" if r else "")
        for (t, s, r), m in reasons.items()
    ]
    return ["", *lines] if lines else []


def markdown(cfg: ReproduceConfig, built: dict[str, Any], extras: list[str]) -> str:
    lines = [f"# CALYREX reproduction: {cfg.name} (`{cfg.model}`)", ""]
    lines += ["Percent; 95 % intervals in brackets (see the notes).", ""]
    lines += _header("model")
    for label, cells in built["rows"].items():
        lines.append(
            f"| {ROWS.get(label, label)} | "
            + " | ".join(cell_text(c) for c in cells.values())
            + " |"
        )
    lines += _reasons(built)
    if built["deltas"]:
        lines += ["", "**CALYREX − baseline** (points; the paper's difference in parentheses)", ""]
        lines += _header("CALYREX vs")
        for baseline, cells in built["deltas"].items():
            paper = cfg.report.paper.get(baseline, {})
            texts = [
                cell_text(c, signed=True) + (f" (paper {paper[t]:+.1f})" if t in paper else "")
                for t, c in cells.items()
            ]
            lines.append(f"| {ROWS.get(baseline, baseline)} | " + " | ".join(texts) + " |")
    lines += ["", "Columns:"]
    lengths = ", ".join(cfg.report.long_ifeval_lengths)
    for title, column in COLUMNS.items():
        meaning = column.meaning + (f" at {lengths}" if column.suite == "long_ifeval" else "")
        lines.append(f"- {title}: `{column.suite}`, {meaning}")
    lines += [
        "",
        "Intervals: stratified bootstrap over items (paired for differences, "
        f"{cfg.report.bootstrap} resamples) for rule-checked benchmarks; ±1.96 × lm-eval's "
        "standard error for lm-eval tasks; none for judged benchmarks (SysBench, MSJ), whose "
        "per-item verdicts are not stored.",
    ]
    return "\n".join(lines + extras) + "\n"


def _jsonable(cell: Cell) -> dict[str, Any]:
    out = dataclasses.asdict(cell)
    out.pop("items")
    return out


def to_json(cfg: ReproduceConfig, built: dict[str, Any], inputs: str) -> dict[str, Any]:
    return {
        "name": cfg.name,
        "model": cfg.model,
        "columns": {t: dataclasses.asdict(c) for t, c in COLUMNS.items()},
        "rows": {lb: {t: _jsonable(c) for t, c in r.items()} for lb, r in built["rows"].items()},
        "deltas": {
            b: {
                t: {**_jsonable(c), "paper": cfg.report.paper.get(b, {}).get(t)}
                for t, c in r.items()
            }
            for b, r in built["deltas"].items()
        },
        "inputs": inputs,
    }


def plot(built: dict[str, Any], path: Path) -> Path:
    """Grouped bars: one group per column, one bar per model, intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(built["rows"])
    fig, ax = plt.subplots(figsize=(11, 3.8))
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        cells = list(built["rows"][label].values())
        xs = [j + (i - (len(labels) - 1) / 2) * width for j in range(len(cells))]
        ys = [100 * (c.value or 0.0) for c in cells]
        err = [
            [100 * (c.value - c.interval[0]) if c.interval else 0.0 for c in cells],
            [100 * (c.interval[1] - c.value) if c.interval else 0.0 for c in cells],
        ]
        ax.bar(xs, ys, width, yerr=err, capsize=2, label=ROWS.get(label, label))
    ax.set_xticks(range(len(COLUMNS)), list(COLUMNS), rotation=20)
    ax.set_ylabel("%")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(
    out: Path, cfg: ReproduceConfig, built: dict[str, Any], extras: list[str], inputs: str
) -> str:
    text = markdown(cfg, built, extras)
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "report.json").write_text(json.dumps(to_json(cfg, built, inputs), indent=2) + "\n")
    plot(built, out / "report_main.png")
    return text
