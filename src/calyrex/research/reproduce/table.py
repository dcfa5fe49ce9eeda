"""The paper's main table from ``OUT/eval/LABEL/``: rows base, LoRA, ParallelMLP, CALYREX; one
column per benchmark; CALYREX's difference to each baseline beside the paper's where it gives one.

Values are percentages. Intervals (95 %): a stratified bootstrap over items for rule-checked
benchmarks (:mod:`calyrex.eval.intervals`, paired for differences); ±1.96 standard errors as lm-eval
reports them for MMLU / GSM8K / SQuAD (independent for differences); none for judged
benchmarks, whose per-item verdicts are not stored.
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...eval.intervals import Items, interval, paired
from ...eval.items import item_scores
from .config import ReportSpec


@dataclass(frozen=True)
class Column:
    suite: str
    metrics: tuple[str, ...]  # patterns; the value is the mean of the matching metrics
    higher_is_better: bool = True
    meaning: str = ""


# the paper's column order; a column is one line
COLUMNS: dict[str, Column] = {
    "IFEval": Column("ifeval", ("prompt_level_strict_acc",), True, "prompt-level strict accuracy"),
    "SysBench": Column("sysbench", ("SSR",), True, "session stability rate (multi-turn)"),
    "MSJ ASR": Column("msj", ("asr@*",), False, "attack success, mean over shot counts"),
    "Long-IFEval": Column("long_ifeval", ("prompt_level_strict_acc@{L}",), True, "strict acc."),
    "TensorTrust": Column("tensortrust", ("HRR", "ERR"), True, "mean of HRR and ERR"),
    "Glaive FC": Column("glaive_fc", ("args_exact_match",), True, "call and arguments exact"),
    "MMLU": Column("mmlu", ("acc",), True, "lm-eval acc"),
    "GSM8K": Column("gsm8k", ("exact_match,strict-match",), True, "lm-eval strict match"),
    "SQuAD": Column("squadv2", ("f1",), True, "lm-eval SQuAD v2 F1"),
}
ROWS: dict[str, str] = {
    "base": "base",
    "lora": "LoRA",
    "parallel_mlp": "ParallelMLP",
    "calyrex": "CALYREX",
}


def patterns(column: Column, spec: ReportSpec) -> list[str]:
    out = []
    for p in column.metrics:
        out += [p.format(L=n) for n in spec.long_ifeval_lengths] if "{L}" in p else [p]
    return out


def _stderr_key(metric: str) -> str:
    name, sep, rest = metric.partition(",")
    return f"{name}_stderr{sep}{rest}"


@dataclass
class Cell:
    value: float | None = None  # a fraction (0–1)
    interval: tuple[float, float] | None = None
    stderr: float | None = None  # lm-eval's, for harness columns
    items: Items | None = None
    status: str = "ok"  # ok | skipped | missing | not run
    reason: str = ""


def read_cell(eval_dir: Path, column: Column, spec: ReportSpec, not_run: dict[str, str]) -> Cell:
    """One model's value of one column, with its interval and why it is missing if it is."""
    if column.suite in not_run:
        return Cell(status="not run", reason=not_run[column.suite])
    file = eval_dir / f"{column.suite}.json"
    if not file.is_file():
        return Cell(status="missing", reason=f"no {file}")
    record = json.loads(file.read_text())
    if record.get("status") != "ok":
        return Cell(status=record.get("status", "missing"), reason=record.get("reason", ""))
    metrics = record.get("metrics") or {}
    wanted = patterns(column, spec)
    keys = [k for k in metrics if any(fnmatch.fnmatchcase(k, p) for p in wanted)]
    values = [metrics[k] for k in keys if isinstance(metrics[k], int | float)]
    if not values:
        return Cell(status="missing", reason=f"none of {wanted} was scored")
    cell = Cell(value=sum(values) / len(values))
    errors = [metrics.get(_stderr_key(k)) for k in keys]
    if len(keys) == 1 and isinstance(errors[0], int | float):
        cell.stderr = float(errors[0])
        cell.interval = (cell.value - 1.96 * cell.stderr, cell.value + 1.96 * cell.stderr)
    else:
        cell.items = item_scores(column.suite, eval_dir, wanted)
        if cell.items:
            cell.interval = interval(cell.items, spec.bootstrap, spec.seed)
    return cell


def delta(a: Cell, b: Cell, spec: ReportSpec) -> Cell:
    """a − b, with a paired bootstrap (item columns) or independent normal interval (lm-eval)."""
    if a.value is None or b.value is None:
        status = a.status if a.value is None else b.status
        return Cell(status=status)
    out = Cell(value=a.value - b.value)
    if a.items and b.items:
        out.interval = interval(paired(a.items, b.items), spec.bootstrap, spec.seed)
    elif a.stderr is not None and b.stderr is not None:
        half = 1.96 * math.hypot(a.stderr, b.stderr)
        out.interval = (out.value - half, out.value + half)
    return out


def build(
    eval_root: Path, labels: list[str], spec: ReportSpec, not_run: dict[str, str]
) -> dict[str, Any]:
    """``{"rows": {label: {column: Cell}}, "deltas": {baseline: {column: Cell}}}``."""
    rows = {
        label: {t: read_cell(eval_root / label, c, spec, not_run) for t, c in COLUMNS.items()}
        for label in labels
    }
    deltas = {}
    if "calyrex" in rows:
        for baseline in (lb for lb in labels if lb != "calyrex"):
            deltas[baseline] = {
                t: delta(rows["calyrex"][t], rows[baseline][t], spec) for t in COLUMNS
            }
    return {"rows": rows, "deltas": deltas}
