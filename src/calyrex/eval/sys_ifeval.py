"""S-IFEval from RealGuardrails (Mu et al. 2025, github.com/normster/RealGuardrails): IFEval's
541 prompts with the verifiable constraint moved into the system message.

Data (default ``<shared>/real/system/realguardrails/ifeval/sys_ifeval.jsonl``; ``--data
sys_ifeval=FILE``): rows with IFEval's ``key``, ``prompt`` (the original single-turn prompt),
``instruction_id_list`` and ``kwargs``, plus ``messages``: a system turn holding the constraint
and a user turn holding the task. ``--limit N`` takes the first N rows.

Role mapping: ``messages`` as given (``--system-prompt`` is not used: the system turn is the
benchmark). Scoring is IFEval's official checkers through :func:`calyrex.eval.ifeval.
score_responses` on the row's ``instruction_id_list`` / ``kwargs`` / ``prompt``, so the metric
names are IFEval's: prompt- and instruction-level accuracy, strict and loose, with
``n_prompts`` and ``n_instructions``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .bench import Benchmark, Context, Item, Row, answered
from .data import DataFormatError, read_rows, require, shared_data_dir
from .ifeval import FIELDS, score_responses


def default_file() -> Path:
    return shared_data_dir() / "real" / "system" / "realguardrails" / "ifeval" / "sys_ifeval.jsonl"


def load_sys_ifeval(data: str | None, limit: int | None = None) -> list[Item]:
    file = Path(data) if data else default_file()
    rows = read_rows(file)
    require(rows, (*FIELDS, "messages"), str(file))
    for row in rows:
        if [m["role"] for m in row["messages"]] != ["system", "user"]:
            raise DataFormatError(f"{file}: key {row['key']} is not a system + user conversation")
    rows = rows[:limit] if limit else rows
    return [{**r, "id": str(r["key"])} for r in rows]


class SysIFEval(Benchmark):
    name = "sys_ifeval"
    source = "RealGuardrails evals/ifeval/inputs/sys_ifeval.jsonl (IFEval, constraint in system)"

    def load(self, data: str | None, ctx: Context) -> list[Item]:
        return load_sys_ifeval(data, ctx.config.limit)

    def conversation(self, item: Item, ctx: Context) -> list[dict[str, str]]:
        return item["messages"]

    def score(self, items: list[Item], rows: list[Row], ctx: Context) -> dict[str, Any]:
        require(rows, ("id", "response"), "sys_ifeval responses")
        pairs, skipped, missing = answered(self, items, rows)
        scored = [item for item, _ in pairs]
        metrics, details = score_responses(scored, [text for _, text in pairs], ctx.config.seed)
        return {"metrics": metrics, "skipped": skipped, "missing": missing, "details": details}
