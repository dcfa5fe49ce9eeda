"""Long-IFEval: IFEval prompts with distractor context of 1k–32k tokens, strict accuracy per length.

Built here (the paper names no release): for each IFEval prompt and each length L in
:data:`LENGTHS`, a distractor passage of L tokens (the model's tokenizer) is cut from a neutral
corpus at an offset fixed by the prompt's key. Scoring is IFEval's official scorer
(:mod:`calyrex.eval.ifeval`) per length.

Data: ``--data long_ifeval=input_data.jsonl`` (IFEval prompts; default ``google/IFEval``) and
``--data long_ifeval_context=FILE.txt`` (the distractor corpus; default WikiText-103's test
split, ``Salesforce/wikitext``). A prompt that does not fit the model's window is a recorded skip
(``skipped`` per length), never a zero.

Role mapping: the IFEval prompt is the system message (the rule to keep over a long context);
the user message is the distractor passage followed by a request to respond to the system
message.

Responses format: ``key``, ``length``, ``response``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .bench import Benchmark, Context, Item, Row, curve
from .data import require
from .ifeval import load_ifeval, score_responses

LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
REQUEST = "Now respond to the request in the system message."


def label(length: int) -> str:
    return f"{length // 1024}k"


def load_corpus(source: str | None) -> str:
    if source and Path(source).is_file():
        return Path(source).read_text(encoding="utf-8")
    from datasets import load_dataset

    rows = load_dataset("Salesforce/wikitext", "wikitext-103-raw-v1", split="test")
    return "".join(r["text"] for r in rows)


class Distractors:
    """Passages of exactly ``length`` corpus tokens, at a per-key offset (deterministic)."""

    def __init__(self, tokenizer: Any, corpus: str) -> None:
        self.tokenizer = tokenizer
        self.ids = tokenizer(corpus, add_special_tokens=False)["input_ids"]
        if not self.ids:
            raise ValueError("the Long-IFEval distractor corpus is empty")

    def passage(self, key: int, length: int) -> str:
        ids = self.ids
        while len(ids) < 2 * length:
            ids = ids + ids  # a short corpus is repeated
        start = (int(key) * 7919) % (len(ids) - length)
        return self.tokenizer.decode(ids[start : start + length], skip_special_tokens=True)


def conversation(prompt: str, passage: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": prompt},
        {"role": "user", "content": f"{passage}\n\n{REQUEST}"},
    ]


class LongIFEval(Benchmark):
    name = "long_ifeval"
    source = "built from google/IFEval + a distractor corpus (WikiText-103 test by default)"

    def load(self, data: str | None, ctx: Context) -> list[Item]:
        prompts = load_ifeval(data, ctx.config.limit)
        return [{**p, "length": n, "id": f"{p['key']}@{n}"} for n in LENGTHS for p in prompts]

    def row_id(self, row: Row) -> str:
        return f"{row['key']}@{row['length']}"

    def conversation(self, item: Item, ctx: Context) -> list[dict[str, str]]:
        if getattr(self, "distractors", None) is None:
            corpus = load_corpus(ctx.config.data.get("long_ifeval_context"))
            self.distractors = Distractors(ctx.generator.tokenizer, corpus)
        return conversation(item["prompt"], self.distractors.passage(item["key"], item["length"]))

    def fields(self, item: Item) -> Row:
        return {"key": item["key"], "length": item["length"]}

    def score(self, items: list[Item], rows: list[Row], ctx: Context) -> dict[str, Any]:
        require(rows, ("key", "length", "response"), "long_ifeval responses")
        by_id = {self.row_id(r): r for r in rows}
        metrics: dict[str, Any] = {}
        per_length: dict[str, Any] = {}
        for length in LENGTHS:
            group = [it for it in items if it["length"] == length]
            found = [by_id.get(it["id"]) for it in group]
            answers = [r["response"] if r and not r.get("skipped") else None for r in found]
            skipped = [
                it["id"] for it, r in zip(group, found, strict=True) if r and r.get("skipped")
            ]
            if not any(a is not None for a in answers):
                per_length[label(length)] = {"skipped": len(skipped), "n": 0}
                continue
            m, _ = score_responses(group, answers, ctx.config.seed)
            per_length[label(length)] = {**m, "skipped": len(skipped)}
            metrics[f"prompt_level_strict_acc@{label(length)}"] = m["prompt_level_strict_acc"]
            metrics[f"inst_level_strict_acc@{label(length)}"] = m["inst_level_strict_acc"]
        scored = [n for n in LENGTHS if f"prompt_level_strict_acc@{label(n)}" in metrics]
        accuracy = [metrics[f"prompt_level_strict_acc@{label(n)}"] for n in scored]
        plot = curve(scored, accuracy, "distractor tokens", "prompt-level strict accuracy", "log")
        return {
            "metrics": metrics,
            "per_length": per_length,
            "curves": {"long_ifeval_accuracy_vs_length": plot},
        }
