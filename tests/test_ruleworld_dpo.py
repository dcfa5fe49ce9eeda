"""The RuleWorld SFT → DPO study: gathering seeds, the gains, the verdict, and a smoke run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from calyrex.research.ruleworld.demo import METHODS
from calyrex.research.ruleworld.dpo_report import judge, markdown, own_effects, verdict
from calyrex.research.ruleworld.dpo_study import FULL, METRICS, gather

ROOT = Path(__file__).resolve().parents[1]


def _rate(r: float, n: int = 64) -> dict:
    return {"rate": r, "n": n, "ci95": [max(0.0, r - 0.1), min(1.0, r + 0.1)]}


def _write(root: Path, seed: int, method: str, stage: str, shift: float) -> None:
    metrics = {k: _rate(0.5 + shift) for k in METRICS}
    record = {"train_loss": 1.0, "train_seconds": 10.0, "metrics": metrics}
    path = root / f"seed-{seed}" / method / f"{stage}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_gather_pairs_seeds_and_judges_gains(tmp_path):
    # DPO lowers every rate: by 0.2 (± a little per seed) for calyrex, by 0.02 for LoRA
    for seed, wobble in zip((0, 1, 2), (0.0, 0.01, -0.01), strict=True):
        for method in METHODS:
            _write(tmp_path, seed, method, "sft", 0.0)
            drop = 0.2 if method == "calyrex" else 0.02
            _write(tmp_path, seed, method, "dpo", -drop + wobble)
    _write(tmp_path, 3, "calyrex", "sft", 0.0)  # an unfinished seed is left out
    result = gather(tmp_path, FULL.__class__(seeds=(0, 1, 2, 3)))
    assert result["seeds"] == [0, 1, 2]
    gain = result["gains"]["calyrex"]["injection_success"]
    assert gain["mean"] == pytest.approx(-0.2) and len(gain["seeds"]) == 3
    versus = result["calyrex_gain_minus"]["lora"]
    # an attack's success falling more is "more"; a helpfulness rate falling more is "less"
    assert judge(versus["injection_success"], "injection_success") == "more"
    assert judge(versus["task_accuracy"], "task_accuracy") == "less"
    said = verdict(result)
    assert "3 training seeds" in said and "injection" in said
    # each method's own DPO effect: calyrex's drop of 20 points is resolved both ways
    own = own_effects(result)
    assert "CALYREX late8th: held-out rules -20.0 (worse), injection -20.0 (better)" in own
    block = "\n".join(markdown(result))
    assert "CALYREX late8th SFT → DPO" in block and "CALYREX's gain − LoRA's" in block


def test_one_seed_resolves_nothing(tmp_path):
    for method in METHODS:
        _write(tmp_path, 0, method, "sft", 0.0)
        _write(tmp_path, 0, method, "dpo", -0.3)
    result = gather(tmp_path, FULL.__class__(seeds=(0,)))
    assert all(
        judge(e, k) == "no difference shown"
        for k, e in result["calyrex_gain_minus"]["lora"].items()
    )
    assert "no interval" in verdict(result)


def test_no_finished_seed_says_so(tmp_path):
    result = gather(tmp_path, FULL)
    assert result["seeds"] == [] and "No seed" in markdown(result)[0]


def test_the_docs_blocks_are_current():
    script = ROOT / "scripts" / "ruleworld_dpo_doc.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_quick_run_end_to_end_and_resumes(tmp_path):
    from calyrex.research.ruleworld.dpo_study import run_dpo_study

    result = run_dpo_study(tmp_path, quick=True)
    assert result["seeds"] == [0]
    assert set(result["rows"]) == {f"{m}-{s}" for m in METHODS for s in ("sft", "dpo")}
    stamp = (tmp_path / "seed-0" / "lora" / "dpo.json").stat().st_mtime
    again = run_dpo_study(tmp_path, quick=True)
    assert again["rows"] == result["rows"]
    assert (tmp_path / "seed-0" / "lora" / "dpo.json").stat().st_mtime == stamp


def test_units_of_an_unfinished_seed_are_shown(tmp_path):
    _write(tmp_path, 0, "calyrex", "sft", 0.0)
    result = gather(tmp_path, FULL.__class__(seeds=(0,)))
    assert result["seeds"] == [] and list(result["units"]) == ["s0-calyrex-sft"]
    assert any(line.startswith("| s0-calyrex-sft |") for line in markdown(result))
