"""``calyrex ablate``: the placement ablation on RuleWorld (architecture.md, "Placement").

One CALYREX adapter per preset (or explicit layer list), trained on the same SFT corpus with the
same steps and seed, each evaluated with the rule and attack checkers; a table and a plot of
rule adherence per placement. Every number comes from the run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import torch

from ..placement import PRESETS, placement_layers
from .corpus import sft_corpus, write_jsonl
from .demo import FULL, QUICK, _backbone, _train
from .evaluate import EvalConfig, evaluate
from .pretrain import load_backbone
from .world import World

SUITES = ("rules", "injection", "tasks")
COLUMNS = ("rule_adherence_single", "rule_adherence_heldout", "injection_success", "task_accuracy")


def ablate(
    presets: list[str] | None = None,
    out: str = "ruleworld-ablate",
    seed: int = 0,
    backbone: str | None = None,
    quick: bool = False,
    steps: int | None = None,
) -> dict:
    """Placement ablation on RuleWorld: one CALYREX adapter per preset (default: all 8), same
    data, steps and seed; rule adherence, injection success and task accuracy per placement,
    written to OUT/ablation.{json,md,png}; --steps overrides the demo's training steps."""
    from ..adapter_io import load_adapter

    torch.set_num_threads(min(torch.get_num_threads(), 2))
    start, root, cfg = time.time(), Path(out), QUICK if quick else FULL
    cfg = dataclasses.replace(cfg, steps=steps or cfg.steps)
    root.mkdir(parents=True, exist_ok=True)
    world = World(seed)
    path = _backbone(root, quick, seed, backbone)
    data = root / "sft.jsonl"
    write_jsonl(sft_corpus(world, cfg.conversations), data)
    eval_cfg = EvalConfig(**{**(cfg.eval or {}), "suites": SUITES})
    base, tok = load_backbone(path)
    num_layers = base.config.num_hidden_layers
    rows = {"base": {"layers": [], **evaluate(base, tok, world, eval_cfg)}}
    for preset in presets or list(PRESETS):
        info = _train("calyrex", path, data, root / preset, cfg, seed, placement=preset)
        model = load_adapter(load_backbone(path)[0], str(root / preset / "adapter"))
        rows[preset] = {"layers": placement_layers(preset, num_layers), **info}
        rows[preset].update(evaluate(model, tok, world, eval_cfg))
    results = {
        "placements": rows,
        "setup": {"backbone": str(path), "seed": seed, "steps": cfg.steps, "quick": quick},
        "seconds": round(time.time() - start, 1),
    }
    (root / "ablation.json").write_text(json.dumps(results, indent=2) + "\n")
    table = _markdown(rows)
    (root / "ablation.md").write_text(table)
    _plot(rows, root / "ablation.png")
    print(table)
    print(f"results -> {root}/ablation.json, ablation.md, ablation.png")
    return results


def _markdown(rows: dict[str, dict]) -> str:
    head = "| placement | layers | " + " | ".join(COLUMNS) + " |\n"
    head += "|---|---|" + "---|" * len(COLUMNS) + "\n"
    body = "".join(
        f"| {name} | {r['layers']} | "
        + " | ".join(f"{r.get(c, float('nan')):.3f}" for c in COLUMNS)
        + " |\n"
        for name, r in rows.items()
    )
    return head + body


def _plot(rows: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.4
    for i, column in enumerate(COLUMNS[:2]):
        xs = [j + (i - 0.5) * width for j in range(len(names))]
        ax.bar(xs, [rows[n].get(column, 0.0) for n in names], width, label=column)
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_ylabel("strict rule adherence")
    ax.set_title("RuleWorld placement ablation (CALYREX, same data, steps and seed)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
