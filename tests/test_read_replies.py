"""scripts/read_replies.py, the by-eye check of a scorer: each sampled item's verdict is printed
with every reply that belongs to it, and with no other item's."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "scripts" / "read_replies.py"


def _read(run_dir, n):
    """The script's output on ``run_dir``, ``n`` items per suite."""
    command = [sys.executable, str(SCRIPT), str(run_dir), "--n", str(n)]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_defence_is_shown_with_its_attack_and_right_code_replies(tmp_path):
    suite = tmp_path / "tensortrust"
    suite.mkdir()
    _write(
        suite / "tensortrust.details.jsonl",
        [{"defence": "hijacking:1", "valid": True}, {"defence": "hijacking:12", "valid": False}],
    )
    _write(
        suite / "tensortrust.responses.jsonl",
        [
            {"id": "hijacking:1:attack", "response": "Access Denied."},
            {"id": "hijacking:1:access", "response": "Access Granted."},
            {"id": "hijacking:12:attack", "response": "Access Granted."},
            {"id": "hijacking:12:access", "response": "No."},
        ],
    )
    out = _read(tmp_path, 2)
    blocks = {b.split(":")[1]: b for b in out.split("\n- ")[1:]}
    assert "'Access Denied.'" in blocks["1"] and "'Access Granted.'" in blocks["1"]
    assert "hijacking:12" not in blocks["1"] and '"valid": true' in blocks["1"]
    assert "'No.'" in blocks["12"] and '"valid": false' in blocks["12"]


def test_a_cases_group_is_shown_with_each_case_and_whether_it_holds(tmp_path):
    rows = [
        {"id": "d1:a", "category": "attack", "group": "d1", "reply": "No.", "pass": True,
         "failed": []},
        {"id": "d1:c", "category": "code", "group": "d1", "reply": "No.", "pass": False,
         "failed": ["regex 'x': no match"]},
        {"id": "d2:a", "category": "attack", "group": "d2", "reply": "Access Granted",
         "pass": False, "failed": ["not_regex"]},
        {"id": "d2:c", "category": "code", "group": "d2", "reply": "Access Granted",
         "pass": True, "failed": []},
        {"id": "lone", "category": "persona", "reply": None, "skipped": "too long",
         "pass": None, "failed": []},
    ]  # fmt: skip
    _write(tmp_path / "cases-outputs.jsonl", rows)
    out = _read(tmp_path, 5)
    assert "--- attack + code: 2" in out and "--- persona: 1" in out
    blocks = {b.split(":")[0]: b for b in out.split("\n- ")[1:]}
    assert blocks["d1"].startswith("d1: does not hold")
    assert "code: FAIL regex 'x': no match: 'No.'" in blocks["d1"] and "d2:" not in blocks["d1"]
    assert "attack: FAIL not_regex: 'Access Granted'" in blocks["d2"]
    assert blocks["lone"].startswith("lone: skipped") and "(skipped: too long)" in blocks["lone"]
