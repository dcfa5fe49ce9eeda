"""The placement ablation on RuleWorld (``calyrex ablate`` without ``--model``).

One CALYREX adapter per preset, trained on the demo's SFT corpus with the same steps and seed,
each evaluated with the rule and attack checkers. Tabulated by :mod:`calyrex.research.ablation`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ...core.placement import placement_layers
from ...eval.intervals import value
from .corpus import sft_corpus, write_jsonl
from .demo import DEFAULT, QUICK, TRAINING
from .evaluate import EvalConfig, evaluate
from .train import DEVICE, DTYPE, backbone_dir, train_adapter
from .world import World

SUITES = ("rules", "injection", "tasks")
COLUMNS = ("rule_adherence_single", "rule_adherence_heldout", "injection_success", "task_accuracy")


def ablate_ruleworld(
    presets: list[str],
    root: Path,
    seed: int = 0,
    backbone: str | None = None,
    quick: bool = False,
    steps: int | None = None,
) -> tuple[dict[str, dict], dict]:
    """Rows ``{"base" | preset: {"layers", "trainable_params", metric: value}}`` and the setup."""
    from ...adapters.loading import load_model

    torch.set_num_threads(min(torch.get_num_threads(), 2))
    cfg = QUICK if quick else TRAINING
    cfg = dataclasses.replace(cfg, steps=steps or cfg.steps)
    world = World(seed)
    path = backbone_dir(root, quick, seed, backbone)
    data = root / "sft.jsonl"
    write_jsonl(sft_corpus(world, cfg.conversations), data)
    small = (QUICK if quick else DEFAULT).eval or {}  # the default demo's samples
    eval_cfg = EvalConfig(**{**small, "suites": SUITES})
    base, tok = load_model(str(path), None, DTYPE, DEVICE)
    num_layers = base.config.num_hidden_layers
    rows = {"base": {"layers": [], **_metrics(base, tok, world, eval_cfg)}}
    for preset in presets:
        info = train_adapter("calyrex", path, data, root / preset, cfg, seed, placement=preset)
        model, _ = load_model(str(path), str(root / preset / "adapter"), DTYPE, DEVICE)
        rows[preset] = {"layers": placement_layers(preset, num_layers), **info}
        rows[preset].update(_metrics(model, tok, world, eval_cfg))
    setup = {"backbone": str(path), "seed": seed, "steps": cfg.steps, "lr": cfg.lr["calyrex"]}
    return rows, {**setup, "quick": quick}


def _metrics(model: object, tok: object, world: World, cfg: EvalConfig) -> dict:
    """The table's numbers (bare rates) and, under ``intervals``, each column's n and ci95."""
    metrics = evaluate(model, tok, world, cfg)
    return {**value(metrics), "intervals": {k: metrics[k] for k in COLUMNS}}
