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
