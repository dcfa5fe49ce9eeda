"""scripts/read_replies.py, the by-eye check of a scorer: each sampled item's verdict is printed
with every reply that belongs to it, and with no other item's."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "scripts" / "read_replies.py"


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
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--n", "2"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    blocks = {b.split(":")[1]: b for b in out.split("\n- ")[1:]}
    assert "'Access Denied.'" in blocks["1"] and "'Access Granted.'" in blocks["1"]
    assert "hijacking:12" not in blocks["1"] and '"valid": true' in blocks["1"]
    assert "'No.'" in blocks["12"] and '"valid": false' in blocks["12"]
