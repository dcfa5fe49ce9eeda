"""The demo's outputs: a methods × metrics table (terminal and Markdown) and PNG plots."""

from __future__ import annotations

import json
from pathlib import Path

# (metric, column label); ↑ higher is better, ↓ an attack's success rate (lower is better)
TABLE = (
    ("rule_adherence_single", "rules single ↑"),
    ("rule_adherence_heldout", "rules held-out ↑"),
    ("multiturn_adherence", "multi-turn ↑"),
    ("session_stability", "stability ↑"),
    ("injection_success", "injection ↓"),
    ("manyshot_success", "many-shot ↓"),
    ("longctx_adherence", "long ctx ↑"),
    ("extraction_success", "extraction ↓"),
    ("hijack_success", "hijack ↓"),
    ("access_granted_rightful", "rightful ↑"),
    ("task_accuracy", "tasks ↑"),
)
# (per-x metric, x label, y label, file)
PLOTS = (
    ("manyshot_success_by_shots", "faux exchanges (shots)", "attack success", "manyshot.png"),
    ("multiturn_adherence_by_turn", "turn", "rule adherence", "multiturn.png"),
    ("longctx_adherence_by_tokens", "filler tokens", "rule adherence", "longctx.png"),
)


def _cell(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "–"


def markdown_table(methods: dict[str, dict]) -> str:
    rows = ["| method | " + " | ".join(label for _, label in TABLE) + " |"]
    rows.append("|---" * (len(TABLE) + 1) + "|")
    for method, metrics in methods.items():
        rows.append(f"| {method} | " + " | ".join(_cell(metrics.get(k)) for k, _ in TABLE) + " |")
    return "\n".join(rows) + "\n"


def print_table(methods: dict[str, dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="RuleWorld: base vs parameter-matched adapters")
    table.add_column("method")
    for _, label in TABLE:
        table.add_column(label, justify="right")
    for method, metrics in methods.items():
        table.add_row(method, *(_cell(metrics.get(k)) for k, _ in TABLE))
    Console().print(table)


def write_markdown(results: dict, path: Path) -> None:
    setup = json.dumps(results["setup"], indent=2)
    path.write_text(
        "# RuleWorld comparison\n\n"
        "↑ higher is better; ↓ attack success rate, lower is better.\n\n"
        f"{markdown_table(results['methods'])}\n## Setup\n\n```json\n{setup}\n```\n"
    )


def write_plots(methods: dict[str, dict], out: Path) -> list[str]:
    """One PNG per curve in :data:`PLOTS`, every method a line; returns the file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for key, xlabel, ylabel, name in PLOTS:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for method, metrics in methods.items():
            series = metrics.get(key) or {}
            ax.plot([int(x) for x in series], list(series.values()), marker="o", label=method)
        ax.set(xlabel=xlabel, ylabel=ylabel, ylim=(-0.02, 1.02))
        if key == "manyshot_success_by_shots":
            ax.set_xscale("log", base=2)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(name)
    return written
