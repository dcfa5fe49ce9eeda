"""``calyrex reproduce``: train, evaluate and tabulate every method of one backbone, resumably."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...cli.fields import options_from
from .config import METHODS, ReproduceConfig, load_config
from .stages import STAGES, Run


def _suites(cfg: ReproduceConfig, spec: str | None) -> list[str]:
    from ...eval.runner import resolve_suites

    return [s for s in resolve_suites(spec or cfg.eval.suites) if s not in cfg.eval.not_run]


def make_run(
    cfg: ReproduceConfig, out: str, methods: list[str] | None, suites: str | None, judge: Any = None
) -> Run:
    methods = methods or [m for m in METHODS if m in cfg.train]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {list(METHODS)}")
    return Run(cfg, Path(out), methods, _suites(cfg, suites), judge)


@dataclass
class ReproduceOptions:
    """``calyrex reproduce``'s options (the recipe itself: :class:`ReproduceConfig`, read from
    --config)."""

    config: str | None = None
    """The paper recipe of one backbone (configs/paper/*.yaml)."""
    out: str = "runs/reproduce"
    """The directory of every stage's outputs and report.md."""
    methods: list[str] | None = None
    """The methods to train (calyrex lora parallel_mlp; default: all)."""
    suites: str | None = None
    """paper (the recipe's) or NAME,... (calyrex eval suites)."""
    stages: list[str] | None = None
    """train eval report analyze ablate (default: all, in that order)."""
    dry_run: bool = False
    """Print every command, model and data set with sizes and GPU-hours, run nothing."""
    smoke: bool = False
    """A tiny offline model and the repository's fixtures (CI)."""
    bench: str | None = None
    """A calyrex bench --json FILE whose measured rates the dry run's hours use."""


@options_from(ReproduceOptions)
def reproduce(**options: Any) -> int:
    """Reproduce the paper for one backbone: train, eval, analyze, ablate, report (OUT/report.md).

    --config configs/paper/qwen2.5-1.5b.yaml (or --smoke: a tiny offline model and fixtures),
    --methods calyrex lora parallel_mlp, --suites paper|NAME,..., --stages train eval report
    analyze ablate. Finished units are skipped, interrupted ones continue. --dry-run prints
    every command, model and data set with sizes and GPU-hours (--bench FILE: rates measured by
    `calyrex bench --json`). Exit status 1 when a benchmark could not be scored.
    """
    opts = ReproduceOptions(**options)
    out, smoke = opts.out, opts.smoke
    stages = opts.stages or list(STAGES)
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown stages {unknown}; choose from {list(STAGES)}")
    if smoke == bool(opts.config):
        raise ValueError("give --config FILE.yaml or --smoke (one of them)")
    judge = None
    if smoke:
        from .smoke import keyword_judge, smoke_config

        cfg, judge = smoke_config(Path(out) / "smoke"), (lambda: keyword_judge)
    else:
        cfg = load_config(opts.config)
    run = make_run(cfg, out, opts.methods, opts.suites, judge)
    if opts.dry_run:
        from .plan import print_plan

        print_plan(run, [s for s in STAGES if s in stages], opts.bench)
        return 0
    return execute(run, stages)


def execute(run: Run, stages: list[str]) -> int:
    """Run the chosen stages in their fixed order; print what ran and what was skipped."""
    start = time.perf_counter()
    run.out.mkdir(parents=True, exist_ok=True)
    record = {"config": run.cfg.to_dict(), "methods": run.methods, "suites": run.suites}
    text, file = json.dumps(record, indent=2) + "\n", run.out / "reproduce.json"
    if not file.is_file() or file.read_text() != text:  # a rerun of the same plan touches nothing
        file.write_text(text)
    for name, stage in STAGES.items():
        if name in stages:
            began = time.perf_counter()
            stage(run)
            print(f"[reproduce] stage {name}: {time.perf_counter() - began:.1f} s", flush=True)
    print(
        f"[reproduce] done in {time.perf_counter() - start:.1f} s: ran {len(run.done)} "
        f"({', '.join(run.done) or 'nothing'}); skipped {len(run.skipped)} finished "
        f"({', '.join(run.skipped) or 'none'})"
    )
    if run.incomplete:
        print(f"[reproduce] not scored (retried on the next run): {', '.join(run.incomplete)}")
    return int(bool(run.incomplete))
