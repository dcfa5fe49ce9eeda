"""``calyrex eval``: run benchmarks, write ``DIR/NAME.json`` per benchmark and a summary.

Resumable at two levels: a benchmark whose ``NAME.json`` says ``"status": "ok"`` is not rerun,
and generated responses are appended to ``NAME.responses.jsonl`` as they come, so an interrupted
benchmark continues where it stopped. A benchmark that cannot be scored (judge down, model
needed) is written with ``"status": "skipped"`` and its reason, and is retried next time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.attempts import Attempts
from . import PAPER, SUITES
from .bench import Benchmark, Context, EvalConfig, NeedsModel, Row
from .data import append_row, read_rows, replies_file, write_json
from .generate import new_cost
from .judge import JudgeUnavailable


def resolve_suites(spec: str) -> list[str]:
    names: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        if part == "paper":
            names += [n for n in PAPER if n not in names]
        elif part in SUITES:
            names.append(part)
        elif part:
            raise ValueError(f"unknown suite {part!r}; choose from paper, {', '.join(SUITES)}")
    return names


def make_benchmark(name: str) -> Benchmark:
    from ..core.plugins import load

    return load(SUITES[name])()


class SuiteClock(Attempts):
    """A suite's seconds over its attempts: ``NAME.clock.json`` holds the seconds spent up to its
    last saved reply, and a suite resumed from its saved replies starts from them (what an
    interrupted attempt spent after its last saved reply is redone, not counted)."""

    def __init__(self, out: Path, name: str) -> None:
        self.file = out / f"{name}.clock.json"
        resumed = replies_file(out, name).is_file() and self.file.is_file()
        super().__init__(json.loads(self.file.read_text())["seconds"] if resumed else 0.0)

    def tick(self) -> None:
        """After each saved reply."""
        write_json(self.file, {"seconds": round(self.seconds, 2)})


def _rows(bench: Benchmark, items: list[dict], ctx: Context, responses: str | None) -> list[Row]:
    """Rows from ``--responses``, or cached + newly generated (appended as they come)."""
    if responses:
        return read_rows(responses)
    cache = replies_file(ctx.out, bench.name)
    rows = read_rows(cache) if cache.is_file() else []
    done = {bench.row_id(r) for r in rows}
    pending = [it for it in items if bench.row_id(it) not in done]
    if pending:
        from tqdm.auto import tqdm

        with tqdm(total=len(pending), desc=bench.name, unit="item") as bar:
            for row in bench.generate(pending, ctx):
                append_row(cache, row)
                if ctx.clock is not None:
                    ctx.clock.tick()
                rows.append(row)
                bar.update(1)
    return rows


def run_one(bench: Benchmark, ctx: Context, responses: str | None) -> dict[str, Any]:
    """Score one benchmark; the record written to ``NAME.json``."""
    custom = getattr(bench, "run", None)
    if custom is not None:
        if responses:
            raise NeedsModel(f"{bench.name} runs inside lm-eval and cannot score --responses")
        return {"suite": bench.name, "status": "ok", **custom(ctx)}
    items = bench.load(ctx.config.data.get(bench.name), ctx)
    if not items:
        raise ValueError(f"{bench.name}: the data has no items")
    rows = _rows(bench, items, ctx, responses)
    result = bench.score(items, rows, ctx)
    details = result.pop("details", None)
    if details is not None:
        with open(ctx.out / f"{bench.name}.details.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in details)
    return {"suite": bench.name, "status": "ok", "n_items": len(items), **result}


def evaluate(
    suites: list[str],
    out: str | Path,
    config: EvalConfig,
    responses: str | None = None,
    loader: Any = None,
    judge_factory: Any = None,
    run_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``suites``; ``loader()`` gives (Generator, lm) lazily, ``judge_factory()`` the judge."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    info = {**(run_info or {}), "suites": suites, "config": config.__dict__}
    write_json(out / "run.json", info)
    ctx = Context(config, out)
    for name in suites:
        file = out / f"{name}.json"
        if file.is_file() and json.loads(file.read_text()).get("status") == "ok":
            print(f"{name}: finished earlier, not rerun ({file})")
            continue
        bench = make_benchmark(name)
        try:
            if responses is None and ctx.generator is None and loader is not None:
                ctx.generator, ctx.lm = loader()
            if bench.needs_judge and ctx.judge is None and judge_factory is not None:
                ctx.judge = judge_factory()
            before = cost(ctx)
            ctx.clock = SuiteClock(out, name)
            record = run_one(bench, ctx, responses)
            # what the suite cost, its earlier attempts' saved replies included
            record |= ctx.clock.figures(1)
            used = {k: v - before[k] for k, v in cost(ctx).items()}
            if any(used.values()):  # the suite ran the model: its token counts
                record["tokens"] = used
        except (JudgeUnavailable, NeedsModel) as err:
            record = {"suite": name, "status": "skipped", "reason": str(err)}
            print(f"{name}: skipped — {err}")
        write_json(file, record)
    return write_summary(out, info)


def cost(ctx: Context) -> dict[str, int]:
    """What ``ctx``'s model has computed so far, in its generator and lm-eval paths together."""
    total = new_cost()
    for counter in (getattr(ctx.generator, "stats", None), getattr(ctx.lm, "stats", None)):
        for key, value in (counter or {}).items():
            total[key] += value
    return total


def evaluate_model(
    suites: list[str],
    out: str | Path,
    config: EvalConfig,
    model: str | None = None,
    adapter: str | None = None,
    responses: str | None = None,
    judge: str | None = None,
    judge_model: str | None = None,
    dtype: str = "auto",
    device: str | None = None,
    label: str | None = None,
    merge_lora: bool = False,
) -> dict[str, Any]:
    """Score ``suites`` on ``model`` (+ ``adapter``, loaded by the one loader when a suite first
    needs it; a LoRA one folded into the weights with ``merge_lora``) or on the ``responses``
    file; returns the summary (also ``OUT/summary.json``):
    ``{"label", "suites": {name: {"status", "metrics", ["reason"]}}}``."""
    info = {
        "label": label or Path(adapter or model or responses or out).name,
        "model": model,
        "adapter": adapter,
        "responses": responses,
    } | ({"merge_lora": True} if merge_lora else {})

    def loader() -> tuple[Any, Any]:
        from ..adapters.loading import load_model
        from .generate import Generator

        hf_model, tok = load_model(model, adapter, dtype, device, merge_lora=merge_lora)
        return Generator(hf_model, tok, config.max_new_tokens, config.batch_size), None

    def judge_factory() -> Any:
        from .judge import make_judge

        return make_judge(judge, judge_model)

    return evaluate(suites, out, config, responses, loader if model else None, judge_factory, info)


def headline(record: dict[str, Any]) -> dict[str, Any]:
    """The scalar metrics of a benchmark record (what the summary and report show)."""
    metrics = record.get("metrics") or {}
    return {
        k: v for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }


def write_summary(out: Path, info: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {"label": info.get("label"), "suites": {}}
    for name in info["suites"]:
        file = out / f"{name}.json"
        record = json.loads(file.read_text()) if file.is_file() else {"status": "missing"}
        entry = {"status": record.get("status"), "metrics": headline(record)}
        if record.get("reason"):
            entry["reason"] = record["reason"]
        summary["suites"][name] = entry
    write_json(out / "summary.json", summary)
    lines = [
        f"# {summary['label'] or out.name}",
        "",
        "| benchmark | metric | value |",
        "|---|---|---|",
    ]
    for name, entry in summary["suites"].items():
        if entry["status"] != "ok":
            lines.append(f"| {name} | ({entry['status']}) | {entry.get('reason', '')} |")
        for metric, value in entry["metrics"].items():
            lines.append(f"| {name} | {metric} | {value:.4g} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return summary
