"""The five stages, each resumable and writing where its standalone command would:

| stage | writes | standalone |
|---|---|---|
| train | ``OUT/train/METHOD/`` (adapter, summary.json, checkpoints) | ``calyrex train --config M.yaml --out …`` |
| eval | ``OUT/eval/LABEL/NAME.json`` (LABEL: base or a method) | ``calyrex eval … --out …`` |
| analyze | ``OUT/analyze/analysis.{json,png}`` | ``calyrex analyze --model M --out …`` |
| ablate | ``OUT/ablate/ablation.{json,md,png}`` | ``calyrex ablate --model M --config …`` |
| report | ``OUT/report.{md,json}``, ``OUT/report_main.png``, ``OUT/report/`` | ``calyrex report --runs …`` |

A finished unit (a method's training with its ``summary.json``, a benchmark whose ``NAME.json``
says ok, an analysis, an ablation, a report whose inputs have not changed) is never redone; an
interrupted one continues (training from its last checkpoint, a benchmark from its appended
responses). They always run in this order, whatever order ``--stages`` names them in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import ReproduceConfig
from .launch import train_method


@dataclass
class Run:
    cfg: ReproduceConfig
    out: Path
    methods: list[str]
    suites: list[str]
    judge_factory: Callable[[], Any] | None = None  # None: cfg.eval.judge through make_judge
    skipped: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)

    def skip(self, unit: str, where: Path) -> None:
        self.skipped.append(unit)
        print(f"[reproduce] {unit}: finished earlier, skipped ({where})", flush=True)

    def start(self, unit: str) -> None:
        print(f"[reproduce] {unit}: running", flush=True)

    @property
    def labels(self) -> list[str]:
        return ["base", *self.methods]


def train_stage(run: Run) -> None:
    for method in run.methods:
        out = run.out / "train" / method
        if (out / "summary.json").is_file():
            run.skip(f"train/{method}", out)
            continue
        run.start(f"train/{method}")
        train_method(run.cfg, method, out)
        run.done.append(f"train/{method}")


def _finished(file: Path) -> bool:
    return file.is_file() and json.loads(file.read_text()).get("status") == "ok"


def _loader(model: str, adapter: str | None, spec: Any) -> Callable[[], tuple[Any, Any]]:
    def load() -> tuple[Any, Any]:
        from ...adapters.loading import load_model
        from ...eval.generate import Generator

        hf_model, tok = load_model(model, adapter, spec.dtype, None)
        return Generator(hf_model, tok, spec.max_new_tokens, spec.batch_size), None

    return load


def data_args(data: dict[str, str], suites: list[str]) -> list[str]:
    """``NAME=PATH`` for the suites that run (and their extras, e.g. ``long_ifeval_context``)."""
    ours = [k for k in data if any(k == s or k.startswith(f"{s}_") for s in suites)]
    return [f"{k}={data[k]}" for k in ours]


def eval_config(run: Run) -> Any:
    from ...eval.bench import EvalConfig
    from ...eval.command import parse_data

    spec = run.cfg.eval
    data = data_args(spec.data, run.suites)
    return EvalConfig(
        data=parse_data(data, run.suites) if data else {},
        limit=spec.limit,
        max_new_tokens=spec.max_new_tokens,
        batch_size=spec.batch_size,
        system_prompt=spec.system_prompt,
    )


def eval_stage(run: Run) -> None:
    from ...eval.judge import make_judge
    from ...eval.runner import evaluate

    spec, model = run.cfg.eval, run.cfg.model
    judges = run.judge_factory or (lambda: make_judge(spec.judge, spec.judge_model))
    for label in run.labels:
        out = run.out / "eval" / label
        if all(_finished(out / f"{s}.json") for s in run.suites):
            run.skip(f"eval/{label}", out)
            continue
        adapter = None if label == "base" else run.out / "train" / label / "adapter"
        if adapter is not None and not adapter.is_dir():
            raise FileNotFoundError(f"eval/{label} needs {adapter}: run the train stage first")
        run.start(f"eval/{label}")
        info = {"label": label, "model": model, "adapter": adapter and str(adapter)}
        loader = _loader(model, adapter and str(adapter), spec)
        summary = evaluate(run.suites, out, eval_config(run), None, loader, judges, info)
        bad = [n for n, s in summary["suites"].items() if s["status"] != "ok"]
        run.incomplete += [f"eval/{label}/{n}" for n in bad]
        run.done.append(f"eval/{label}")


def analyze_stage(run: Run) -> None:
    from ...analysis.command import analyze

    out = run.out / "analyze"
    if (out / "analysis.json").is_file():
        run.skip("analyze", out)
        return
    run.start("analyze")
    spec = run.cfg.analyze
    analyze(run.cfg.model, str(out), data=spec.data, max_examples=spec.max_examples, progress=False)
    run.done.append("analyze")


def ablate_stage(run: Run) -> None:
    from ..ablation import ablate

    out, spec = run.out / "ablate", run.cfg.ablate
    if (out / "ablation.json").is_file():
        run.skip("ablate", out)
        return
    run.start("ablate")
    ablate(
        presets=spec.presets,
        out=str(out),
        model=run.cfg.model,
        config=run.cfg.train["calyrex"],
        suite=spec.suites,
        eval_data=data_args(spec.data or run.cfg.eval.data, spec.suites.split(",")),
        steps=spec.steps,
        limit=spec.limit,
        max_new_tokens=spec.max_new_tokens,
        batch_size=spec.batch_size,
        judge=run.cfg.eval.judge,
        judge_model=run.cfg.eval.judge_model,
    )
    run.done.append("ablate")


def _fingerprint(run: Run) -> str:
    """sha256 of every file the report reads, so an unchanged report is not rebuilt."""
    digest = hashlib.sha256(json.dumps([run.labels, run.cfg.report.__dict__]).encode())
    files = sorted((run.out / "eval").glob("*/*.json")) + [
        run.out / "analyze" / "analysis.json",
        run.out / "ablate" / "ablation.json",
    ]
    for file in files:
        if file.is_file() and file.parent.name in (*run.labels, "analyze", "ablate"):
            digest.update(str(file.relative_to(run.out)).encode() + file.read_bytes())
    return digest.hexdigest()


def report_stage(run: Run) -> None:
    from .extras import extras, standalone_report
    from .render import write
    from .table import build

    inputs = _fingerprint(run)
    existing = run.out / "report.json"
    if existing.is_file() and json.loads(existing.read_text()).get("inputs") == inputs:
        run.skip("report", existing)
        return
    run.start("report")
    labels = [lb for lb in run.labels if (run.out / "eval" / lb / "summary.json").is_file()]
    if not labels:
        raise FileNotFoundError(f"no evaluations under {run.out / 'eval'}: run the eval stage")
    standalone_report(run.out, labels)
    built = build(run.out / "eval", labels, run.cfg.report, run.cfg.eval.not_run)
    print(write(run.out, run.cfg, built, extras(run.out), inputs))
    run.done.append("report")


STAGES: dict[str, Callable[[Run], None]] = {
    "train": train_stage,
    "eval": eval_stage,
    "analyze": analyze_stage,
    "ablate": ablate_stage,
    "report": report_stage,
}
