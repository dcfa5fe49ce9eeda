"""How a model is evaluated: every due suite (``calyrex eval``, resumable mid-suite), then its
held-out attack items; and the finished suites scored again from their replies (``rescore``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import StudyConfig, Suite
from .data import eval_data
from .log import say, write
from .plan import due, finished, heldout_dir, runs


def eval_run(
    cfg: StudyConfig, run: str, adapter: Path | None, out: Path, first: bool, heldout: bool
) -> None:
    """Every suite of ``cfg`` on one model (loaded once, only if a suite is left to do);
    ``first``: the base or an arm's first seed (``first_seed_only`` suites run only there);
    ``heldout``: then the held-out attack items (:mod:`.heldout`), unless they ran already."""
    from ...core.adapter_io import is_peft_adapter
    from ...eval.bench import EvalConfig
    from ...eval.generate import Generator
    from ...eval.runner import evaluate

    cache: dict[str, Any] = {}
    merged = cfg.merge_lora and adapter is not None and is_peft_adapter(adapter)

    def model() -> tuple[Any, Any]:
        if "model" not in cache:
            from ...adapters.loading import load_model

            cache["model"], cache["tok"] = load_model(
                cfg.model, adapter and str(adapter), cfg.precision, merge_lora=cfg.merge_lora
            )
        return cache["model"], cache["tok"]

    def loader_for(suite: Suite) -> Callable[[], tuple[Any, Any]]:
        def load() -> tuple[Any, Any]:
            model()
            batch = suite.batch_size or cfg.eval_batch_size
            gen = Generator(cache["model"], cache["tok"], suite.max_new_tokens, batch)
            return gen, None

        return load

    info = {"label": run, "model": cfg.model, "adapter": adapter and str(adapter)}
    for suite in due(cfg, first):
        if finished(out, run, suite) is not None:
            continue
        where = out / "eval" / run / suite.key
        say(f"eval {run} {suite.key}")
        config = EvalConfig(
            data=eval_data(out),
            limit=suite.limit,
            max_new_tokens=suite.max_new_tokens,
            batch_size=suite.batch_size or cfg.eval_batch_size,
            system_prompt=suite.system_prompt,
            shots=list(suite.shots) if suite.shots else None,
        )
        if suite.name == "msj_hijack":
            share_right_codes(cfg, out, run, config)
        run_info = info | ({"merge_lora": True} if merged else {})
        evaluate([suite.name], where, config, loader=loader_for(suite), run_info=run_info)
    if heldout and not (heldout_dir(out, run) / "cases.json").is_file():
        from .heldout import run_heldout

        say(f"heldout {run}")
        run_heldout(cfg, out, run, model, info | {"merge_lora": merged})


def eval_done(cfg: StudyConfig, out: Path, run: str, first: bool) -> bool:
    return all(finished(out, run, suite) is not None for suite in due(cfg, first))


def rescore(cfg: StudyConfig, out: Path) -> list[str]:
    """Score every finished generation suite of every run again from its stored replies with the
    current scorers (the record and its details rewritten, the replies untouched); returns the
    ``RUN/SUITE`` keys rescored."""
    from ...eval.bench import Context, EvalConfig
    from ...eval.data import replies_file
    from ...eval.runner import make_benchmark, run_one

    done = []
    for run, _, _ in runs(cfg):
        for suite in cfg.suites:
            where = out / "eval" / run / suite.key
            replies = replies_file(where, suite.name)
            bench = make_benchmark(suite.name)
            if finished(out, run, suite) is None or not replies.is_file() or hasattr(bench, "run"):
                continue
            stored = json.loads((where / "run.json").read_text())["config"]
            ctx = Context(EvalConfig(**stored), where)
            if suite.name == "msj_hijack":
                share_right_codes(cfg, out, run, ctx.config)
            record = run_one(bench, ctx, str(replies))
            cost = {
                k: v
                for k, v in finished(out, run, suite).items()
                if k in ("seconds", "seconds_this_attempt", "tokens")
            }
            write(where / f"{suite.name}.json", record | cost)  # what generating them cost
            done.append(f"{run}/{suite.key}")
    say(f"rescore: {len(done)} suites scored again from their replies")
    return done


def share_right_codes(cfg: StudyConfig, out: Path, run: str, config: Any) -> int:
    """The many-shot suite's right-code replies not yet made are taken from the same run's Tensor
    Trust row for the *identical* prompt (a defence with its own code, no shots:
    ``msj_hijack.conversation`` is ``tensortrust.chat`` there), with its grant
    log-probability, marked ``borrowed_from``, rather than computed twice. Called before the
    suite runs, and by :func:`rescore` (the first study's replies predate the suite asking each
    sample's right code). The grant verdict reads only the reply's first line, which both suites'
    reply lengths hold. Measured on the base, calyrex-late8th-s0 and lora-s0, which computed both:
    100 of 100 replies identical, log-probabilities within 2.3e-5 (the batch they ran in).
    ``config``: the suite's ``EvalConfig``. Returns how many were taken."""
    from ...eval.bench import Context
    from ...eval.data import append_row, read_rows, replies_file
    from ...eval.runner import make_benchmark

    suite = next(s for s in cfg.suites if s.name == "msj_hijack")
    where = out / "eval" / run / suite.key
    tt = next((s for s in cfg.suites if s.name == "tensortrust"), None)
    source = tt and replies_file(out / "eval" / run / tt.key, "tensortrust")
    if source is None or not source.is_file():
        return 0
    where.mkdir(parents=True, exist_ok=True)
    file = replies_file(where, "msj_hijack")
    have = {r["id"] for r in read_rows(file)} if file.is_file() else set()
    codes = {r["id"]: r for r in read_rows(source)}
    items = make_benchmark("msj_hijack").load(config.data.get("msj_hijack"), Context(config, where))
    added = 0
    for item in items:
        row = codes.get(f"hijacking:{item['sample_id']}:access")
        if item.get("access") and item["id"] not in have and row and not row.get("skipped"):
            kept = {k: row[k] for k in ("response", "logprobs", "target_tokens") if k in row}
            append_row(file, {"id": item["id"], **kept, "borrowed_from": "tensortrust"})
            added += 1
    if added:
        say(f"eval {run} msj_hijack: {added} right-code replies from tensortrust (same prompts)")
    return added
