"""``calyrex study real``: the paper's comparison on a real LLM (``ruleworld``: on RuleWorld)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any, Literal

from ...cli.fields import options_from, split_options
from .config import FULL, StudyConfig
from .real import STAGES, preset, run_study

WHICH = ("real", "ruleworld")
Which = Literal[WHICH]  # the positional argument's choices


@dataclass
class StudyOptions:
    """``calyrex study``'s options besides the recipe (:class:`StudyConfig`)."""

    quick: bool = False
    """Every stage on a few examples (CI)."""
    out: str | None = None
    """The study's directory (default: results/study-real-MODEL-v2; --quick:
    runs/study-WHICH-quick)."""
    stages: list[str] | None = None
    """A subset of mix analyze sweep train eval report, or rescore (score stored replies
    again), or status (where the study stands: each model's training and evaluation, the
    hours spent; reads the folder only)."""
    runs: list[str] | None = None
    """Only these models (base, lora-s0, ...)."""
    v1: bool = False
    """The first study's recipe and small suites (results/study-real-MODEL)."""


# the recipe's flags show the full study's values: --quick and --v1 start from their presets
@options_from(StudyOptions, FULL)
def study(which: Which, /, **options: Any) -> dict[str, Any]:
    """Run a study: `real` (base, CALYREX, parameter-matched LoRA and ParallelMLP on a real model,
    3 seeds, real benchmarks) or `ruleworld`. Resumable: rerun the same command to continue.

    --quick: every stage on a few examples. --stages mix analyze train eval report (a subset;
    also rescore: score stored replies again; status: where the study stands, read only).
    --runs base lora-s0 …: only these models. --v1: the first study's small suites (results/study-real-MODEL). Writes OUT/report.md and
    OUT/report.json. Default OUT: results/study-real-MODEL-v2, committed without its weights
    (.gitignore: adapters, checkpoints, the mix files), so a later session resumes it;
    --quick: runs/study-WHICH-quick. Each StudyConfig flag sets that field of the recipe over
    the preset's value (shown: the full study's; --quick and --v1 start from their own).

    Args:
        which: real (a real model and real benchmarks) or ruleworld
        options: :class:`StudyOptions` and :class:`StudyConfig` fields, one flag each.
    """
    if which not in WHICH:
        raise ValueError(f"unknown study {which!r}; choose from {', '.join(WHICH)}")
    mine, recipe = split_options(options, StudyOptions, StudyConfig)
    opts = StudyOptions(**mine)
    quick, out = opts.quick, opts.out
    cfg = replace(preset("quick" if quick else "v1" if opts.v1 else "full"), **recipe)
    if out is None:
        full = f"results/study-real-{cfg.model}" + ("" if opts.v1 else "-v2")
        out = full if which == "real" and not quick else None
        out = out or f"runs/study-{which}{'-quick' if quick else ''}"
    if which == "ruleworld":
        if recipe:
            raise ValueError(f"--{', --'.join(recipe)}: options of the real study")
        from ..ruleworld.study import run_study as ruleworld_study

        return ruleworld_study(out, quick=quick)
    command = " ".join(["calyrex", "study", *sys.argv[2:]]) if sys.argv[1:2] == ["study"] else ""
    stages, only = tuple(opts.stages or STAGES), tuple(opts.runs or ())
    return run_study(cfg, out, stages, command=command, only=only)
