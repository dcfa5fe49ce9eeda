"""``calyrex ablate``: the placement ablation (architecture.md, "Placement").

One CALYREX adapter per preset (or the 8 presets), trained on the same data with the same steps
and seed, each evaluated, then a table (``ablation.md``, ``ablation.json``) and a plot
(``ablation.png``) of the metrics per placement, with the base model as the first row.

- Without ``--model``: RuleWorld (its backbone, SFT corpus and checkers; CPU-sized).
- With ``--model M --data D --suite S``: any Hugging Face model, any training data
  (:func:`calyrex.training.train`, options from ``--config`` YAML) and any ``calyrex eval``
  suite — the paper's 1.5B ablation on a GPU machine. Finished presets (an adapter with its
  ``summary.json``, an eval with its results) are not redone, so an interrupted ablation resumes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from ..cli.fields import options_from
from ..core.placement import PRESETS, placement_layers


@dataclasses.dataclass
class AblateOptions:
    """``calyrex ablate``'s options; those marked "with --model" are for an ablation on a model
    other than RuleWorld, as ``calyrex eval`` and ``calyrex train`` take them."""

    presets: list[str] | None = None
    """The placement presets to compare (default: all; calyrex placements lists them)."""
    out: str = "calyrex-ablate"
    """The directory for the adapters, evaluations and ablation.{json,md,png}."""
    seed: int = 0
    """The training seed of every adapter."""
    quick: bool = False
    """A CI-sized run on RuleWorld (a few steps and examples)."""
    steps: int | None = None
    """Training steps per adapter (overrides the preset's or --config's)."""
    backbone: str | None = None
    """A saved RuleWorld backbone directory (default: the packaged one)."""
    model: str | None = None
    """Ablate on this model instead of RuleWorld (a hub id, directory or registered name)."""
    data: list[str] | None = None
    """With --model: training data (JSONL files or datasets sources)."""
    suite: str | None = None
    """With --model: the calyrex eval suites, comma-separated."""
    config: str | None = None
    """With --model: a training YAML (calyrex train's options)."""
    eval_data: list[str] | None = None
    """With --model: NAME=PATH data for the suites, as calyrex eval takes it."""
    limit: int | None = None
    """With --model: items per suite."""
    max_new_tokens: int = 512
    """With --model: the longest generated reply."""
    batch_size: int = 8
    """With --model: prompts per generation batch."""
    judge: str | None = None
    """With --model: the judge for judged suites, as calyrex eval takes it."""
    judge_model: str | None = None
    """With --model: the judge's model."""


@options_from(AblateOptions)
def ablate(**options: Any) -> dict:
    """Placement ablation: one CALYREX adapter per preset (default: all 8), same data, steps and
    seed, evaluated and tabulated into OUT/ablation.{json,md,png}. Default: RuleWorld (--quick
    for a CI-sized run, --backbone DIR). Any model: --model M --data D --suite ifeval,... with
    --config TRAIN.yaml (training options), --eval-data NAME=PATH, --limit, --judge as for
    `calyrex eval`; --steps overrides the training steps in both cases.
    """
    opts = AblateOptions(**options)
    start, root = time.time(), Path(opts.out)
    root.mkdir(parents=True, exist_ok=True)
    presets = opts.presets or list(PRESETS)
    data, suite, config, seed, steps = opts.data, opts.suite, opts.config, opts.seed, opts.steps
    from ..backbones.resolve import resolve_model

    model, backbone = (resolve_model(m) if m else None for m in (opts.model, opts.backbone))
    if model is None:
        if data or suite or config or opts.eval_data:
            raise ValueError("--data/--suite/--config/--eval-data need --model (else RuleWorld)")
        from .ruleworld.ablate import COLUMNS, ablate_ruleworld

        rows, setup = ablate_ruleworld(presets, root, seed, backbone, opts.quick, steps)
        columns = list(COLUMNS)
    else:
        if backbone or opts.quick:
            raise ValueError("--backbone and --quick are RuleWorld options; drop them with --model")
        if not (data or config) or not suite:
            raise ValueError(
                "an ablation on --model needs --data (or --config with data) and --suite (eval)"
            )
        rows, setup = ablate_model(model, data, suite, presets, root, seed, steps, config, opts)
        columns = [k for k in rows["base"] if "/" in k and not k.split("/")[1].startswith("n_")]
    results = {"placements": rows, "setup": setup, "seconds": round(time.time() - start, 1)}
    (root / "ablation.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(rows, columns)
    (root / "ablation.md").write_text(table)
    plot(rows, columns[:2], root / "ablation.png")
    print(table)
    print(f"results -> {root}/ablation.json, ablation.md, ablation.png")
    return results


def ablate_model(
    model: str,
    data: list[str] | None,
    suite: str,
    presets: list[str],
    root: Path,
    seed: int,
    steps: int | None,
    config: str | None,
    evaluation: AblateOptions,
) -> tuple[dict[str, dict], dict]:
    """Rows ``{"base" | preset: {"layers", "trainable_params", "SUITE/METRIC": value}}``."""
    from ..training import TrainConfig

    base = (
        TrainConfig.from_yaml(config, model=model, data=data, out=str(root))
        if config
        else TrainConfig(model=model, data=data, out=str(root))
    )
    base = dataclasses.replace(
        base, method="calyrex", seed=seed, max_steps=steps or base.max_steps, resume=False
    )
    for preset in presets:  # every option checked before any compute
        dataclasses.replace(base, placement=preset, layers=None).validate()
    num_layers = _num_layers(model, base)
    rows = {"base": {"layers": [], **_evaluate(model, None, suite, root / "base", evaluation)}}
    for preset in presets:
        cfg = dataclasses.replace(base, placement=preset, layers=None, out=str(root / preset))
        info = _train_once(cfg)
        adapter = str(root / preset / "adapter")
        rows[preset] = {"layers": placement_layers(preset, num_layers), **info}
        rows[preset].update(_evaluate(model, adapter, suite, root / preset / "eval", evaluation))
    setup = {
        "model": model,
        "data": base.data,
        "suite": suite,
        "seed": seed,
        "train": base.to_dict(),
    }
    return rows, setup


def _num_layers(model: str, cfg: Any) -> int:
    from transformers import AutoConfig

    hf = AutoConfig.from_pretrained(
        model, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code
    )
    return hf.get_text_config().num_hidden_layers


def _train_once(cfg: Any) -> dict[str, Any]:
    """Train one preset, or read the run that finished earlier (its ``summary.json``)."""
    from ..training import train

    summary_file = Path(cfg.out) / "summary.json"
    if not summary_file.is_file():
        train(cfg)
    summary = json.loads(summary_file.read_text())
    return {k: summary[k] for k in ("trainable_params", "train_loss", "steps")}


def _evaluate(
    model: str, adapter: str | None, suite: str, out: Path, evaluation: AblateOptions
) -> dict[str, float]:
    """An ordinary eval run (``OUT``, as ``calyrex eval`` writes it) of the base
    (``adapter=None``) or one adapter: ``{"SUITE/METRIC": value}`` from its summary."""
    from ..eval.bench import EvalConfig
    from ..eval.command import parse_data
    from ..eval.runner import evaluate_model, resolve_suites

    suites = resolve_suites(suite)
    config = EvalConfig(
        data=parse_data(evaluation.eval_data, suites),
        limit=evaluation.limit,
        max_new_tokens=evaluation.max_new_tokens,
        batch_size=evaluation.batch_size,
    )
    summary = evaluate_model(
        suites,
        out,
        config,
        model,
        adapter,
        judge=evaluation.judge,
        judge_model=evaluation.judge_model,
    )
    return {
        f"{name}/{metric}": value
        for name, entry in summary["suites"].items()
        for metric, value in entry["metrics"].items()
    }


def _cell(row: dict, column: str) -> str:
    text = f"{row.get(column, float('nan')):.3f}"
    interval = row.get("intervals", {}).get(column)  # RuleWorld rows carry their 95 % intervals
    return f"{text} [{interval['ci95'][0]:.2f}, {interval['ci95'][1]:.2f}]" if interval else text


def markdown(rows: dict[str, dict], columns: list[str]) -> str:
    """One row per placement (base first), one column per metric (with its 95 % interval)."""
    head = "| placement | layers | " + " | ".join(columns) + " |\n"
    head += "|---|---|" + "---|" * len(columns) + "\n"
    body = "".join(
        f"| {name} | {r['layers']} | " + " | ".join(_cell(r, c) for c in columns) + " |\n"
        for name, r in rows.items()
    )
    return head + body


def plot(rows: dict[str, dict], columns: list[str], path: Path) -> None:
    """Grouped bars: ``columns`` per placement."""
    import matplotlib

    from ..eval.intervals import yerr

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / max(1, len(columns))
    for i, column in enumerate(columns):
        xs = [j + (i - (len(columns) - 1) / 2) * width for j in range(len(names))]
        ys = [rows[n].get(column, 0.0) for n in names]
        # RuleWorld rows carry 95 % intervals: error bars (zero-length for rows without)
        entries = [
            rows[n].get("intervals", {}).get(column) or {"rate": y, "ci95": [y, y]}
            for n, y in zip(names, ys, strict=True)
        ]
        err = yerr(entries)
        ax.bar(xs, ys, width, yerr=err, capsize=2, label=column)
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_ylabel("score")
    ax.set_title("Placement ablation (CALYREX, same data, steps and seed)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
