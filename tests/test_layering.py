"""Issue 11: no import cycle among calyrex's modules (module-level imports), adapter files apart."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _graph() -> dict[str, set[str]]:
    files = {}
    for path in (SRC / "calyrex").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        files[name] = path
    graph = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.parse(path.read_text()).body:  # lazy imports inside functions are fine
            if not isinstance(node, ast.ImportFrom):
                continue
            parts = package.split(".")[: len(package.split(".")) - max(node.level - 1, 0)]
            target = (
                ".".join(parts + [node.module])
                if node.level and node.module
                else (".".join(parts) if node.level else node.module or "")
            )
            subs = {f"{target}.{a.name}" for a in node.names} & files.keys()
            if len(subs) < len(node.names) and target in files:
                subs.add(target)
            graph[name] |= subs - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, found = {}, {}, [], []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_adapter_files_import_no_model_code():
    """adapter_io reads, verifies and writes files; building a model is calyrex.loading."""
    graph = _graph()
    assert not graph["calyrex.adapter_io"] & {
        "calyrex.model",
        "calyrex.methods",
        "calyrex.baselines",
        "calyrex.wrap",
        "calyrex.loading",
    }


def _imports_anywhere(path: Path) -> set[str]:
    """Every ``calyrex.*`` module a file imports, at the top or inside a function."""
    name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            parts = package.split(".")[: len(package.split(".")) - max(node.level - 1, 0)]
            base = ".".join(parts) if node.level else ""
            target = ".".join(p for p in (base, node.module or "") if p)
            found |= {target} | {f"{target}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.startswith("calyrex")}


def test_lower_layers_never_reach_up():
    """Evaluation and the statistics sit below RuleWorld, the paper's reproduction and the
    studies: they never import them, not even lazily inside a function."""
    upper = ("calyrex.ruleworld", "calyrex.reproduce", "calyrex.study")
    files = [SRC / "calyrex" / "intervals.py", *(SRC / "calyrex" / "eval").rglob("*.py")]
    offenders = {
        str(f.relative_to(SRC)): sorted(m for m in _imports_anywhere(f) if m.startswith(upper))
        for f in files
    }
    assert {f: m for f, m in offenders.items() if m} == {}
