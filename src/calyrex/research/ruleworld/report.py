"""The demo's outputs: a metrics × methods table with 95 % intervals, and PNG plots with bars.

Metrics are rows and methods columns, so the table stays 80 columns wide however many metrics
there are; the terminal form is plain text (no box drawing, nothing truncated when piped).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...eval.intervals import is_rate, yerr
from .families import FAMILIES

# (metric, row label); ↑ higher is better, ↓ an attack's success rate (lower is better)
TABLE = (
    ("rule_adherence_single", "rules single ↑"),
    ("rule_adherence_heldout", "rules held-out ↑"),
    ("multiturn_adherence", "multi-turn ↑"),
    ("session_stability", "stability ↑"),
    ("injection_success", "injection ↓"),
    ("attack_families_success", "attack families ↓"),
    *((f"attack_{f}_success", f"  {f.replace('_', ' ')} ↓") for f in FAMILIES if f != "control"),
    ("attack_control_success", "  no attack ↓"),  # the control: the rule broken unattacked
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
NOTE = (
    "↑ higher is better; ↓ attack success rate, lower is better. Each cell: the rate and its "
    "95 % interval (Wilson over examples; multi-turn: bootstrap over sessions; over several "
    "seeds: the mean, and the wider of Student's t interval over the seeds and the examples' "
    "own; sd = the seeds' spread). n = examples per method."
)


def run_line(entry: dict, name: str) -> str:
    """A recorded run's command, wall time, CPU time and machine load, for the README."""
    load, cpu = entry.get("load_average"), entry.get("cpu_seconds")
    busy = f", load average {load[0]:.1f} → {load[1]:.1f}" if load else ""
    used = f" ({cpu / 60:.1f} CPU-min)" if cpu else ""
    return (
        f"**`{entry['command']}`** — {entry['seconds'] / 60:.1f} min wall{used}, "
        f"{entry['cpus']} CPU thread{'s' * (entry['cpus'] != 1)}{busy} (`docs/ruleworld/{name}`)."
    )


def rows(methods: dict[str, dict]) -> list[tuple[str, str]]:
    """(metric, label) of the :data:`TABLE` rows these results have."""
    first = next(iter(methods.values()))
    return [(k, label) for k, label in TABLE if k in first]


def _short(x: float) -> str:
    return f"{x:.2f}".removeprefix("0") if x < 1 else "1.0"


def cell(entry: Any, compact: bool = False) -> str:
    if not is_rate(entry):
        return f"{entry:.2f}" if isinstance(entry, int | float) else "–"
    rate, (lo, hi) = entry["rate"], entry["ci95"]
    if compact:
        return f"{rate:.2f} {_short(lo)}–{_short(hi)}"
    sd = f" sd {entry['sd']:.2f}" if "sd" in entry else ""
    return f"{rate:.2f} [{lo:.2f}, {hi:.2f}]{sd}"


def _n(methods: dict[str, dict], key: str) -> str:
    return str(next(iter(methods.values())).get(key, {}).get("n", "–"))


def text_table(methods: dict[str, dict]) -> str:
    """The terminal table: plain text, at most 80 columns for four methods."""
    labels = [label for _, label in rows(methods)] + ["method"]
    width = max(map(len, labels))
    head = f"{'':<{width}}  {'n':>4}" + "".join(f"  {m[:12]:>12}" for m in methods)
    lines = [head]
    for key, label in rows(methods):
        cells = "".join(f"  {cell(m.get(key), compact=True):>12}" for m in methods.values())
        lines.append(f"{label:<{width}}  {_n(methods, key):>4}{cells}")
    return "\n".join(lines) + "\n"


def markdown_table(methods: dict[str, dict]) -> str:
    out = ["| metric | n | " + " | ".join(methods) + " |"]
    out.append("|---" * (len(methods) + 2) + "|")
    for key, label in rows(methods):
        cells = " | ".join(cell(m.get(key)) for m in methods.values())
        label = "· " + label.strip() if label.startswith(" ") else label  # a family's row
        out.append(f"| {label} | {_n(methods, key)} | {cells} |")
    return "\n".join(out) + "\n"


def print_table(methods: dict[str, dict]) -> None:
    print("RuleWorld: base vs parameter-matched adapters (rate and 95 % interval)")
    print(text_table(methods), end="", flush=True)


def write_markdown(results: dict, path: Path) -> None:
    setup = json.dumps(results["setup"], indent=2)
    path.write_text(
        f"# RuleWorld comparison\n\n{NOTE}\n\n"
        f"{markdown_table(results['methods'])}\n## Setup\n\n```json\n{setup}\n```\n"
    )


def write_plots(methods: dict[str, dict], out: Path) -> list[str]:
    """One PNG per curve in :data:`PLOTS`, every method a line with 95 % error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for key, xlabel, ylabel, name in PLOTS:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        log = key == "manyshot_success_by_shots"
        for i, (method, metrics) in enumerate(methods.items()):
            series = metrics.get(key) or {}
            shift = 0.03 * (i - (len(methods) - 1) / 2)  # dodge, so the bars stay apart
            span = max((int(x) for x in series), default=1)
            xs = [int(x) * (1 + shift) if log else int(x) + shift * span for x in series]
            ys = [e["rate"] for e in series.values()]
            ax.errorbar(
                xs, ys, yerr=yerr(list(series.values())), marker="o", capsize=3, label=method
            )
        ax.set(xlabel=xlabel, ylabel=ylabel, ylim=(-0.02, 1.02))
        if log:
            ax.set_xscale("log", base=2)
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(name)
    return written
