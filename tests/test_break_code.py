"""scripts/break_code.py, the core broken on purpose: every break still applies to today's code
(its text occurs exactly once), names test files that exist, was caught by at least one test in
the committed record, and docs/testing.md's table is that record."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "scripts" / "break_code.py"
RECORD = ROOT / "results" / "breaks" / "code.jsonl"


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(SCRIPT.parent))  # the script imports its neighbour doc_blocks
    try:
        spec = importlib.util.spec_from_file_location("break_code", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPT.parent))


def test_every_break_applies_to_the_code_once(script):
    for name, file, old, new, tests in script.BREAKS:
        text = (ROOT / "src" / "calyrex" / file).read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{name}: the code changed, update the break"
        assert old != new, name
        for path in tests:
            assert not path.startswith("tests/") or (ROOT / path).exists(), path
    names = [b[0] for b in script.BREAKS]
    assert len(set(names)) == len(names)


def test_every_recorded_break_was_caught_and_the_docs_table_is_the_record(script):
    records = script.read_records(RECORD)
    assert {r["break"] for r in records} == {b[0] for b in script.BREAKS}
    assert [r["break"] for r in records if r["failed"] + r["errors"] == 0] == []
    command = [sys.executable, str(SCRIPT), "--table", str(RECORD), "--check"]
    assert subprocess.run(command, capture_output=True, text=True).returncode == 0
