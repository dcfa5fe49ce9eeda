"""The documentation: a short README whose links resolve, and an import-layers page drawn from
the code. The strict site build is `scripts/docs.sh` (run by `scripts/test.sh`); the result
blocks are checked by the tests of the scripts that write them."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_layers_page_is_what_the_code_gives():
    check = [sys.executable, str(ROOT / "scripts" / "import_layers.py"), "--check"]
    assert subprocess.run(check, cwd=ROOT).returncode == 0, "run scripts/import_layers.py"


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < 300, f"README.md has {lines} lines: move detail into docs/"


def test_readme_relative_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert local, "the README links to the docs"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def _defines(path: Path, name: str) -> bool:
    """Whether the module at ``path`` defines or imports ``name`` at any level (read with ast)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def _resolves(ref: str) -> bool:
    """``calyrex.a.b.C`` names a module under src/, or something that module defines."""
    parts = ref.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath("src", *parts[:i])
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return all(_defines(path, name) for name in parts[i : i + 2])
    return False


def test_docs_name_modules_and_files_that_exist():
    """Every `calyrex.x.y` and every repository path the pages name in backticks exists, so a
    moved module or file shows up here (the API reference's `:::` lines fail the strict build)."""
    pages = [p for p in sorted(ROOT.glob("docs/**/*.md")) if p.name != "layers.md"]
    stale = []
    for page in [ROOT / "README.md", *pages]:
        text = page.read_text(encoding="utf-8")
        for ref in set(re.findall(r"`(calyrex(?:\.[A-Za-z_]\w*)+)", text)):
            if not _resolves(ref):
                stale.append(f"{page.relative_to(ROOT)}: {ref}")
        for ref in set(
            re.findall(r"`((?:calyrex|tests|scripts|benchmarks|configs)/[\w./*-]+)`", text)
        ):
            if not any(list(ROOT.glob(ref)) + list((ROOT / "src").glob(ref))):
                stale.append(f"{page.relative_to(ROOT)}: {ref}")
    assert not stale, "the docs name what no longer exists:\n" + "\n".join(sorted(stale))


@pytest.mark.slow
def test_readme_python_example_runs(tmp_path):
    """The README's Python block runs as written (on SmolLM2, 2 training steps instead of 20)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S)[1].replace("max_steps=20", "max_steps=2")
    chat = [
        {"role": "system", "content": "Always answer like a pirate."},
        {"role": "user", "content": "How are you?"},
        {"role": "assistant", "content": "Arr, I be fine, matey!"},
    ]
    (tmp_path / "chats.jsonl").write_text(json.dumps({"messages": chat}) + "\n")
    (tmp_path / "example.py").write_text(code)
    run = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert (tmp_path / "runs" / "pirate" / "adapter").is_dir()
    assert (tmp_path / "runs" / "init" / "adapter").is_dir()
