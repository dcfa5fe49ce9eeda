"""scripts/cuda_check.py, the GPU run of the core invariants, runs and passes on the CPU too
(so the script a GPU machine runs is the one CI keeps working)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_device_check_passes_on_the_cpu(tmp_path):
    out = tmp_path / "check.json"
    args = [sys.executable, str(ROOT / "scripts" / "cuda_check.py"), "--device", "cpu"]
    proc = subprocess.run([*args, "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(out.read_text())
    assert record["all_passed"] and not record["failed"]
    checks = {r["check"] for r in record["results"]}
    assert {"identity_at_init", "cache_vs_no_cache", "batch_vs_single", "save_load"} <= checks
    assert {r["arch"] for r in record["results"]} == {"llama", "qwen2"}


def test_the_committed_gpu_record_passed():
    record = json.loads((ROOT / "results" / "device" / "cuda_check.json").read_text())
    assert record["environment"]["device"] == "cuda" and record["all_passed"]
