"""`calyrex reproduce`: the smoke end to end (every stage, every row and column, a second run
redoes nothing, a run killed mid-eval resumes to identical results), the dry-run of both paper
configs offline, the estimate's parameter budget, the table's intervals and the launch line."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calyrex.cli import main
from calyrex.eval import intervals as bootstrap
from calyrex.research.reproduce import load_config
from calyrex.research.reproduce.config import ReportSpec
from calyrex.research.reproduce.hub import Hub
from calyrex.research.reproduce.launch import train_argv
from calyrex.research.reproduce.table import COLUMNS, ROWS, build

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "configs" / "paper"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}


def smoke(out, **kw):
    cmd = [sys.executable, "-m", "calyrex", "reproduce", "--smoke", "--out", str(out)]
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, **kw)


def results(out):
    """Every benchmark record of every model, and the report's table (no paths in either, nor
    the seconds a benchmark took, nor the many-shot power-law fit: fitted to the smoke's flat
    curve, its nll moving 1e-4 over the shots, it turns last-digit noise into an r² 0.96 or
    0.998; the nll it is fitted to is compared)."""
    cost = ("seconds", "seconds_this_attempt", "tokens")  # what a run took, not what it found
    cost += ("power_law",)
    records = {
        str(f.relative_to(out)): {
            k: v for k, v in json.loads(f.read_text()).items() if k not in cost
        }
        for f in sorted((out / "eval").glob("*/*.json"))
        if f.name not in ("run.json",)
    }
    report = json.loads((out / "report.json").read_text())
    return records, {k: report[k] for k in ("rows", "deltas", "columns")}


@pytest.mark.timing
def test_the_smoke_takes_under_three_minutes_on_an_idle_machine(tmp_path):
    """A speed limit, so not in the default run (``pytest -m timing``, on an idle machine):
    another job on a 2-core machine slows the smoke down, and a limit that switched itself off
    under load would never fail where it is run."""
    start = time.perf_counter()
    run = smoke(tmp_path / "a")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    elapsed = time.perf_counter() - start
    assert elapsed < 180, f"the smoke took {elapsed:.0f} s"


def test_smoke_every_stage_then_nothing_redone_then_kill_and_resume(tmp_path):
    first = smoke(tmp_path / "a")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    a = tmp_path / "a"
    text = (a / "report.md").read_text()
    for row in ROWS.values():
        assert f"| {row} |" in text
    for column in COLUMNS:
        assert column in text
    for path in ("train/calyrex/adapter", "train/lora/adapter", "train/parallel_mlp/adapter"):
        assert (a / path).is_dir()
    for path in ("eval/base/ifeval.json", "analyze/analysis.json", "ablate/ablation.json"):
        assert (a / path).is_file()
    assert (a / "report" / "report.md").is_file() and (a / "report_main.png").is_file()
    table = json.loads((a / "report.json").read_text())
    assert list(table["rows"]) == ["base", "lora", "parallel_mlp", "calyrex"]
    assert all(list(r) == list(COLUMNS) for r in table["rows"].values())
    assert table["rows"]["calyrex"]["IFEval"]["status"] == "ok"
    assert table["rows"]["calyrex"]["MMLU"]["status"] == "not run"  # needs hub data
    assert table["rows"]["base"]["IFEval"]["interval"] is not None

    # a second run redoes nothing and says what it skipped
    before = {f: f.stat().st_mtime_ns for f in a.rglob("*.json") if "smoke" not in f.parts}
    again = smoke(a)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "ran 0 (nothing)" in again.stdout
    for unit in ("train/calyrex", "eval/base", "eval/calyrex", "analyze", "ablate", "report"):
        assert f"{unit}: finished earlier, skipped" in again.stdout
    after = {f: f.stat().st_mtime_ns for f in a.rglob("*.json") if "smoke" not in f.parts}
    assert after == before

    # killed mid-eval (SIGKILL once the LoRA evaluation has written a benchmark), then rerun
    b = tmp_path / "b"
    cmd = [sys.executable, "-m", "calyrex", "reproduce", "--smoke", "--out", str(b)]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = b / "eval" / "lora" / "ifeval.json"
    while not marker.is_file() and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (b / "eval" / "calyrex" / "summary.json").exists()  # it did stop mid-eval
    resumed = smoke(b)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "train/calyrex: finished earlier, skipped" in resumed.stdout
    assert "ifeval: finished earlier, not rerun" in resumed.stdout
    assert close(results(b), results(a))


def close(a, b, rel=1e-3, tol=1e-2):
    """Equal, floats within ``rel`` relative or ``tol`` absolute: two processes' fp32
    log-probabilities differ in their last digits on some CPUs (on an avx512 Xeon a fresh run's
    continuous scores differed from another fresh run's by up to 2e-3 in a log-probability
    margin, the base model's too); every count, verdict and text must match exactly, and the
    smoke's rates move in steps of 1/18 or more, far above ``tol``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel, abs_tol=tol)
    return a == b


@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "llama-3.1-8b"])
def test_dry_run_prints_the_plan_offline(name, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    args = ["reproduce", "--config", str(PAPER / f"{name}.yaml"), "--out", str(tmp_path / name)]
    assert main(args + ["--dry-run"]) == 0
    assert time.perf_counter() - start < 30
    out = capsys.readouterr().out
    cfg = load_config(PAPER / f"{name}.yaml")
    assert cfg.model in out and "size unknown (hub unreachable)" in out
    assert "hub metadata could not be read (HF_HUB_OFFLINE is set)" in out
    for stage in ("[train]", "[eval]", "[analyze]", "[ablate]", "[report]"):
        assert stage in out
    assert out.count("calyrex train --config") == 3 and out.count("calyrex eval --model") == 4
    assert "HuggingFaceH4/ultrachat_200k" in out and "git clone" in out
    assert "| **total** |" in out and "assumed: H100 SXM" in out
    assert not any(tmp_path.iterdir())  # nothing written, nothing loaded


def test_hub_asks_once_and_never_retries(monkeypatch):
    from huggingface_hub import HfApi

    calls = []

    def down(self, repo, **kw):
        calls.append(repo)
        raise ConnectionError("Name or service not known")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(HfApi, "model_info", down)
    monkeypatch.setattr(HfApi, "dataset_info", down)
    hub = Hub()
    assert hub.size("a/b") == "size unknown (hub unreachable)"
    assert hub.size("c/d", "dataset") == "size unknown (hub unreachable)"
    assert calls == ["a/b"]


def test_paper_configs_point_to_the_per_method_yamls():
    for name, model in [
        ("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct"),
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"),
    ]:
        cfg = load_config(PAPER / f"{name}.yaml")
        assert cfg.model == model
        for method in ("calyrex", "lora", "parallel_mlp"):
            assert cfg.train_config(method, "x").method == method
    llama = load_config(PAPER / "llama-3.1-8b.yaml")
    assert llama.report.paper == {
        "parallel_mlp": {"IFEval": 7.4, "SysBench": 16.3, "MSJ ASR": -13.1}
    }


def test_config_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntrain: {calyrex: a.yaml}\n")
    with pytest.raises(ValueError, match="missing"):
        load_config(bad)
    (tmp_path / "t.yaml").write_text("model: m\ndata: d\nout: o\n")
    bad.write_text(
        "name: x\ntrain: {calyrex: t.yaml, lora: t.yaml, parallel_mlp: t.yaml}\nevl: {}\n"
    )
    with pytest.raises(ValueError, match="unknown options"):
        load_config(bad)


def test_estimate_budget_equals_the_models_cal_budget():
    import torch
    from transformers import AutoModelForCausalLM

    from calyrex.adapters.baselines import cal_budget
    from calyrex.core.config import CalyrexConfig
    from calyrex.research.reproduce import estimate

    for name in ("qwen2.5-1.5b", "llama-3.1-8b"):
        cfg = load_config(PAPER / f"{name}.yaml")
        g, hf = estimate.geometry(cfg, cfg.model)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf)
        layers, _, params = estimate.cal_params(hf, "late8th")
        assert params == cal_budget(model, CalyrexConfig(placement="late8th"))
        tc = cfg.train_config("calyrex", "x")
        flops = {
            m: estimate.train_flops(g, hf, m, tc, cfg.estimate, 10) for m in ("calyrex", "lora")
        }
        assert flops["calyrex"] < flops["lora"]  # no backward below the first block


def write_eval(root, label, records):
    out = root / label
    out.mkdir(parents=True)
    for name, record in records.items():
        (out / f"{name}.json").write_text(json.dumps(record))
    (out / "summary.json").write_text(json.dumps({"label": label, "suites": {}}))


def test_table_intervals_and_paper_deltas(tmp_path):
    def mmlu(acc, se):
        return {"status": "ok", "metrics": {"acc": acc, "acc_stderr": se}}

    write_eval(tmp_path, "parallel_mlp", {"mmlu": mmlu(0.5, 0.01)})
    write_eval(
        tmp_path,
        "calyrex",
        {"mmlu": mmlu(0.6, 0.02), "msj": {"status": "skipped", "reason": "no judge"}},
    )
    built = build(tmp_path, ["parallel_mlp", "calyrex"], ReportSpec(), {"gsm8k": "why"})
    cell = built["rows"]["calyrex"]["MMLU"]
    assert cell.interval == pytest.approx((0.6 - 1.96 * 0.02, 0.6 + 1.96 * 0.02))
    half = 1.96 * (0.01**2 + 0.02**2) ** 0.5
    d = built["deltas"]["parallel_mlp"]["MMLU"]
    assert d.value == pytest.approx(0.1) and d.interval == pytest.approx((0.1 - half, 0.1 + half))
    assert built["rows"]["calyrex"]["MSJ ASR"].status == "skipped"
    assert built["rows"]["calyrex"]["GSM8K"].status == "not run"


def test_bootstrap_is_stratified_and_paired():
    a = {f"h{i}": ("HRR", 1.0) for i in range(10)} | {f"e{i}": ("ERR", 0.0) for i in range(30)}
    assert bootstrap.interval(a, 200) == (0.5, 0.5)  # mean of group means, groups kept whole
    b = {k: (g, v) for k, (g, v) in a.items()}
    assert bootstrap.interval(bootstrap.paired(a, b), 200) == (0.0, 0.0)
    mixed = {str(i): ("g", float(i % 2)) for i in range(40)}
    lo, hi = bootstrap.interval(mixed, 500)
    assert lo < 0.5 < hi and bootstrap.interval(mixed, 500) == (lo, hi)


def test_training_launches_through_accelerate_with_several_gpus(tmp_path):
    cfg = load_config(PAPER / "qwen2.5-1.5b.yaml")
    one = train_argv(cfg, "lora", tmp_path, 1)
    assert one[:4] == ["calyrex", "train", "--config", cfg.train["lora"]] and "--resume" in one
    many = train_argv(cfg, "lora", tmp_path, 4)
    assert many[:3] == ["accelerate", "launch", "--config_file"]
    assert Path(many[3]).is_file() and many[3].endswith("ddp.yaml")
    assert many[4:8] == ["--num_processes", "4", "-m", "calyrex"] and many[8:] == one[1:]
