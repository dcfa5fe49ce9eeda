"""The ``calyrex eval`` and ``calyrex report`` subcommands (their signatures are their flags)."""

from __future__ import annotations

from pathlib import Path

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
    dtype: str = "auto",
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
    --baseline) and plots, written to OUT/report.md and OUT/*.png."""
    from .report import report

    print(report([Path(r) for r in runs], Path(out), baseline))
