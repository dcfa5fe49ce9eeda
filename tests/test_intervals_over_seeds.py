"""Rates with intervals (issue 14), and the RuleWorld page's results generated from files."""

from pathlib import Path

import pytest

from calyrex.eval.intervals import (
    column,
    interval,
    mean,
    over_seeds,
    paired,
    proportion,
    t_interval,
    value,
    wilson,
)
from calyrex.research.ruleworld.readme import claims, separated

ROOT = Path(__file__).resolve().parent.parent


def test_wilson_matches_known_values_and_stays_in_0_1():
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    entry = proportion([True, False, False, True])
    assert entry == {"rate": 0.5, "n": 4, "ci95": [0.15, 0.85]}


def test_bootstrap_mean_is_seeded_and_brackets_the_mean():
    values = [0.0, 0.25, 0.5, 1.0, 1.0, 0.75, 0.5, 0.0]
    a, b = mean(values), mean(values)
    assert a == b and a["n"] == 8 and a["ci95"][0] < a["rate"] < a["ci95"][1]


def test_item_statistics_in_closed_form():
    # a column is the mean of its groups' means, not of the pooled items
    assert column({"a": ("g1", 1.0), "b": ("g2", 0.0), "c": ("g2", 0.0), "d": ("g2", 0.0)}) == 0.5
    # paired differences: a − b item by item, on the items both scored
    a, b = {"x": ("g", 1.0), "y": ("g", 0.5)}, {"x": ("g", 0.25), "z": ("g", 0.0)}
    assert paired(a, b) == {"x": ("g", 0.75)}
    # Student's t over seeds: sd over k − 1, t at k − 1 degrees of freedom (12.706 for 2 seeds)
    m, half = t_interval([0.0, 1.0])
    assert m == 0.5 and half == pytest.approx(12.706 * 0.5**0.5 / 2**0.5)
    # the bootstrap's 95 % interval of a 0/1 mean is about the normal one (p = 0.5, n = 400)
    lo, hi = interval({f"{i:03d}": ("all", float(i % 2)) for i in range(400)}, resamples=2000)
    assert hi - lo == pytest.approx(2 * 1.959964 * (0.25 / 400) ** 0.5, rel=0.1)


def test_over_seeds_gives_mean_spread_and_t_interval():
    def run(k):
        return {"x": proportion([True] * k + [False] * (10 - k)), "by": {"1": proportion([True])}}

    runs = [run(k) for k in (4, 5, 6)]
    merged = over_seeds(runs)
    assert merged["x"]["rate"] == 0.5 and merged["x"]["n"] == 10 and merged["x"]["sd"] == 0.1
    assert merged["x"]["seeds"] == [0.4, 0.5, 0.6]
    half = 4.303 * 0.1 / 3**0.5  # Student's t, 2 degrees of freedom
    examples = [sum(r["x"]["ci95"][i] for r in runs) / 3 for i in (0, 1)]
    expected = [min(0.5 - half, examples[0]), max(0.5 + half, examples[1])]
    assert merged["x"]["ci95"] == pytest.approx(expected, abs=1e-4)
    wide = over_seeds(
        [{"x": proportion([True] * (25 + d) + [False] * (25 - d))} for d in (0, 1, 2)]
    )
    assert wide["x"]["ci95"][1] - wide["x"]["ci95"][0] > 2 * 4.303 * wide["x"]["sd"] / 3**0.5
    assert merged["by"]["1"]["rate"] == 1.0
    assert over_seeds(runs[:1]) == runs[0]  # one seed: the run itself
    assert value(merged)["by"] == {"1": 1.0}


def test_claims_only_where_intervals_separate():
    hi, lo, mid = (
        {"rate": 0.9, "n": 32, "ci95": [0.8, 0.95]},
        {"rate": 0.1, "n": 32, "ci95": [0.05, 0.2]},
        {"rate": 0.5, "n": 32, "ci95": [0.1, 0.85]},
    )
    assert separated(hi, lo) == 1 and separated(lo, hi) == -1 and separated(hi, mid) == 0
    methods = {
        "calyrex": {"rule_adherence_single": hi, "injection_success": hi, "task_accuracy": mid},
        "lora": {"rule_adherence_single": lo, "injection_success": lo, "task_accuracy": mid},
    }
    (line,) = claims(methods)
    assert "better on rules single ↑ 0.90 vs 0.10" in line
    assert "worse on injection ↓ 0.90 vs 0.10" in line and "the other 1" in line


def test_page_results_are_generated_from_the_committed_files():
    """docs/ruleworld.md holds what scripts/ruleworld_readme.py writes from docs/ruleworld/."""
    import subprocess
    import sys

    check = [sys.executable, str(ROOT / "scripts" / "ruleworld_readme.py"), "--check"]
    assert subprocess.run(check, cwd=ROOT).returncode == 0, "run scripts/ruleworld_readme.py"
