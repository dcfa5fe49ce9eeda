"""The examples a user is pointed to run as written and print what they promise."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_its_checks_hold() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert "identity at initialisation (bit-exact): True" in out
    assert "save -> load -> identical logits: True" in out
    assert "system span tokens per conversation: [13, 0]" in out
