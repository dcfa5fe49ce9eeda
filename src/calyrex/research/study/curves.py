"""The study's validation curves: each run's validation loss over its steps, one panel per
objective, a colour per method and a line style per seed (``OUT/validation.png``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STYLES = ("-", "--", ":", "-.")


def eval_losses(metrics: Path) -> list[tuple[int, float]]:
    """(step, validation loss) of every evaluation a run logged in ``metrics.jsonl``."""
    if not metrics.is_file():
        return []
    rows = (json.loads(line) for line in metrics.read_text().splitlines() if line.strip())
    return [(r["step"], r["eval_loss"]) for r in rows if "eval_loss" in r]


def plot_validation(runs: dict[str, dict[str, Any]], path: Path) -> Path | None:
    """``runs``: run name → {"method", "objective", "seed", "losses"}; None when none has one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {k: v for k, v in runs.items() if v["losses"]}
    if not runs:
        return None
    objectives = sorted({r["objective"] for r in runs.values()}, key=["sft", "dpo"].index)
    methods = sorted({r["method"] for r in runs.values()})
    colors = dict(zip(methods, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False))
    fig, axes = plt.subplots(1, len(objectives), figsize=(5.5 * len(objectives), 4), squeeze=False)
    for ax, objective in zip(axes[0], objectives, strict=True):
        for name, r in sorted(runs.items()):
            if r["objective"] != objective:
                continue
            steps, losses = zip(*r["losses"], strict=True)
            style = STYLES[r["seed"] % len(STYLES)]
            ax.plot(steps, losses, style, color=colors[r["method"]], marker=".", label=name)
        ax.set_title(f"{objective.upper()}: validation loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (DPO: the DPO loss)" if objective == "dpo" else "loss (nats/token)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
