"""The ``calyrex eval`` and ``calyrex report`` subcommands (their signatures are their flags)."""

from __future__ import annotations

from pathlib import Path

from ..backbones.precision import Dtype
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


def eval_command(
    suite: str = "paper",
    out: str = "eval_out",
    model: str | None = None,
    adapter: str | None = None,
    responses: str | None = None,
    data: list[str] | None = None,
    judge: str | None = None,
    judge_model: str | None = None,
    system_prompt: str | None = None,
    limit: int | None = None,
    max_new_tokens: int = 1024,
    batch_size: int = 8,
    dtype: Dtype = "auto",
    device: str | None = None,
    label: str | None = None,
    seed: int = 0,
    cases: str | None = None,
    shots: list[int] | None = None,
) -> int:
    """Evaluate a model (or score --responses FILE.jsonl) on benchmarks; writes OUT/NAME.json.

    --suite paper|NAME,...  --data NAME=PATH ...  --judge http://HOST/v1 --judge-model M | hf:MODEL.
    Finished benchmarks in OUT are not rerun. Exit status 1 when a benchmark was skipped.
    --cases FILE.jsonl: run your own test cases instead (calyrex.eval.cases) → OUT/cases.json.
    --shots 4 16 64: the shot counts of msj_hijack (default 4 16 64).

    Args:
        suite: paper (every benchmark of the paper calyrex runs), or suite names separated by
            commas: {suites}.
        out: Where each suite's OUT/NAME.json, replies and summary go.
        model: Base model: a name calyrex knows (smollm2, ruleworld), a local directory or a
            hub id.
        adapter: A saved adapter (calyrex, LoRA or ParallelMLP) loaded onto --model.
        responses: Score these replies (JSONL) instead of generating; one suite.
        data: NAME=PATH per suite whose data is not the default (a bare PATH for one suite).
        judge: An OpenAI-compatible endpoint (http://HOST/v1) for the judged suites.
        judge_model: The judge's model name, or hf:MODEL for a local judge.
        system_prompt: The system prompt the lm-eval capability tasks run under.
        limit: At most this many items per suite.
        max_new_tokens: The longest greedy reply (a suite reads less where its verdict does).
        batch_size: Prompts per batch (the attack suites: a budget of batch_size × 256 padded
            tokens).
        dtype: {dtypes} (auto: bf16 where this machine runs it fast, else fp32).
        device: cpu or cuda[:N]; default: cuda when there is one.
        label: The run's name in reports (default: the model and adapter).
        seed: Seed of the sampled parts of a suite (IFEval's loose variants, data order).
        cases: Your own test cases (JSONL) instead of the suites (calyrex.eval.cases).
        shots: msj_hijack's shot counts.
    """
    if cases:
        from .cases import cases_command

        if responses:
            raise ValueError("--cases generates replies: give --model, not --responses")
        return cases_command(cases, out, model, adapter, max_new_tokens, batch_size, dtype, device)
    from .runner import evaluate_model, resolve_suites

    names = resolve_suites(suite)
    if responses and len(names) != 1:
        raise ValueError("--responses scores one benchmark: give a single --suite NAME")
    if not responses and not model:
        raise ValueError("give --model (to generate) or --responses FILE.jsonl (to score)")
    if model:
        from ..backbones.resolve import resolve_model

        resolve_model(model)  # a bad name fails here, before any benchmark starts
    config = EvalConfig(
        data=parse_data(data, names),
        limit=limit,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        system_prompt=system_prompt,
        seed=seed,
        shots=shots,
    )
    summary = evaluate_model(
        names, out, config, model, adapter, responses, judge, judge_model, dtype, device, label
    )
    return int(any(s["status"] != "ok" for s in summary["suites"].values()))


def report_command(runs: list[str], baseline: str | None = None, out: str = "eval_report") -> None:
    """Compare runs side by side: a markdown table (rows benchmarks, columns runs, deltas vs
    --baseline) and plots, written to OUT/report.md and OUT/*.png.

    Args:
        runs: eval output directories (each with results.json), one column each
        baseline: the run every other run's delta is taken against (default: the first)
        out: the directory for report.md and the plots
    """
    from .report import report

    print(report([Path(r) for r in runs], Path(out), baseline))


def _help() -> None:
    """The suite and dtype lists in ``eval_command``'s help, from their one definition."""
    from ..backbones.precision import PRECISIONS
    from . import SUITES

    doc = eval_command.__doc__ or ""
    eval_command.__doc__ = doc.replace("{suites}", ", ".join(SUITES)).replace(
        "{dtypes}", " | ".join(PRECISIONS)
    )


_help()
