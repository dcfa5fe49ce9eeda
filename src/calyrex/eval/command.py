"""The ``calyrex eval`` and ``calyrex report`` subcommands (their flags: the dataclasses below,
and :class:`~calyrex.eval.bench.EvalConfig`'s fields)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backbones.precision import Dtype
from ..cli.fields import options_from, split_options
from . import SUITES
from .bench import EvalConfig


def parse_data(data: list[str] | None, suites: list[str]) -> dict[str, str]:
    """``NAME=PATH`` pairs; a bare PATH is allowed when one suite runs."""
    out: dict[str, str] = {}
    for entry in data or []:
        name, sep, path = entry.partition("=")
        if sep and any(name == s or name.startswith(f"{s}_") for s in suites):
            out[name] = path  # NAME or NAME_extra (e.g. long_ifeval_context)
        elif len(suites) == 1:
            out[suites[0]] = entry
        else:
            raise ValueError(f"--data {entry!r}: use NAME=PATH when several suites run")
    return out


@dataclass
class EvalOptions:
    """``calyrex eval``'s options besides the runners' own (:class:`EvalConfig`)."""

    suite: str = field(
        default="paper",
        metadata={
            "help": "paper (every benchmark of the paper calyrex runs), or suite names "
            f"separated by commas: {', '.join(SUITES)}."
        },
    )
    out: str = "eval_out"
    """Where each suite's OUT/NAME.json, replies and summary go."""
    model: str | None = None
    """Base model: a name calyrex knows (smollm2, ruleworld), a local directory or a hub id."""
    adapter: str | None = None
    """A saved adapter (calyrex, LoRA or ParallelMLP) loaded onto --model."""
    responses: str | None = None
    """Score these replies (JSONL) instead of generating; one suite."""
    data: list[str] | None = None
    """NAME=PATH per suite whose data is not the default (a bare PATH for one suite)."""
    judge: str | None = None
    """An OpenAI-compatible endpoint (http://HOST/v1) for the judged suites."""
    judge_model: str | None = None
    """The judge's model name, or hf:MODEL for a local judge."""
    dtype: Dtype = "auto"
    """auto (bf16 where this machine runs it fast, else fp32) or a torch dtype name."""
    device: str | None = None
    """cpu or cuda[:N]; default: cuda when there is one."""
    label: str | None = None
    """The run's name in reports (default: the model and adapter)."""
    merge_lora: bool = False
    """Fold a LoRA adapter into the weights first (PEFT merge_and_unload): the same model
    without LoRA's extra matmuls in every layer; other methods are kept as they are."""
    cases: str | None = None
    """Your own test cases (JSONL) instead of the suites (calyrex.eval.cases)."""


@options_from(EvalOptions, EvalConfig)
def eval_command(**options: Any) -> int:
    """Evaluate a model (or score --responses FILE.jsonl) on benchmarks; writes OUT/NAME.json.

    --suite paper|NAME,...  --data NAME=PATH ...  --judge http://HOST/v1 --judge-model M | hf:MODEL.
    Finished benchmarks in OUT are not rerun. Exit status 1 when a benchmark was skipped.
    --cases FILE.jsonl: run your own test cases instead (calyrex.eval.cases) → OUT/cases.json.
    --shots 4 16 64: the shot counts of msj_hijack (default 4 16 64).

    Args:
        options: :class:`EvalOptions` and :class:`EvalConfig` fields, one flag each.
    """
    mine, shared = split_options(options, EvalOptions, EvalConfig)
    opts, config = EvalOptions(**mine), EvalConfig(**shared)
    model = opts.model
    if opts.cases:
        from .cases import cases_command

        if opts.responses:
            raise ValueError("--cases generates replies: give --model, not --responses")
        return cases_command(
            opts.cases, opts.out, model, opts.adapter, config.max_new_tokens, config.batch_size,
            opts.dtype, opts.device, opts.merge_lora,
        )  # fmt: skip
    from .runner import evaluate_model, resolve_suites

    names = resolve_suites(opts.suite)
    if opts.responses and len(names) != 1:
        raise ValueError("--responses scores one benchmark: give a single --suite NAME")
    if not opts.responses and not model:
        raise ValueError("give --model (to generate) or --responses FILE.jsonl (to score)")
    if model:
        from ..backbones.resolve import resolve_model

        resolve_model(model)  # a bad name fails here, before any benchmark starts
    config = replace(config, data=parse_data(opts.data, names))
    summary = evaluate_model(
        names, opts.out, config, model, opts.adapter, opts.responses, opts.judge,
        opts.judge_model, opts.dtype, opts.device, opts.label, opts.merge_lora,
    )  # fmt: skip
    return int(any(s["status"] != "ok" for s in summary["suites"].values()))


@dataclass
class ReportOptions:
    """``calyrex report``'s options."""

    runs: list[str]
    """Eval output directories (each with results.json), one column each."""
    baseline: str | None = None
    """The run every other run's delta is taken against (default: the first)."""
    out: str = "eval_report"
    """The directory for report.md and the plots."""


@options_from(ReportOptions)
def report_command(**options: Any) -> None:
    """Compare runs side by side: a markdown table (rows benchmarks, columns runs, deltas vs
    --baseline) and plots, written to OUT/report.md and OUT/*.png."""
    from .report import report

    opts = ReportOptions(**options)
    print(report([Path(r) for r in opts.runs], Path(opts.out), opts.baseline))
