"""SFT → DPO on RuleWorld: does preference training help CALYREX more than it helps LoRA?

Per training seed and method (CALYREX ``late8th``, parameter-matched LoRA and ParallelMLP): the
study's SFT adapter (:data:`~calyrex.research.ruleworld.demo.TRAINING`: the demo's corpus, steps, batch
and per-method learning rate), then DPO from it on :mod:`~calyrex.research.ruleworld.preference`'s pairs
(the reference is the base: the adapters switched off), each evaluated on the same suites and
examples. The DPO learning rate is each method's SFT rate times :attr:`DpoConfig.lr_scale`, so
no method gets a rate tuned for it.

Resumable: ``OUT/seed-S/METHOD/{sft,dpo}.json`` are the finished units (with the adapters beside
them while the run needs them); a rerun skips what is there. ``OUT/dpo-study.json`` gathers them.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ...cli.fields import options_from
from ...eval.intervals import over_seeds, t_interval
from .corpus import sft_corpus, write_jsonl, write_rows
from .demo import METHODS, TRAINING, DemoConfig
from .evaluate import EvalConfig, evaluate
from .preference import preference_corpus
from .train import DEVICE, DTYPE, backbone_dir, train_adapter
from .world import World

# what the comparison reads (↓: an attack's success, lower is better)
METRICS = {
    "rule_adherence_heldout": "held-out rules ↑",
    "injection_success": "injection ↓",
    "attack_families_success": "attack families ↓",
    "manyshot_success": "many-shot ↓",
    "hijack_success": "hijack ↓",
    "extraction_success": "extraction ↓",
    "access_granted_rightful": "rightful access ↑",
    "task_accuracy": "tasks ↑",
}
LOWER_IS_BETTER = {k for k, v in METRICS.items() if v.endswith("↓")}
SUITES = ("rules", "injection", "families", "manyshot", "tensortrust", "tasks")


@dataclass(frozen=True)
class DpoConfig:
    sft: DemoConfig = field(default_factory=lambda: TRAINING)
    pairs: int = 1600
    steps: int = 50
    batch_size: int = 16
    lr_scale: float = 0.1  # DPO's learning rate: each method's SFT rate times this
    beta: float = 0.1
    seeds: tuple[int, ...] = (0, 1, 2)
    eval: dict[str, Any] = field(
        default_factory=lambda: dict(
            n=64, family_n=24, shot_n=24, shots=(4, 16), max_new_tokens=24, suites=SUITES
        )
    )


FULL = DpoConfig()
QUICK = DpoConfig(
    sft=replace(TRAINING, conversations=200, steps=3, batch_size=8),
    pairs=64,
    steps=2,
    batch_size=4,
    seeds=(0,),
    eval=dict(n=4, family_n=2, shot_n=2, shots=(2,), max_new_tokens=8, suites=SUITES),
)


def _say(msg: str) -> None:
    print(f"[ruleworld dpo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _evaluate(backbone: Path, adapter: Path, world: World, cfg: DpoConfig) -> dict[str, Any]:
    from ...adapters.loading import load_model

    model, tok = load_model(str(backbone), str(adapter), DTYPE, DEVICE)
    metrics = evaluate(model, tok, world, EvalConfig(**cfg.eval, progress=False))
    return {k: metrics[k] for k in METRICS}


def _dpo(method: str, backbone: Path, sft: Path, data: Path, out: Path, cfg: DpoConfig, seed: int):
    from ...training import TrainConfig, train

    return train(
        TrainConfig(
            model=str(backbone),
            method=method,
            objective="dpo",
            init_adapter=str(sft / "adapter"),
            reference="base",  # the committed RuleWorld DPO study's reference
            beta=cfg.beta,
            data=str(data),
            out=str(out),
            max_steps=cfg.steps,
            lr=cfg.sft.lr[method] * cfg.lr_scale,
            batch_size=cfg.batch_size,
            max_length=cfg.sft.max_length,
            seed=seed,
            system_pool=[],
            save_steps=10**9,
            logging_steps=max(1, cfg.steps // 10),
            precision="fp32",
            progress=False,
        )
    )


def run_seed(root: Path, backbone: Path, world: World, cfg: DpoConfig, seed: int) -> None:
    """Both stages of every method for one training seed (finished units are kept)."""
    sft_data, pairs = root / "sft.jsonl", root / "preference.jsonl"
    if not sft_data.is_file():
        write_jsonl(sft_corpus(world, cfg.sft.conversations), sft_data)
    if not pairs.is_file():
        write_rows(preference_corpus(world, cfg.pairs), pairs)
    for method in METHODS:
        where = root / f"seed-{seed}" / method
        for stage in ("sft", "dpo"):
            record = where / f"{stage}.json"
            if record.is_file():
                continue
            _say(f"seed {seed} {method} {stage}")
            if stage == "sft":
                info = train_adapter(method, backbone, sft_data, where / "sft", cfg.sft, seed)
            else:
                result = _dpo(method, backbone, where / "sft", pairs, where / "dpo", cfg, seed)
                info = {
                    "train_loss": round(result.final_loss, 4),
                    "train_seconds": round(result.seconds, 1),
                }
            info["metrics"] = _evaluate(backbone, where / stage / "adapter", world, cfg)
            _write(record, info)


def _gain(dpo: list[dict], sft: list[dict]) -> dict[str, Any]:
    """DPO's rate minus SFT's, per seed; mean with a t-interval over the seeds (None for one)."""
    diffs = [d["rate"] - s["rate"] for d, s in zip(dpo, sft, strict=True)]
    return _mean_interval(diffs)


def _mean_interval(values: list[float]) -> dict[str, Any]:
    """A signed difference over seeds: its mean and t-interval (not clipped to [0, 1])."""
    m, half = t_interval(values)
    ci95 = None if half is None else [round(m - half, 4), round(m + half, 4)]
    return {"mean": round(m, 4), "ci95": ci95, "seeds": values}


def gather(root: Path, cfg: DpoConfig) -> dict[str, Any]:
    """``OUT/dpo-study.json``: each method's SFT and DPO rates over the finished seeds, DPO's
    gain per method, and CALYREX's gain minus each baseline's (paired by seed)."""
    seeds = [
        s
        for s in cfg.seeds
        if all((root / f"seed-{s}" / m / "dpo.json").is_file() for m in METHODS)
    ]
    read = {
        (s, m, st): json.loads((root / f"seed-{s}" / m / f"{st}.json").read_text())
        for s in seeds
        for m in METHODS
        for st in ("sft", "dpo")
    }
    out: dict[str, Any] = {"config": json.loads(json.dumps(asdict(cfg))), "seeds": seeds}
    # every finished unit, also of seeds still running (shown while no seed is complete)
    out["units"] = {
        f"s{s}-{m}-{st}": json.loads(f.read_text())["metrics"]
        for s in cfg.seeds
        for m in METHODS
        for st in ("sft", "dpo")
        if (f := root / f"seed-{s}" / m / f"{st}.json").is_file()
    }
    if not seeds:
        return out
    rows, gains = {}, {}
    for m in METHODS:
        for st in ("sft", "dpo"):
            rows[f"{m}-{st}"] = {
                k: over_seeds([read[s, m, st]["metrics"][k] for s in seeds]) for k in METRICS
            }
        gains[m] = {
            k: _gain(
                [read[s, m, "dpo"]["metrics"][k] for s in seeds],
                [read[s, m, "sft"]["metrics"][k] for s in seeds],
            )
            for k in METRICS
        }
    versus = {
        b: {
            k: _mean_interval(
                [
                    x - y
                    for x, y in zip(gains["calyrex"][k]["seeds"], gains[b][k]["seeds"], strict=True)
                ]
            )
            for k in METRICS
        }
        for b in METHODS
        if b != "calyrex"
    }
    seconds = {
        f"{m}-{st}": round(sum(read[s, m, st]["train_seconds"] for s in seeds) / len(seeds), 1)
        for m in METHODS
        for st in ("sft", "dpo")
    }
    out.update(rows=rows, gains=gains, calyrex_gain_minus=versus, train_seconds=seconds)
    return out


@dataclass
class DpoStudyOptions:
    """``calyrex ruleworld-dpo``'s options."""

    out: str
    """The study's directory (resumed when it exists)."""
    quick: bool = False
    """A CI-sized study."""
    seeds: list[int] | None = None
    """Training seeds (default: the preset's)."""


@options_from(DpoStudyOptions)
def run_dpo_study(out: str | Path, **options: Any) -> dict:
    """Run (or resume) RuleWorld's SFT → DPO study: per seed and method an SFT adapter, then DPO
    from it, each evaluated; results in ``out/dpo-study.json``.

    Args:
        out: the study's directory (:attr:`DpoStudyOptions.out`).
        options: the other :class:`DpoStudyOptions` fields.
    """
    opts = DpoStudyOptions(str(out), **options)
    cfg = QUICK if opts.quick else FULL
    if opts.seeds:
        cfg = replace(cfg, seeds=tuple(opts.seeds))
    root = Path(out)
    world = World(0)
    backbone = backbone_dir(root, opts.quick, 0, None)
    for seed in cfg.seeds:
        run_seed(root, backbone, world, cfg, seed)
    result = gather(root, cfg)
    _write(root / "dpo-study.json", result)
    _say(f"done: seeds {result['seeds']} in {root / 'dpo-study.json'}")
    return result


def _write(path: Path, data: Any) -> None:
    from ...eval.data import write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)
