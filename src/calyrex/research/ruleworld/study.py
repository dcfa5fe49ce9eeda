"""The gap to LoRA, studied: CALYREX variants at LoRA's parameter budget on RuleWorld.

Every variant trains on the demo's SFT corpus with the demo's batch, learning rate (chosen on
training loss, ``demo.LR``) and seed, and is evaluated with the checkers on held-out rule
combinations, multi-turn sessions, the attack families (with their no-attack control), the
password game and task accuracy with no system prompt (forgetting). Nothing here is chosen on
an evaluation suite: the variants are fixed before the run and reported side by side.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ...eval.intervals import over_seeds
from .corpus import sft_corpus, write_jsonl
from .demo import TRAINING, DemoConfig, cpu_seconds
from .evaluate import EvalConfig, evaluate
from .train import DEVICE, DTYPE, backbone_dir, backbone_name, train_adapter
from .world import World

SUITES = ("rules", "multiturn", "families", "tensortrust", "tasks")


@dataclass(frozen=True)
class Variant:
    """One trained adapter of the study (``block``: more :class:`CalyrexConfig` fields)."""

    name: str
    method: str = "calyrex"
    placement: str = "late8th"
    layers: tuple[int, ...] | None = None
    block: tuple[tuple[str, Any], ...] = ()
    steps: int | None = None  # None: the demo's
    note: str = ""


# 12 layers: late8th = 9-11, mid8th = 5-7, every4 = 3, 7, 11; each 3 blocks of ~292k parameters
# (876k in all; attention-only: 12 × 73k; the gate adds 800 per block)
VARIANTS = (
    Variant("late8th", note="the paper's default"),
    Variant("lora", method="lora", note="parameter-matched to late8th"),
    Variant("mid8th", placement="mid8th"),
    Variant("every4", placement="every4"),
    Variant("mixed", layers=(5, 8, 11), note="one block mid-depth, one late, one last"),
    Variant("late8th-init", block=(("init_from_host", True),), note="W_Q/W_K/W_V from the host"),
    Variant("late8th-300steps", steps=300, note="300 steps, cosine schedule"),
    Variant("lora-300steps", method="lora", steps=300, note="LoRA trained as long"),
    Variant(
        "six-narrow",
        layers=(1, 3, 5, 7, 9, 11),
        block=(("intermediate_size", 144),),
        note="twice the blocks, a third of the FFN width",
    ),
    Variant(
        "attention-only",
        placement="all",
        block=(("ffn", False), ("head_dim", 38)),
        note="cross-attention without FFN in all 12 layers (head_dim 38: the same budget)",
    ),
    Variant(
        "late8th-gate",
        block=(("host_gate", True),),
        note="not the paper's method: also re-weights the host's attention to non-system tokens",
    ),
)
EVAL = dict(n=64, family_n=32, turns=6, max_new_tokens=24)
QUICK_EVAL = dict(n=4, family_n=2, turns=2, max_new_tokens=8)


def _command(names: list[str] | None, quick: bool, train_seeds: list[int] | None = None) -> str:
    flags = ["--quick"] if quick else []
    flags += ["--variants", *names] if names else []
    flags += ["--train-seeds", *map(str, train_seeds)] if train_seeds else []
    return " ".join(["python", "scripts/ruleworld_study.py", *flags])


def _steps(v: Variant, cfg: DemoConfig, quick: bool) -> int:
    if v.steps is None:
        return cfg.steps
    return 2 * v.steps // TRAINING.steps if quick else v.steps


def _reuse(out: Path) -> dict | None:
    """The record of an adapter already trained into ``out`` (an interrupted study resumes)."""
    if not (out / "summary.json").exists() or not (out / "adapter").is_dir():
        return None
    summary = json.loads((out / "summary.json").read_text())
    return {
        "trainable_params": summary["trainable_params"],
        "train_loss": round(summary["train_loss"], 4),
        "train_seconds": summary["seconds"],
        "reused": True,  # trained by an earlier run into this directory: its CPU time is not here
    }


def _over_seeds(infos: list[dict]) -> dict:
    """One variant's training record over its seeds: mean loss (each seed's kept), total time."""
    if len(infos) == 1:
        return infos[0]
    losses = [i["train_loss"] for i in infos]
    return {
        "trainable_params": infos[0]["trainable_params"],
        "train_loss": round(sum(losses) / len(losses), 4),
        "train_losses": losses,
        "train_seconds": round(sum(i["train_seconds"] for i in infos), 1),
        **({"reused": True} if any(i.get("reused") for i in infos) else {}),
    }


def run_study(
    out: str,
    names: list[str] | None = None,
    quick: bool = False,
    seed: int = 0,
    train_seeds: list[int] | None = None,
) -> dict:
    """Train and evaluate the base and every variant in ``names`` (default: all; a variant
    already trained into ``OUT/NAME`` is reused, not retrained); write ``OUT/study.json``
    (``{"kind", "command", "seconds", "cpus", "load_average", "results"}``). With
    ``train_seeds`` each variant is trained once per seed (``OUT/NAME`` for ``seed``,
    ``OUT/NAME-seedS`` for the others; the world, corpus and evaluation sets stay ``seed``'s) and
    every rate is the mean over the seeds with the wider of the seeds' t-interval and the
    examples' own (:func:`~calyrex.eval.intervals.over_seeds`); ``per_seed`` keeps each."""
    from ...adapters.loading import load_model

    torch.set_num_threads(min(torch.get_num_threads(), 2))
    start, root = time.time(), Path(out)
    root.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    variants = [v for v in VARIANTS if names is None or v.name in names]
    seeds = list(train_seeds) if train_seeds else [seed]
    cfg = replace(TRAINING, steps=2, conversations=40) if quick else TRAINING
    world = World(seed)
    path = backbone_dir(root, quick, seed, None)
    data = root / "sft.jsonl"
    write_jsonl(sft_corpus(world, cfg.conversations), data)
    eval_cfg = EvalConfig(**(QUICK_EVAL if quick else EVAL), suites=SUITES, progress=False)
    base, tok = load_model(str(path), None, DTYPE, DEVICE)
    methods = {"base": evaluate(base, tok, world, eval_cfg)}
    trained: dict[str, dict] = {}
    setup = {
        "backbone": backbone_name(path),
        "seed": seed,
        "sft_conversations": cfg.conversations,
        "steps": cfg.steps,
        "batch_size": cfg.batch_size,
        "lr": cfg.lr,
        "train_seeds": seeds,
        "eval": {k: v for k, v in vars(eval_cfg).items() if k != "progress"},
        "variants": trained,
    }
    per_seed: dict[str, dict] = {}

    def save() -> dict:  # after every variant: an interrupted study keeps what it measured
        entry = {
            "kind": "study",
            "command": _command(names, quick, train_seeds),
            "seconds": round(time.time() - start, 1),
            "cpu_seconds": cpu_seconds(),
            "cpus": torch.get_num_threads(),
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
            "results": {"methods": methods, "setup": setup}
            | ({"per_seed": per_seed} if len(seeds) > 1 else {}),
        }
        (root / "study.json").write_text(json.dumps(entry, indent=2) + "\n")
        return entry

    entry = save()
    for v in variants:
        infos, runs = [], {}
        for s in seeds:
            where = root / (v.name if s == seed else f"{v.name}-seed{s}")
            infos.append(
                _reuse(where)
                or train_adapter(
                    v.method,
                    path,
                    data,
                    where,
                    replace(cfg, steps=_steps(v, cfg, quick)),
                    s,
                    placement=v.placement,
                    layers=list(v.layers) if v.layers else None,
                    block=dict(v.block) or None,
                )
            )
            model, _ = load_model(str(path), str(where / "adapter"), DTYPE, DEVICE)
            runs[str(s)] = evaluate(model, tok, world, eval_cfg)
        trained[v.name] = {**asdict(v), **_over_seeds(infos)}
        methods[v.name] = over_seeds(list(runs.values())) if len(runs) > 1 else runs[str(seed)]
        per_seed[v.name] = runs
        entry = save()
    return entry
