"""Per-item scores of an evaluated benchmark: its own ``score`` applied to one unit at a time
(an item, or the items scored together: :meth:`calyrex.eval.bench.Benchmark.unit`).

So they cannot drift from the recorded metrics. Judged benchmarks (SysBench, MSJ) do not store
per-item verdicts: ``None`` for them. lm-eval tasks: the per-document scores lm-eval logged
(``log_samples``), where the run kept them.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

from .intervals import Items


def harness_items(samples: Path, patterns: list[str]) -> Items:
    """Per-document scores lm-eval logged (``TASK.samples.jsonl``): one group, so the column's
    statistic is the plain mean over documents (lm-eval's micro average for a group such as
    ``mmlu_local``)."""
    from .data import read_rows

    out: Items = {}
    for row in read_rows(samples):
        key = next(
            (k for k in sorted(row) if any(fnmatch.fnmatchcase(k, p) for p in patterns)), None
        )
        if key is not None:
            out[f"{row['task']}:{row['doc_id']}"] = ("all", float(row[key]))
    return out


def item_scores(suite: str, eval_dir: Path, patterns: list[str]) -> Items | None:
    """Each scored item's (group, value) for the column ``patterns``; None where not possible."""
    from .bench import Context, EvalConfig, item_id
    from .data import read_rows, replies_file
    from .runner import make_benchmark

    bench = make_benchmark(suite)
    samples = eval_dir / f"{suite}.samples.jsonl"
    if hasattr(bench, "run") and samples.is_file():  # lm-eval's per-document results
        return harness_items(samples, patterns)
    responses = replies_file(eval_dir, suite)
    if bench.needs_judge or hasattr(bench, "run") or not responses.is_file():
        return None
    stored = json.loads((eval_dir / "run.json").read_text())["config"]
    ctx = Context(EvalConfig(**stored), eval_dir)
    items = bench.load(ctx.config.data.get(suite), ctx)
    rows = {bench.row_id(r): r for r in read_rows(responses)}
    units: dict[str, list] = {}
    for item in items:  # a unit's items are scored together (Benchmark.unit)
        units.setdefault(bench.unit(item), []).append(item)
    out: Items = {}
    for unit, members in units.items():
        got = [rows[i] for i in map(item_id, members) if i in rows and not rows[i].get("skipped")]
        if not got:
            continue
        metrics = bench.score(members, got, ctx)["metrics"]
        for key in sorted(metrics):
            if any(fnmatch.fnmatchcase(key, p) for p in patterns) and metrics[key] is not None:
                out[unit] = (key, float(metrics[key]))
                break
    return out
