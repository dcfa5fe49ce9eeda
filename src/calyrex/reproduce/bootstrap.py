"""Per-item scores and bootstrap intervals over items, for the paper table's columns.

A column's value is the mean over its groups of the group means (one group for IFEval; one per
length for Long-IFEval; hijacking and extraction for TensorTrust), so the bootstrap resamples
items within each group (stratified). Differences between two models are paired: the same
resampled items for both. Per-item scores come from the benchmark's own ``score`` applied to
one item at a time, so they cannot drift from the recorded metrics. Judged benchmarks (SysBench,
MSJ) do not store per-item verdicts and lm-eval tasks keep no per-item rows here: no item
bootstrap for them (lm-eval's own standard errors are used instead, see :mod:`.table`).
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import numpy as np

Items = dict[str, tuple[str, float]]  # item id → (group, score)


def item_scores(suite: str, eval_dir: Path, patterns: list[str]) -> Items | None:
    """Each scored item's (group, value) for the column ``patterns``; None where not possible."""
    from ..eval.bench import Context, EvalConfig
    from ..eval.data import read_rows
    from ..eval.runner import make_benchmark

    bench = make_benchmark(suite)
    responses = eval_dir / f"{suite}.responses.jsonl"
    if bench.needs_judge or hasattr(bench, "run") or not responses.is_file():
        return None
    stored = json.loads((eval_dir / "run.json").read_text())["config"]
    ctx = Context(EvalConfig(**stored), eval_dir)
    items = bench.load(ctx.config.data.get(suite), ctx)
    rows = {bench.row_id(r): r for r in read_rows(responses)}
    out: Items = {}
    for item in items:
        item_id = str(item["id"] if "id" in item else item["key"])
        row = rows.get(item_id)
        if row is None or row.get("skipped"):
            continue
        metrics = bench.score([item], [row], ctx)["metrics"]
        for key in sorted(metrics):
            if any(fnmatch.fnmatchcase(key, p) for p in patterns) and metrics[key] is not None:
                out[item_id] = (key, float(metrics[key]))
                break
    return out


def statistic(groups: dict[str, np.ndarray]) -> float:
    return float(np.mean([v.mean() for v in groups.values()]))


def _grouped(items: Items) -> dict[str, np.ndarray]:
    groups: dict[str, list[float]] = {}
    for _, (group, value) in sorted(items.items()):  # sorted: the same resamples in every process
        groups.setdefault(group, []).append(value)
    return {g: np.asarray(v) for g, v in groups.items()}


def interval(
    items: Items, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the column statistic (items resampled within groups)."""
    groups = _grouped(items)
    if not groups:
        return None
    rng = np.random.default_rng(seed)
    stats = [
        statistic({g: v[rng.integers(0, len(v), len(v))] for g, v in groups.items()})
        for _ in range(resamples)
    ]
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(stats, [tail, 100 - tail])
    return float(lo), float(hi)


def paired(a: Items, b: Items) -> Items:
    """Per-item differences a − b on the items both models scored (the same groups)."""
    common = sorted(a.keys() & b.keys())
    return {k: (a[k][0], a[k][1] - b[k][1]) for k in common if a[k][0] == b[k][0]}
