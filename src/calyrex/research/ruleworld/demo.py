"""``calyrex demo``: the paper's comparison on RuleWorld, end to end on a CPU.

Backbone (shipped, or pretrained here) → SFT corpus of rule-following conversations without any
attack → parameter-matched ``calyrex`` (late8th), ``lora`` and ``parallel_mlp`` trained through
:func:`calyrex.training.train` with the same data, steps and seed → the base and every method
evaluated with the checkers → ``results.json`` (every rate with its ``n`` and ``ci95``),
``results.md``, plots with error bars, and ``run.json`` (command, wall times, machine load).
Every number comes from the run; ``scripts/ruleworld_readme.py`` puts recorded runs in the README.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...cli.fields import options_from
from ...eval.intervals import over_seeds
from .corpus import sft_corpus, write_jsonl
from .evaluate import EvalConfig, evaluate
from .report import print_table, write_markdown, write_plots
from .train import DEVICE, DTYPE, backbone_dir, backbone_name, train_adapter
from .world import World

METHODS = ("calyrex", "lora", "parallel_mlp")
LR = {"calyrex": 1e-2, "lora": 5e-3, "parallel_mlp": 2e-2}


@dataclass
class DemoConfig:
    conversations: int = 4000  # SFT corpus size
    steps: int = 100
    batch_size: int = 16
    # each method at its own learning rate: the lowest mean training loss of a sweep on the
    # shipped backbone (README, "RuleWorld"); the data, steps, batches and seed are shared
    lr: dict[str, float] = field(default_factory=lambda: dict(LR))
    max_length: int = 256
    eval: dict[str, Any] | None = None  # EvalConfig fields
    seeds: tuple[int, ...] | None = None  # training seeds when ``--seeds`` is not given
    group_by_length: bool = False  # training batches of similar lengths (less padding)
    merge_lora: bool = False  # evaluate LoRA merged into the weights (PEFT merge_and_unload)


# the study's and the ablation's training (``--full``'s before it was sized for 30 min): 4,000
# conversations, 100 steps of batch 16, random batches
TRAINING = DemoConfig()
# ``calyrex demo``: one seed, a third of the steps, every suite, small samples (a look, not a
# verdict). Sized for 5 min on 2 idle cores: 50 steps and 32 per suite took 6.8 min idle
# (training 4.0 min, 1.37 + 2.27 + 1.16 s per step of calyrex, LoRA, ParallelMLP; 38 s per
# evaluation, a third of it the 2,048-token contexts)
DEFAULT = DemoConfig(
    conversations=2000,
    steps=36,
    eval=dict(n=24, long_n=6, family_n=12, shot_n=6, turns=6, max_new_tokens=24)
    | {"context_tokens": (0, 512, 1024)},
)
# ``--full``: 100 steps, three training seeds, >= 128 examples per suite, 64 per attack family.
# Sized for 30 min on 2 idle cores, each cut measured by ``benchmarks/ruleworld_sizing.py``:
# training batches grouped by length (random ones are mostly padding); long prompts generated
# alone (``batch_tokens``: a padded batch takes the masked attention kernel, the whole square);
# LoRA evaluated merged; contexts to 2,048 tokens, 8× the backbone's training length (a 4,096
# prompt costs more than two 2,048 ones); six turns, as the default and the study
FULL = DemoConfig(
    conversations=2000,  # 100 steps × 16 rows use 1,600
    seeds=(0, 1, 2),
    group_by_length=True,
    merge_lora=True,
    eval=dict(n=128, long_n=32, family_n=64, shot_n=22, turns=6, max_new_tokens=24)
    | {"context_tokens": (0, 512, 1024, 2048), "batch_tokens": 2048},
)
QUICK = DemoConfig(
    conversations=300,
    steps=15,
    batch_size=8,
    eval=dict(
        n=6, shots=(1, 4, 16), context_tokens=(0, 256), turns=3, max_new_tokens=12, batch_size=12
    ),
)
PRESETS = {"quick": QUICK, "default": DEFAULT, "full": FULL}


def _one_seed(root: Path, cfg: DemoConfig, world: World, path: Path, seed: int) -> tuple:
    """Train every method with training seed ``seed`` into ``root`` and evaluate each."""
    from ...adapters.loading import load_model

    data = root / "sft.jsonl"
    if not data.exists():
        write_jsonl(sft_corpus(world, cfg.conversations), data)
    eval_cfg = EvalConfig(**(cfg.eval or {}))
    methods: dict[str, dict] = {}
    trained, seconds = {}, {}
    for method in METHODS:
        info = train_adapter(method, path, data, root / method, cfg, seed)
        seconds[method] = info.pop("train_seconds")
        trained[method] = info
        model, tok = load_model(str(path), str(root / method / "adapter"), DTYPE, DEVICE)
        if cfg.merge_lora and method == "lora":
            model = model.merge_and_unload()  # the same function in plain weights: faster
        methods[method] = evaluate(model, tok, world, eval_cfg)
    return methods, trained, seconds, eval_cfg


def _command(
    preset: str, seed: int, seeds: list[int] | None, backbone: str | None, pretrain: bool
) -> str:
    """The ``calyrex demo`` command line of these options (``--out`` left out; a backbone
    directory by its name only, so that the record names no machine's paths)."""
    flags = ([f"--{preset}"] if preset != "default" else []) + (["--pretrain"] if pretrain else [])
    flags += ["--seed", str(seed)] if seed else []
    flags += ["--seeds", *map(str, seeds)] if seeds else []
    flags += ["--backbone", Path(backbone).name] if backbone else []
    return " ".join(["calyrex", "demo", *flags])


def _per_seed(infos: list[dict]) -> dict:
    """One method's training record; over several seeds, the losses as a list."""
    if len(infos) == 1:
        return infos[0]
    return {**infos[0], "train_loss": [i["train_loss"] for i in infos]}


def cpu_seconds() -> float:
    """CPU time this process has used (user + system, all threads): on a busy machine the
    wall time says little, this says what the run costs."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 1)


def run_demo(
    quick: bool = False,
    out: str = "ruleworld-demo",
    seed: int = 0,
    backbone: str | None = None,
    pretrain: bool = False,
    seeds: list[int] | None = None,
    full: bool = False,
) -> dict:
    """Train calyrex / LoRA / ParallelMLP on RuleWorld, evaluate them and the base, tabulate.

    ``results.json`` depends on the inputs only (same seed, same machine: the same bytes); the
    command and wall times go to ``run.json``. With ``seeds`` (``--full``: 0 1 2) each method is
    trained once per training seed (the world, backbone, corpus and evaluation sets stay those
    of ``seed``; the base, which no seed changes, is evaluated once) and every rate becomes the
    mean over the seeds with its spread.
    """
    from ...adapters.loading import load_model

    torch.set_num_threads(min(torch.get_num_threads(), 2))
    preset = "quick" if quick else "full" if full else "default"
    start, root, cfg = time.time(), Path(out), PRESETS[preset]
    command = _command(preset, seed, seeds, backbone, pretrain)
    seeds = seeds or (list(cfg.seeds) if cfg.seeds else None)
    root.mkdir(parents=True, exist_ok=True)
    world = World(seed)
    path = backbone_dir(root, quick, seed, backbone, fresh=pretrain)
    timing: dict[str, Any] = {"command": command}
    load = os.getloadavg()[0]  # a busy machine explains a slow run
    base, tok = load_model(str(path), None, DTYPE, DEVICE)
    base_metrics = evaluate(base, tok, world, EvalConfig(**(cfg.eval or {})))
    timing["base_eval_seconds"] = round(time.time() - start, 1)
    runs = []
    for s in seeds or [seed]:
        sub = root if not seeds else root / f"seed{s}"
        sub.mkdir(parents=True, exist_ok=True)
        methods, trained, seconds, eval_cfg = _one_seed(sub, cfg, world, path, s)
        runs.append((s, {"base": base_metrics, **methods}, trained))
        timing[f"train_seconds_seed{s}"] = seconds
    setup: dict[str, Any] = {
        "backbone": backbone_name(path),
        "seed": seed,
        "train_seeds": [s for s, _, _ in runs],
        "preset": preset,
        "quick": quick,
        "sft_conversations": cfg.conversations,
        "steps": cfg.steps,
        "batch_size": cfg.batch_size,
        "lr": cfg.lr,
        "placement": "late8th",
        "group_by_length": cfg.group_by_length,
        "merge_lora": cfg.merge_lora,
        "eval": {k: v for k, v in vars(eval_cfg).items() if k != "progress"},
        **{m: _per_seed([t[m] for _, _, t in runs]) for m in METHODS},
    }
    names = runs[0][1]
    methods = {m: over_seeds([r[m] for _, r, _ in runs]) for m in names}
    results = {"methods": methods, "setup": setup}
    if seeds:
        results["per_seed"] = {str(s): r for s, r, _ in runs}
    setup["plots"] = write_plots(methods, root)
    (root / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_markdown(results, root / "results.md")
    timing["seconds"] = round(time.time() - start, 1)
    timing["cpu_seconds"] = cpu_seconds()  # / cpus: the wall time on an idle machine, about
    timing["cpus"] = torch.get_num_threads()
    timing["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    (root / "run.json").write_text(json.dumps(timing, indent=2) + "\n")
    print_table(methods)
    print(f"results -> {root}/results.md (full table), results.json, {', '.join(setup['plots'])}")
    print(f"wall time {timing['seconds']:.0f} s -> {root}/run.json")
    return results


@dataclass
class DemoOptions:
    """``calyrex demo``'s options."""

    quick: bool = False
    """A CI-sized run (well under 2 minutes)."""
    full: bool = False
    """The claims' sizes: 100 steps, seeds 0 1 2, 128 examples per suite (about 30 min)."""
    out: str = "ruleworld-demo"
    """The directory for the adapters, the table and the plots."""
    seed: int = 0
    """The backbone's seed (another than 0 pretrains a fresh backbone)."""
    seeds: list[int] | None = None
    """Training seeds, each method trained once per seed (mean and spread reported)."""
    backbone: str | None = None
    """A saved RuleWorld backbone directory (or ruleworld: the shipped one)."""
    pretrain: bool = False
    """Pretrain a fresh backbone into OUT/backbone first (about 11 min)."""


@options_from(DemoOptions)
def demo(**options: Any) -> None:
    """Reproduce the paper's comparison on RuleWorld: train calyrex, LoRA and ParallelMLP
    (parameter-matched, same data, steps and seed), evaluate them and the base, write a table
    with 95 % intervals and plots to OUT. Uses the shipped backbone; --pretrain (or a --seed
    other than 0) pretrains a fresh one into OUT/backbone first (~11 min on 2 CPU cores);
    --backbone DIR (or `ruleworld`) uses another saved backbone; --seeds 0 1 2 trains each
    method once per training seed and reports the mean and spread. Sizes: the default (36
    steps, 24 examples per suite, one seed: a look, about 5 min on 2 idle cores); --full (100
    steps, seeds 0 1 2, 128 examples per suite, 64 per attack family, contexts to 2,048 tokens:
    the claims; about 30 min on 2 idle cores); --quick (a CI-sized run, well under 2 minutes).
    """
    opts = DemoOptions(**options)
    backbone = opts.backbone
    if backbone is not None:
        from ...backbones.resolve import resolve_model

        backbone = resolve_model(backbone)
    if opts.quick and opts.full:
        raise ValueError("give --quick or --full, not both")
    run_demo(opts.quick, opts.out, opts.seed, backbone, opts.pretrain, opts.seeds, opts.full)
