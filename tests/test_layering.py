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
    """adapter_io reads, verifies and writes files; building a model is calyrex.adapters.loading."""
    graph = _graph()
    assert not graph["calyrex.core.adapter_io"] & {
        "calyrex.core.model",
        "calyrex.adapters.methods",
        "calyrex.adapters.baselines",
        "calyrex.core.wrap",
        "calyrex.adapters.loading",
    }


def _imports_anywhere(path: Path, source: str | None = None) -> set[str]:
    """Every ``calyrex.*`` module a file imports, at the top or inside a function (``source``:
    the text to read as that file's, else the file's own)."""
    name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
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
    upper = ("calyrex.research.ruleworld", "calyrex.research.reproduce", "calyrex.research.study")
    files = list((SRC / "calyrex" / "eval").rglob("*.py"))  # the statistics included
    offenders = {
        str(f.relative_to(SRC)): sorted(m for m in _imports_anywhere(f) if m.startswith(upper))
        for f in files
    }
    assert {f: m for f, m in offenders.items() if m} == {}


# The foundation, bottom to top: each package may import those before it, never one after it.
FOUNDATION = ("span", "core", "backbones", "adapters")
APPS = ("research", "eval", "training", "serve", "bench", "analysis", "cli")


def _package_files(package: str) -> list[Path]:
    return sorted((SRC / "calyrex" / package).rglob("*.py"))


def _app_imports(path: Path, source: str | None = None) -> list[str]:
    """The modules of an app package that ``path`` imports (anywhere in the file)."""
    return sorted(
        m for m in _imports_anywhere(path, source) if m.count(".") and m.split(".")[1] in APPS
    )


def test_the_core_never_reaches_up_to_the_apps():
    """The core a reader must trust, the span rule, the one loader and the resolver stand below
    every app: none of them imports an app, not even lazily inside a function (RuleWorld
    declares its backbone as an entry point of the group ``calyrex_models``; the resolver
    imports it only when that name is resolved)."""
    offenders = {
        str(f.relative_to(SRC)): _app_imports(f) for pkg in FOUNDATION for f in _package_files(pkg)
    }
    assert {f: m for f, m in offenders.items() if m} == {}


def test_the_foundation_points_one_way():
    """span → core → backbones → adapters: a package never imports one above it."""
    offenders = {}
    for level, pkg in enumerate(FOUNDATION):
        above = tuple(f"calyrex.{p}" for p in FOUNDATION[level + 1 :])
        for f in _package_files(pkg):
            bad = sorted(m for m in _imports_anywhere(f) if m.startswith(above))
            if bad:
                offenders[str(f.relative_to(SRC))] = bad
    assert offenders == {}


def test_the_layering_check_sees_lazy_imports():
    """Relative or absolute, at the top or inside a function: each is seen."""
    source = (
        "from ..core.model import CalyrexModel\n"
        "def f():\n"
        "    from ..research.ruleworld.pretrain import asset_dir\n"
        "    import calyrex.eval.runner\n"
        "    from calyrex import training\n"
    )
    found = _app_imports(SRC / "calyrex" / "backbones" / "resolve.py", source)
    assert found == [
        "calyrex.eval.runner",
        "calyrex.research.ruleworld.pretrain",
        "calyrex.research.ruleworld.pretrain.asset_dir",
        "calyrex.training",
    ]


def _strings(path: Path) -> set[str]:
    """String constants of a file that name a calyrex module (``"calyrex.x.y:f"``)."""
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("calyrex.")
    }


def test_the_library_never_imports_the_research_wing():
    """Issue 39: calyrex.research (RuleWorld, reproduce, study, mix, ablation) stands on the
    library; no library file imports it or names it for a later import — the library reaches
    it only through entry points (calyrex.core.plugins)."""
    research = SRC / "calyrex" / "research"
    offenders = {}
    for f in (SRC / "calyrex").rglob("*.py"):
        if research in f.parents:
            continue
        bad = {m for m in _imports_anywhere(f) if m.startswith("calyrex.research")}
        bad |= {s for s in _strings(f) if s.startswith("calyrex.research")}
        if bad:
            offenders[str(f.relative_to(SRC))] = sorted(bad)
    assert offenders == {}
    # not vacuous: the wing is there and the check sees a lazy import of it
    assert (research / "study" / "real.py").is_file()
    lazy = "def f():\n    from ..research.study import real\n"
    assert "calyrex.research.study" in _imports_anywhere(
        SRC / "calyrex" / "cli" / "__init__.py", lazy
    )


def test_the_research_wing_is_reached_through_entry_points():
    """The backbone, the subcommands and the analysis data the research wing declares."""
    from calyrex.backbones.resolve import named_models
    from calyrex.cli import commands
    from calyrex.core import plugins

    assert named_models()["ruleworld"].startswith("calyrex.research.ruleworld")
    assert {"study", "mix", "reproduce", "ruleworld-eval"} <= set(commands())
    assert "ruleworld" in plugins.table(plugins.ANALYSIS_DATA)
    for group in (plugins.MODELS, plugins.COMMANDS, plugins.ANALYSIS_DATA):
        for target in plugins.table(group).values():
            assert callable(plugins.load(target))


def test_no_loose_modules_but_the_package_face_and_main():
    """Issue 39: every module belongs to a subpackage; the statistics live in one module."""
    loose = sorted(p.name for p in (SRC / "calyrex").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"]
    stats = [p for p in (SRC / "calyrex").rglob("*.py") if p.name == "intervals.py"]
    assert [str(p.relative_to(SRC)) for p in stats] == ["calyrex/eval/intervals.py"]
