"""``calyrex demo``: the paper's comparison on RuleWorld, end to end on a CPU.

Backbone (shipped, or pretrained here) → SFT corpus without attacks → parameter-matched
``calyrex`` (late8th), ``lora`` and ``parallel_mlp`` trained with the same data, steps and seed
→ every method and the base evaluated with the checkers → ``results.json``, ``results.md`` and
plots. Every number comes from the run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from .corpus import sft_corpus, write_jsonl
from .evaluate import QUICK, EvalConfig, evaluate
from .pretrain import ASSET_DIR, load_backbone, pretrain
from .world import World

METHODS = ("calyrex", "lora", "parallel_mlp")
TABLE = (
    ("rule_adherence_single", "rules (single) ↑"),
    ("rule_adherence_heldout", "rules (held-out combos) ↑"),
    ("multiturn_adherence", "multi-turn ↑"),
    ("session_stability", "session stability ↑"),
    ("injection_success", "injection ↓"),
    ("manyshot_success", "many-shot ↓"),
    ("longctx_adherence", "long context ↑"),
    ("extraction_success", "extraction ↓"),
    ("hijack_success", "hijacking ↓"),
    ("access_granted_rightful", "rightful access ↑"),
    ("task_accuracy", "task accuracy ↑"),
)
PLOTS = (
    ("manyshot_success_by_shots", "faux exchanges (shots)", "attack success", "manyshot.png"),
    ("multiturn_adherence_by_turn", "turn", "rule adherence", "multiturn.png"),
    ("longctx_adherence_by_tokens", "filler tokens", "rule adherence", "longctx.png"),
)


def _backbone(out: Path, quick: bool, seed: int) -> Path:
    """The shipped backbone (seed 0), else one pretrained into ``out/backbone`` (cached)."""
    if (ASSET_DIR / "config.json").exists() and seed == 0:
        return ASSET_DIR
    path = out / "backbone"
    if not (path / "config.json").exists():
        pretrain(seed=seed, out=str(path), quick=quick)
    return path


def _train(method: str, backbone: Path, data: Path, out: Path, steps: int, seed: int) -> dict:
    from ..training import TrainConfig, train

    cfg = TrainConfig(
        model=str(backbone),
        method=method,
        placement="late8th",
        data=str(data),
        out=str(out / method),
        max_steps=steps,
        lr=2e-3,
        batch_size=16,
        max_length=256,
        seed=seed,
        system_pool=[],
        save_steps=10**9,
        logging_steps=max(1, steps // 10),
    )
    result = train(cfg)
    return {
        "trainable_params": result.trainable_params,
        "train_loss": result.final_loss,
        "train_seconds": round(result.seconds, 1),
    }


def write_markdown(results: dict, path: Path) -> str:
    head = "| method | " + " | ".join(label for _, label in TABLE) + " |"
    rows = [head, "|" + "---|" * (len(TABLE) + 1)]
    for method, metrics in results["methods"].items():
        cells = [
            f"{metrics[k]:.2f}" if isinstance(metrics.get(k), float) else "–" for k, _ in TABLE
        ]
        rows.append(f"| {method} | " + " | ".join(cells) + " |")
    text = "\n".join(rows) + "\n"
    path.write_text(
        f"# RuleWorld comparison\n\n{text}\n```json\n{json.dumps(results['setup'], indent=2)}\n```\n"
    )
    return text


def write_plots(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for key, xlabel, ylabel, name in PLOTS:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for method, metrics in results["methods"].items():
            series = metrics.get(key) or {}
            ax.plot([int(x) for x in series], list(series.values()), marker="o", label=method)
        ax.set(xlabel=xlabel, ylabel=ylabel, ylim=(-0.02, 1.02))
        if key == "manyshot_success_by_shots":
            ax.set_xscale("log", base=2)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        written.append(name)
    return written


def demo(
    quick: bool = False, out: str = "ruleworld-demo", seed: int = 0, steps: int | None = None
) -> dict:
    """Train calyrex / LoRA / ParallelMLP on RuleWorld, evaluate them and the base, tabulate."""
    from ..adapter_io import load_adapter

    torch.set_num_threads(min(torch.get_num_threads(), 2))
    start, root = time.time(), Path(out)
    root.mkdir(parents=True, exist_ok=True)
    world = World(seed)
    backbone = _backbone(root, quick, seed)
    data = root / "sft.jsonl"
    write_jsonl(sft_corpus(world, 400 if quick else 6000), data)
    steps = steps or (20 if quick else 300)
    setup: dict[str, Any] = {
        "backbone": str(backbone),
        "seed": seed,
        "steps": steps,
        "quick": quick,
    }
    eval_cfg = EvalConfig(**(QUICK if quick else {}))
    methods: dict[str, dict] = {}
    base, tok = load_backbone(backbone)
    methods["base"] = evaluate(base, tok, world, eval_cfg)
    for method in METHODS:
        setup[method] = _train(method, backbone, data, root, steps, seed)
        model = load_adapter(load_backbone(backbone)[0], str(root / method / "adapter"))
        methods[method] = evaluate(model, tok, world, eval_cfg)
    setup["seconds"] = round(time.time() - start, 1)
    results = {"methods": methods, "setup": setup}
    (root / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(write_markdown(results, root / "results.md"))
    write_plots(results, root)
    return results
