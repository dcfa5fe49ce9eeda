"""RuleWorld's figures as rates (:mod:`calyrex.intervals`): plotting, seeds, separation.

A metric is ``{"rate": r, "n": n, "ci95": [lo, hi]}`` (Wilson over examples, or a bootstrap over
sessions for multi-turn adherence: :func:`calyrex.intervals.proportion` / ``mean``). Across
training seeds (:func:`over_seeds`) the examples are shared: the interval is the wider of
Student's t over the seeds' rates (how much the recipe varies with its seed) and the examples'
own interval averaged over the seeds (how much the finite example set leaves open).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..intervals import Rate, mean, proportion, t_interval, wilson

__all__ = [  # the rates themselves are calyrex.intervals'; RuleWorld's modules read them here
    "Rate",
    "mean",
    "proportion",
    "wilson",
    "yerr",
    "is_rate",
    "value",
    "over_seeds",
    "separated",
]


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
