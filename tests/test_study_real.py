"""``calyrex study real``: the whole chain on SmolLM2 in its quick preset (every stage, a few
examples), its resumption, its report's arithmetic, and the CLI's positional argument."""

import json
import math
import os
import time

import pytest

from calyrex.cli import main
from calyrex.study.config import FULL, QUICK
from calyrex.study.markdown import render
from calyrex.study.real import runs
from calyrex.study.report import Metric, metrics, verdict


def test_verdicts_follow_the_interval_and_the_direction():
    up, down = Metric("s", "m", "t"), Metric("s", "m", "t", higher_is_better=False)
    assert verdict(up, {"ci95": [0.01, 0.2]}, "lora") == "CALYREX better"
    assert verdict(up, {"ci95": [-0.2, -0.01]}, "lora") == "lora better"
    assert verdict(down, {"ci95": [0.01, 0.2]}, "lora") == "lora better"
    assert verdict(down, {"ci95": [-0.3, 0.1]}, "lora") == "no difference resolved"
    assert verdict(up, {"ci95": [math.nan, math.nan]}, "lora") == "no difference resolved"


def test_runs_put_the_papers_comparison_first_and_each_dpo_arm_after_its_start():
    order = [name for name, _, _ in runs(FULL)]
    assert order[:4] == ["base", "calyrex-late8th-s0", "lora-s0", "parallel_mlp-s0"]
    assert len(order) == len(set(order))
    for name, arm, seed in runs(FULL)[1:]:
        if arm.init_from:  # a DPO arm starts from its SFT adapter, which must exist first
            assert order.index(f"{arm.init_from}-s{seed}") < order.index(name)
    firsts = [order.index(f"{a}-s0") for a in ("calyrex-late8th", "lora", "parallel_mlp")]
    assert max(firsts) < min(order.index(n) for n in order if n.endswith("-s1"))
    main_arms = [n for n, arm, _ in runs(FULL)[1:] if arm.seeds is None and not arm.init_from]
    assert order[1 : 1 + len(main_arms)] == main_arms, "every seed of the comparison first"


def test_a_dpo_run_to_redo_brings_back_the_sft_adapter_it_starts_from(tmp_path):
    """Committed results keep no weights: a DPO run whose evaluation is unfinished and whose
    adapter is gone is trained again, so the SFT run it starts from is needed again too."""
    from calyrex.study.real import _adapter_needed

    sft, dpo = FULL.arm("parallel_mlp"), FULL.arm("parallel_mlp-dpo")
    for arm in (sft, dpo):
        (tmp_path / "train" / f"{arm.label}-s0").mkdir(parents=True)
        (tmp_path / "train" / f"{arm.label}-s0" / "summary.json").write_text("{}")
    for suite in FULL.suites:  # the SFT run is fully evaluated, the DPO run is not
        where = tmp_path / "eval" / "parallel_mlp-s0" / suite.key
        where.mkdir(parents=True)
        (where / f"{suite.name}.json").write_text(json.dumps({"status": "ok"}))
    assert _adapter_needed(FULL, tmp_path, dpo, 0)
    assert _adapter_needed(FULL, tmp_path, sft, 0)
    (tmp_path / "train" / "parallel_mlp-dpo-s0" / "adapter").mkdir()  # its adapter is here
    assert not _adapter_needed(FULL, tmp_path, sft, 0)


def test_cli_takes_the_study_as_a_positional_argument(capsys):
    assert main(["study", "nosuch", "--quick"]) == 2
    assert "unknown study 'nosuch'" in capsys.readouterr().err


@pytest.mark.usefixtures("real_data")
def test_quick_study_runs_every_stage_and_resumes(tmp_path):
    out = tmp_path / "study"
    start = time.time()
    assert main(["study", "real", "--quick", "--out", str(out)]) == 0
    first = time.time() - start
    report = json.loads((out / "report.json").read_text())
    arms = {a.label for a in QUICK.arms}
    assert set(report["training"]) == arms
    for label in ("lora", "parallel_mlp"):  # parameter-matched to late8th within 2 %
        assert abs(report["training"][label]["params_vs_calyrex"] - 1) <= 0.02
    suites = {m.suite for m in metrics(QUICK)}
    evaluated = {key.split(":")[0] for key in report["metrics"]}
    assert evaluated == suites, suites - evaluated
    for row in report["metrics"].values():
        assert {"base", "calyrex-late8th", "lora", "parallel_mlp"} <= set(row["cells"])
        for cell in row["cells"].values():
            lo, hi = cell["ci95"]
            assert math.isnan(lo) or lo <= cell["value"] + 1e-9 <= hi + 2e-9
    assert "| metric | n |" in (out / "report.md").read_text()
    assert render(report, ["base", *sorted(arms)])

    stamps = {p: p.stat().st_mtime_ns for p in (out / "train").rglob("*") if p.is_file()}
    stamps |= {p: p.stat().st_mtime_ns for p in (out / "eval").rglob("*.jsonl")}
    start = time.time()
    assert main(["study", "real", "--quick", "--out", str(out)]) == 0
    assert time.time() - start < first / 2
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps, "a finished unit was redone"
    assert first < 600 or os.getloadavg()[0] > 3, f"--quick took {first:.0f} s"


def test_readme_study_block_is_generated_from_the_committed_report():
    """README.md and docs/study.md hold what scripts/readme_study.py writes from the report."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    check = [sys.executable, str(root / "scripts" / "readme_study.py"), "--check"]
    assert subprocess.run(check, cwd=root).returncode == 0, "run scripts/readme_study.py"


def test_an_accuracy_without_lm_evals_stderr_gets_lm_evals_formula():
    from calyrex.study.report import _stderr

    # ARC-Easy as lm-eval reported it on the base model (acc 0.475 of 40, stderr 0.07996…)
    reported = {"metrics": {"acc": 0.475, "acc_stderr": 0.07996393417804533, "n": 40}}
    group = {"metrics": {"acc": 0.475, "n": 40}}  # a group task (mmlu_local) reports none
    assert _stderr(group, "acc") == pytest.approx(_stderr(reported, "acc"), rel=1e-9)
    assert _stderr({"metrics": {"asr": 0.5, "n": 40}}, "asr") is None  # not an accuracy
