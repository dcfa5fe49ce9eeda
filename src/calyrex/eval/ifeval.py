"""IFEval (google/IFEval): generation plus offline scoring identical to the official scorer.

Scoring calls lm-eval's own IFEval code (``lm_eval.tasks.ifeval.utils.process_results``, the
port of Google's checkers) once per input row in file order after ``random.seed(seed)``, as the
reference scores were made; two rows (keys 1122, 1129) check a random letter upstream, so the
seed matters for them only. ``langdetect`` (the English checks) samples too: it is seeded with
the same seed, so a response scores the same in every process. NLTK's ``punkt_tab`` comes from :mod:`calyrex.eval.punkt`.

Role mapping: the IFEval prompt is the user message; ``--system-prompt`` (optional) the system
message.

Pairing responses to prompts (``--responses``): by ``key`` when rows carry one, else by exact
prompt text. Upstream's GPT-4 responses carry an older prompt for key 2785 (google-research
issues #2259, #3430); a prompt left unpaired is then paired with the response at the same row
position when that response is unpaired too and the files have equally many rows, with a
warning — it is scored against the current prompt, as the official scores were.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

from .bench import Benchmark, Context, Item, Row
from .data import read_rows, require

FIELDS = ("key", "prompt", "instruction_id_list", "kwargs")
METRICS = (
    "prompt_level_strict_acc",
    "inst_level_strict_acc",
    "prompt_level_loose_acc",
    "inst_level_loose_acc",
)


def load_ifeval(data: str | None, limit: int | None = None) -> list[Item]:
    """``input_data.jsonl`` rows (a file), or the ``google/IFEval`` train split (hub)."""
    if data and not data.startswith("hf:"):
        rows = read_rows(data)
        source = data
    else:
        from datasets import load_dataset

        source = (data or "hf:google/IFEval")[3:]
        rows = [dict(r) for r in load_dataset(source, split="train")]
    require(rows, FIELDS, source)
    return rows[:limit] if limit else rows


def pair_responses(items: list[Item], rows: list[Row]) -> list[Row | None]:
    """The response row of each item (None when it has none); see the module docstring."""
    if rows and all("key" in r for r in rows):
        by_key = {str(r["key"]): r for r in rows}
        return [by_key.get(str(item["key"])) for item in items]
    require(rows, ("prompt", "response"), "responses")
    by_prompt: dict[str, int] = {}
    for j, r in enumerate(rows):
        by_prompt.setdefault(r["prompt"], j)
    used: set[int] = set()
    paired: list[int | None] = []
    for item in items:
        j = by_prompt.get(item["prompt"])
        paired.append(j)
        if j is not None:
            used.add(j)
    if len(rows) == len(items):
        for i, j in enumerate(paired):
            if j is None and i not in used:
                warnings.warn(
                    f"IFEval key {items[i]['key']}: no response with this exact prompt; paired with "
                    f"the response at the same row position (its prompt differs)",
                    stacklevel=2,
                )
                paired[i] = i
                used.add(i)
    return [rows[j] if j is not None else None for j in paired]


def score_responses(
    items: list[Item], responses: list[str | None], seed: int = 0
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Official IFEval metrics and per-prompt results (the official ``eval_results`` fields)."""
    from .punkt import ensure_punkt_tab

    ensure_punkt_tab()
    import langdetect
    from lm_eval.tasks.ifeval.utils import process_results

    random.seed(seed)
    langdetect.DetectorFactory.seed = seed  # its detector samples; garbage text flips otherwise
    details = []
    for item, response in zip(items, responses, strict=True):
        if response is None:
            continue
        doc = {k: item[k] for k in FIELDS}
        r = process_results(doc, [response])
        details.append(
            {
                "key": item["key"],
                "prompt": item["prompt"],
                "follow_all_instructions_strict": r["prompt_level_strict_acc"],
                "follow_instruction_list_strict": r["inst_level_strict_acc"],
                "follow_all_instructions_loose": r["prompt_level_loose_acc"],
                "follow_instruction_list_loose": r["inst_level_loose_acc"],
            }
        )
    return aggregate(details), details


def aggregate(details: list[dict[str, Any]]) -> dict[str, Any]:
    """Prompt-level means and instruction-level (flattened) means, as lm-eval aggregates them."""
    if not details:
        return {m: None for m in METRICS}
    out: dict[str, Any] = {}
    for mode in ("strict", "loose"):
        prompts = [d[f"follow_all_instructions_{mode}"] for d in details]
        inst = [x for d in details for x in d[f"follow_instruction_list_{mode}"]]
        out[f"prompt_level_{mode}_acc"] = sum(prompts) / len(prompts)
        out[f"inst_level_{mode}_acc"] = sum(inst) / len(inst)
    out["n_prompts"] = len(details)
    out["n_instructions"] = sum(len(d["follow_instruction_list_strict"]) for d in details)
    return out


def conversation(prompt: str, system_prompt: str | None) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*head, {"role": "user", "content": prompt}]


class IFEval(Benchmark):
    name = "ifeval"
    source = "google/IFEval (input_data.jsonl)"

    def load(self, data: str | None, ctx: Context) -> list[Item]:
        return load_ifeval(data, ctx.config.limit)

    def row_id(self, row: Row) -> str:
        return str(row["key"])

    def conversation(self, item: Item, ctx: Context) -> list[dict[str, str]]:
        return conversation(item["prompt"], ctx.config.system_prompt)

    def fields(self, item: Item) -> Row:
        return {"key": item["key"], "prompt": item["prompt"]}

    def score(self, items: list[Item], rows: list[Row], ctx: Context) -> dict[str, Any]:
        paired = pair_responses(items, rows)
        skipped = [
            str(it["key"]) for it, r in zip(items, paired, strict=True) if r and r.get("skipped")
        ]
        missing = [str(it["key"]) for it, r in zip(items, paired, strict=True) if r is None]
        responses = [r["response"] if r and not r.get("skipped") else None for r in paired]
        metrics, details = score_responses(items, responses, ctx.config.seed)
        return {"metrics": metrics, "skipped": skipped, "missing": missing, "details": details}
