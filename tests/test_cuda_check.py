"""scripts/cuda_check.py, the GPU run of the core invariants, runs and passes on the CPU too
(so the script a GPU machine runs is the one CI keeps working).

The committed CUDA record (``results/device/cuda_check.json``) is one run on one machine, with
that machine's torch and transformers, not the ones pinned here: it is checked for naming what
it was made with and for covering the checks the script runs today, and is not taken as
evidence that this install passes on a GPU.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEVICE = ROOT / "results" / "device"


def _checks(record):
    return sorted(f"{r['arch']}/{r['check']}" for r in record["results"])


@pytest.fixture(scope="module")
def cpu_record(tmp_path_factory):
    out = tmp_path_factory.mktemp("cuda_check") / "check.json"
    args = [sys.executable, str(ROOT / "scripts" / "cuda_check.py"), "--device", "cpu"]
    proc = subprocess.run([*args, "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


def test_the_device_check_passes_on_the_cpu(cpu_record):
    assert cpu_record["all_passed"] and not cpu_record["failed"]
    assert all(r["passed"] for r in cpu_record["results"])
    checks = {r["check"] for r in cpu_record["results"]}
    assert {"identity_at_init", "cache_vs_no_cache", "batch_vs_single", "save_load"} <= checks
    assert {r["arch"] for r in cpu_record["results"]} == {"llama", "qwen2"}


def test_the_committed_gpu_record_names_what_it_was_made_with(cpu_record):
    record = json.loads((DEVICE / "cuda_check.json").read_text())
    env = record["environment"]
    assert env["device"] == "cuda" and env["device_name"] and env["cuda"]
    assert all(env.get(k) for k in ("python", "torch", "transformers", "peft", "calyrex"))
    # the printed table beside it is the same run: its header names the same versions
    header = (DEVICE / "cuda_check.log").read_text().splitlines()[0].split()
    assert header[:6] == [
        "torch",
        env["torch"],
        "transformers",
        env["transformers"],
        "peft",
        env["peft"],
    ]
    # a record of the script's current checks, whose verdict is its rows' verdict
    assert _checks(record) == _checks(cpu_record)
    failed = [f"{r['arch']}/{r['check']}" for r in record["results"] if not r["passed"]]
    assert record["failed"] == failed and record["all_passed"] == (not failed)
