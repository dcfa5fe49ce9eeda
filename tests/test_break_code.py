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


def test_a_tree_holding_a_break_is_refused(tmp_path):
    """A run stopped hard (SIGKILL) can leave its break in the scratch tree; the next run would
    take the broken text for the code. It refuses a tree whose src differs from its commit."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "c"]):
        subprocess.run([*git, *args], check=True)
    (tmp_path / "src" / "m.py").write_text("x = 2\n")
    command = [sys.executable, str(SCRIPT), "--tree", str(tmp_path), "--out", str(tmp_path / "r")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode != 0 and "differs from its commit" in done.stderr
    assert "m.py" in done.stderr and not (tmp_path / "r").exists()
