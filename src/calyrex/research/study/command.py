"""``calyrex study real``: the paper's comparison on a real LLM (``ruleworld``: on RuleWorld)."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any, Literal

from .real import STAGES, preset, run_study

WHICH = ("real", "ruleworld")
Which = Literal[WHICH]  # the positional argument's choices


def study(
    which: Which,
    /,
    model: str = "smollm2",
    quick: bool = False,
    out: str | None = None,
    stages: list[str] | None = None,
    runs: list[str] | None = None,
    v1: bool = False,
) -> dict[str, Any]:
    """Run a study: `real` (base, CALYREX, parameter-matched LoRA and ParallelMLP on a real model,
    3 seeds, real benchmarks) or `ruleworld`. Resumable: rerun the same command to continue.

    --quick: every stage on a few examples. --stages mix analyze train eval report (a subset;
    also rescore: score stored replies again). --runs base lora-s0 …: only these models.
    --v1: the first study's small suites (results/study-real-MODEL). Writes OUT/report.md and
    OUT/report.json. Default OUT: results/study-real-MODEL-v2, committed without its weights
    (.gitignore: adapters, checkpoints, the mix files), so a later session resumes it;
    --quick: runs/study-WHICH-quick.

    Args:
        which: real (a real model and real benchmarks) or ruleworld
        model: the real study's model: a registered name (smollm2)
        quick: every stage on a few examples (CI)
        out: the study's directory (default: results/study-real-MODEL-v2; --quick:
            runs/study-WHICH-quick)
        stages: a subset of mix analyze sweep train eval report, or rescore (score stored replies
            again)
        runs: only these models (base, lora-s0, ...)
        v1: the first study's recipe and small suites (results/study-real-MODEL)
    """
    if which not in WHICH:
        raise ValueError(f"unknown study {which!r}; choose from {', '.join(WHICH)}")
    if out is None:
        full = f"results/study-real-{model}" + ("" if v1 else "-v2")
        out = full if which == "real" and not quick else None
        out = out or f"runs/study-{which}{'-quick' if quick else ''}"
    if which == "ruleworld":
        from ..ruleworld.study import run_study as ruleworld_study

        return ruleworld_study(out, quick=quick)
    cfg = replace(preset("quick" if quick else "v1" if v1 else "full"), model=model)
    command = " ".join(["calyrex", "study", *sys.argv[2:]]) if sys.argv[1:2] == ["study"] else ""
    return run_study(cfg, out, tuple(stages or STAGES), command=command, only=tuple(runs or ()))
