"""Rates with their sample size and a 95 % interval, and bootstrap intervals over items.

A rate is ``{"rate": r, "n": n, "ci95": [lo, hi]}``. Proportions of independent examples get the
Wilson score interval (sound at 0 and 1 and for small ``n``); means over examples of a per-example
score get a percentile bootstrap over examples, seeded, so the same verdicts give the same
interval. Per-item scores (``Items``: item id → (group, score)) are resampled within their groups
(stratified); a column's statistic is the mean of its group means; differences between two models
are paired (the same resampled items for both). Used by RuleWorld, ``calyrex eval --cases``,
``calyrex reproduce`` and ``calyrex study``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

Rate = dict[str, Any]  # {"rate": float, "n": int, "ci95": [float, float]}
Items = dict[str, tuple[str, float]]  # item id → (group, score)
Z95 = 1.959964
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def _r(x: float) -> float:
    return round(x, 4)


def t_interval(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and 95 % Student-t half-width of a few values (seeds); half-width None for one."""
    k, m = len(values), sum(values) / len(values)
    if k < 2:
        return m, None
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (k - 1))
    return m, T95.get(k - 1, Z95) * sd / math.sqrt(k)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n`` (Wilson 1927)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def proportion(flags: Sequence[bool]) -> Rate:
    """The share of ``flags`` that are true, with its Wilson interval."""
    k, n = sum(map(bool, flags)), len(flags)
    lo, hi = wilson(k, n)
    return {"rate": _r(k / n) if n else math.nan, "n": n, "ci95": [_r(lo), _r(hi)]}


def mean(values: Sequence[float], resamples: int = 1000) -> Rate:
    """The mean of per-example ``values`` in [0, 1], with a bootstrap interval over examples."""
    n = len(values)
    if not n:
        return {"rate": math.nan, "n": 0, "ci95": [math.nan, math.nan]}
    items = {f"{i:06d}": ("all", float(v)) for i, v in enumerate(values)}
    lo, hi = interval(items, resamples=resamples) or (math.nan, math.nan)
    return {"rate": _r(sum(values) / n), "n": n, "ci95": [_r(lo), _r(hi)]}


def statistic(groups: dict[str, np.ndarray]) -> float:
    return float(np.mean([v.mean() for v in groups.values()]))


def column(items: Items) -> float:
    """The column statistic of per-item scores (the mean of its group means)."""
    return statistic(_grouped(items))


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


# RuleWorld's figures: a metric is ``{"rate": r, "n": n, "ci95": [lo, hi]}`` (a :data:`Rate`).
# Across training seeds (:func:`over_seeds`) the examples are shared: the interval is the wider
# of Student's t over the seeds' rates (how much the recipe varies with its seed) and the
# examples' own interval averaged over the seeds (how much the finite example set leaves open).


def yerr(entries: Sequence[Rate]) -> list[list[float]]:
    """matplotlib's ``yerr`` for rates: each rate's distance to its interval's two ends."""
    return [
        [e["rate"] - e["ci95"][0] for e in entries],
        [e["ci95"][1] - e["rate"] for e in entries],
    ]


def is_rate(value: Any) -> bool:
    return isinstance(value, dict) and "rate" in value and "ci95" in value


def value(entry: Any) -> Any:
    """The bare number(s) of a metric: ``rate`` of a :data:`Rate`, recursively through dicts."""
    if is_rate(entry):
        return entry["rate"]
    if isinstance(entry, dict):
        return {k: value(v) for k, v in entry.items()}
    return entry


def over_seeds(entries: Sequence[Any]) -> Any:
    """One metric across training seeds: mean rate, per-seed ``n``, t-interval, sd and rates."""
    first = entries[0]
    if isinstance(first, dict) and not is_rate(first):
        return {k: over_seeds([e[k] for e in entries]) for k in first}
    if not is_rate(first) or len(entries) == 1:
        return first
    rates = [e["rate"] for e in entries]
    k = len(rates)
    m, half = t_interval(rates)
    sd = math.sqrt(sum((r - m) ** 2 for r in rates) / (k - 1))
    # the wider of the seeds' t-interval and the examples' own (averaged over the seeds): with
    # few seeds that agree, the finite example set is still the larger uncertainty
    lo = min(m - half, sum(e["ci95"][0] for e in entries) / k)
    hi = max(m + half, sum(e["ci95"][1] for e in entries) / k)
    return {
        "rate": round(m, 4),
        "n": first["n"],
        "ci95": [round(max(0.0, lo), 4), round(min(1.0, hi), 4)],
        "sd": round(sd, 4),
        "seeds": rates,
    }


def separated(a: dict, b: dict) -> int:
    """+1 when ``a``'s 95 % interval lies wholly above ``b``'s, -1 below, 0 when they overlap."""
    if a["ci95"][0] > b["ci95"][1]:
        return 1
    return -1 if a["ci95"][1] < b["ci95"][0] else 0
