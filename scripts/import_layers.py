"""Draw the package's import layers into docs/layers.md, read statically from src/calyrex.

    python scripts/import_layers.py            # rewrite docs/layers.md
    python scripts/import_layers.py --check    # exit 1 if docs/layers.md is not what the code gives

Every ``.py`` file under ``src/calyrex`` is parsed with :mod:`ast` (nothing is imported) and
belongs to a *unit*: its top-level subpackage (``calyrex/serve/…`` → ``serve``) or, for a module
directly in the package, that module (``calyrex/__main__.py`` → ``__main__``); ``calyrex/__init__.py``
is the unit ``calyrex``. An import statement anywhere in a file (module level or inside a
function; not under ``if TYPE_CHECKING:``) is an edge from its unit to the unit it names.
A string naming a calyrex module (``"calyrex.eval.command:eval_command"``, imported later by
``importlib``) is an edge *by name*, drawn dashed and left out of the floors.

The floors are topological levels over the import edges: a unit that imports no other unit is
on floor 0, any other one floor above the highest unit it imports. Units that import each other
(a cycle) share a floor and are marked. The script works on whatever units exist, so moving or
renaming modules only needs a rerun.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "calyrex"
SRC = ROOT / "src" / PACKAGE
PAGE = ROOT / "docs" / "layers.md"
BY_NAME = re.compile(rf"^{PACKAGE}(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_]*)?$")


def module_name(path: Path) -> str:
    """``src/calyrex/serve/app.py`` → ``calyrex.serve.app``; a package's ``__init__`` → the package."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


WINGS = ("research",)  # subpackages whose own subpackages are the units (research.study, …)


def unit_of(module: str) -> str:
    """The unit of a dotted calyrex module name: its first component below the package (below
    a wing, its first two: ``research.study``)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in WINGS:
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else PACKAGE


def is_module(module: str) -> bool:
    """Whether a dotted calyrex name is a module or package that exists under src/."""
    path = SRC.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def imported(path: Path) -> tuple[set[str], set[str]]:
    """(calyrex modules this file imports, calyrex modules it names in strings)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found, by_name = set(), set()
    for node in _nodes(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            # `from calyrex.core import wrap` imports the module calyrex.core.wrap
            subs = [f"{target}.{a.name}" for a in node.names if is_module(f"{target}.{a.name}")]
            found.update(subs or [target])
            if len(subs) < len(node.names):
                found.add(target)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if BY_NAME.match(node.value):
                name = node.value.partition(":")[0]
                if is_module(name):
                    by_name.add(name)
    return found, by_name


def graph() -> tuple[dict[str, int], dict[str, set[str]], dict[str, set[str]]]:
    """(modules per unit, unit → units it imports, unit → units it names by string)."""
    modules: dict[str, int] = defaultdict(int)
    edges: dict[str, set[str]] = defaultdict(set)
    named: dict[str, set[str]] = defaultdict(set)
    for path in sorted(SRC.rglob("*.py")):
        unit = unit_of(module_name(path))
        modules[unit] += 1
        found, by_name = imported(path)
        edges[unit].update(unit_of(m) for m in found)
        named[unit].update(unit_of(m) for m in by_name)
    for unit in modules:
        edges[unit].discard(unit)
        named[unit] -= edges[unit] | {unit}
    return dict(modules), {u: edges[u] for u in modules}, {u: named[u] for u in modules}


def components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan), each sorted; dependencies come first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def floors(edges: dict[str, set[str]]) -> tuple[dict[str, int], list[list[str]]]:
    """(unit → floor, the cycles), a cycle's units sharing one floor."""
    floor: dict[str, int] = {}
    cycles = []
    for comp in components(edges):  # Tarjan yields a component after everything it reaches
        members = set(comp)
        below = [floor[w] for v in comp for w in edges[v] if w not in members]
        level = 1 + max(below) if below else 0
        floor.update(dict.fromkeys(comp, level))
        if len(comp) > 1:
            cycles.append(comp)
    return floor, cycles


def _id(unit: str) -> str:
    return "u_" + re.sub(r"\W", "_", unit)


def _label(unit: str) -> str:
    return f"{PACKAGE} (__init__)" if unit == PACKAGE else unit


def render() -> str:
    modules, edges, named = graph()
    floor, cycles = floors(edges)
    in_cycle = {u: i + 1 for i, comp in enumerate(cycles) for u in comp}
    levels = sorted(set(floor.values()), reverse=True)
    lines = [
        "# Import layers",
        "",
        "<!-- generated by scripts/import_layers.py from src/calyrex: do not edit by hand -->",
        "Which part of `calyrex` imports which, read from the source with `ast` (nothing is "
        "imported): a unit is a top-level subpackage or a top-level module. An arrow "
        "`A --> B` means a module of A imports one of B (at module level or inside a function); "
        "a dashed arrow means A names a module of B in a string that it imports later by name "
        "(`importlib`). `python scripts/import_layers.py` rewrites this page; a test fails when "
        "it is stale.",
        "",
        "```mermaid",
        "graph TD",
    ]
    for level in levels:
        lines.append(f"  subgraph floor{level} [floor {level}]")
        for unit in sorted(u for u in floor if floor[u] == level):
            lines.append(f'    {_id(unit)}["{_label(unit)}"]')
        lines.append("  end")
    for unit in sorted(edges):
        lines += [f"  {_id(unit)} --> {_id(dep)}" for dep in sorted(edges[unit])]
        lines += [f"  {_id(unit)} -.-> {_id(dep)}" for dep in sorted(named[unit])]
    lines += [
        "```",
        "",
        "## Floors",
        "",
        "A unit that imports no other unit is on floor 0; any other unit sits one floor above the "
        "highest unit it imports. Imports by name are not counted."
        + (" Units in a cycle import each other and share a floor." if cycles else ""),
        "",
        "| floor | unit | modules | imports | imports by name |",
        "|---|---|---|---|---|",
    ]
    for level in levels:
        for unit in sorted(u for u in floor if floor[u] == level):
            mark = f" (cycle {in_cycle[unit]})" if unit in in_cycle else ""
            deps = ", ".join(f"`{d}`" for d in sorted(edges[unit])) or "—"
            by_name = ", ".join(f"`{d}`" for d in sorted(named[unit])) or "—"
            row = [str(level), f"`{_label(unit)}`{mark}", str(modules[unit]), deps, by_name]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args()
    new = render()
    old = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
    if args.check:
        if new != old:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python scripts/import_layers.py")
        return int(new != old)
    PAGE.write_text(new, encoding="utf-8")
    print(f"{PAGE.relative_to(ROOT)} " + ("rewritten" if new != old else "up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
