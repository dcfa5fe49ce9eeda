"""What every benchmark runner provides, and the context a run gives it.

A runner loads the benchmark's items from its real file format, turns items into response rows
with a model (``generate``), and scores rows (``score``). Response rows are also the format of
``calyrex eval --responses FILE.jsonl``: the benchmark's own prompt fields plus ``response``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .generate import Generator, Skip

Item = dict[str, Any]
Row = dict[str, Any]


class NeedsModel(ValueError):
    """The benchmark cannot score ``--responses`` alone (it needs the model itself)."""


@dataclass
class EvalConfig:
    """Options shared by all runners; ``calyrex eval`` takes one flag per field."""

    # suite name → file or dataset id (calyrex eval --data NAME=PATH fills it)
    data: dict[str, str] = field(default_factory=dict, metadata={"cli": False})
    limit: int | None = None
    """At most this many items per suite, the first ones (smoke runs)."""
    max_new_tokens: int = 1024
    """The longest greedy reply (a suite reads less where its verdict does)."""
    batch_size: int = 8
    """Prompts per batch (the attack suites: a budget of batch_size × 256 padded tokens)."""
    system_prompt: str | None = None
    """The system prompt the lm-eval capability tasks run under (benchmarks whose prompts
    carry no system message)."""
    seed: int = 0
    """Seed of the sampled parts of a suite (IFEval's loose variants, data order)."""
    shots: list[int] | None = None
    """The many-shot suites' shot counts (msj_hijack; default: each suite's own, 4 16 64)."""


@dataclass
class Context:
    config: EvalConfig
    out: Path
    generator: Generator | None = None
    judge: Any = None  # a calyrex.eval.judge.Judge, or None
    lm: Any = None  # the lm-eval model, for harness tasks
    reader: Any = None  # a calyrex.eval.prefill.Reader over the generator, made when needed
    clock: Any = None  # the running suite's calyrex.eval.runner.SuiteClock


class Benchmark:
    """Base class of a runner. Subclasses set ``name`` and implement the three methods."""

    name: ClassVar[str]
    needs_judge: ClassVar[bool] = False
    source: ClassVar[str] = ""  # where the real data lives (documentation and default loader)

    def load(self, data: str | None, ctx: Context) -> list[Item]:
        raise NotImplementedError

    def row_id(self, row: Row) -> str:
        return str(row["id"])

    def unit(self, item: Item) -> str:
        """The scoring unit an item belongs to: the items one per-item score is computed from
        together (a Tensor Trust defence's attack and right-code items; SEP's two conditions of
        one row). Paired comparisons resample units."""
        return item_id(item)

    def conversation(self, item: Item, ctx: Context) -> list[dict[str, str]]:
        """The chat prompt of a single-turn item (role mapping documented per runner)."""
        raise NotImplementedError

    def fields(self, item: Item) -> Row:
        """The prompt fields a response row carries (what ``row_id`` reads)."""
        return {"id": item["id"]}

    def targets(self, item: Item) -> dict[str, str]:
        """Fixed replies whose log-probabilities are scored on the item's prompt, by name (the
        continuous, paired scores; :mod:`calyrex.eval.prefill`). None by default."""
        return {}

    def new_tokens(self, item: Item, ctx: Context) -> int:
        """How long a greedy reply the item's verdict reads (at most ``max_new_tokens``)."""
        return ctx.config.max_new_tokens

    def generate(self, items: list[Item], ctx: Context) -> Iterator[Row]:
        """Single-turn default: one greedy reply per item, in batches; with :meth:`targets`, the
        reply and the targets' log-probabilities from one prefill of each prompt."""
        items = self.by_length(items, ctx)
        if items and any(self.targets(it) for it in items):
            yield from self._read(items, ctx)
            return
        for chunk in batches(items, ctx.config.batch_size):
            outs = ctx.generator.chat([self.conversation(it, ctx) for it in chunk])
            for item, out in zip(chunk, outs, strict=True):
                yield response_or_skip(self.fields(item), out)

    def by_length(self, items: list[Item], ctx: Context) -> list[Item]:
        """``items`` by (reply length, prompt length), so that each chunk run and saved as it
        comes holds prompts of similar length: a batch is padded to its longest prompt, and
        sorting only within a chunk left SmolLM2's StruQ and Tensor Trust prompts 42–45 % padding.
        Rows are scored by id, so their order is free."""

        def key(it: Item) -> tuple[int, int]:
            return self.new_tokens(it, ctx), ctx.generator.prompt_length(self.conversation(it, ctx))

        return sorted(items, key=key)

    def _read(self, items: list[Item], ctx: Context) -> Iterator[Row]:
        from .prefill import Answer, Ask, Reader

        if ctx.reader is None:
            ctx.reader = Reader(ctx.generator)
        for chunk in batches(items, 4 * ctx.config.batch_size):  # rows saved as they come
            asks = [
                Ask(self.conversation(it, ctx), self.targets(it), self.new_tokens(it, ctx))
                for it in chunk
            ]
            for item, out in zip(chunk, ctx.reader.read(asks), strict=True):
                if not isinstance(out, Answer):
                    yield response_or_skip(self.fields(item), out)
                    continue
                row = {**self.fields(item), "response": out.reply, "logprobs": out.logprobs}
                yield row | {"target_tokens": out.tokens}

    def score(self, items: list[Item], rows: list[Row], ctx: Context) -> dict[str, Any]:
        raise NotImplementedError


def item_id(item: Item) -> str:
    """An item's id: its ``id``, or IFEval's ``key``."""
    return str(item["id"] if "id" in item else item["key"])


def response_or_skip(row: Row, value: str | Skip) -> Row:
    """``row`` with ``response`` set, or with ``skipped`` (the reason) for a prompt not run."""
    if isinstance(value, Skip):
        return {**row, "response": None, "skipped": value.reason}
    return {**row, "response": value}


def answered(
    bench: Benchmark, items: list[Item], rows: list[Row]
) -> tuple[list[tuple[Item, str]], list[str], list[str]]:
    """([(item, response)], skipped ids, missing ids): rows matched to items by ``row_id``."""
    by_id = {bench.row_id(r): r for r in rows}
    pairs, skipped, missing = [], [], []
    for item in items:
        row = by_id.get(item["id"])
        if row is None:
            missing.append(item["id"])
        elif row.get("skipped"):
            skipped.append(item["id"])
        else:
            pairs.append((item, row["response"]))
    return pairs, skipped, missing


def logprobs(bench: Benchmark, rows: list[Row]) -> dict[str, dict[str, float]]:
    """Row id → its targets' log-probabilities (rows generated with :meth:`Benchmark.targets`)."""
    return {bench.row_id(r): r["logprobs"] for r in rows if r.get("logprobs")}


def mean(values: list[float]) -> float | None:
    """The mean (of scores, or of flags: a rate), ``None`` for no values."""
    return sum(values) / len(values) if values else None


def curve(x: list, y: list, xlabel: str, ylabel: str, xscale: str | None = None) -> dict[str, Any]:
    """A series ``calyrex report`` plots (all runs overlaid)."""
    return {"x": x, "y": y, "xlabel": xlabel, "ylabel": ylabel, "xscale": xscale}


def batches(items: list[Item], size: int) -> Iterator[list[Item]]:
    for start in range(0, len(items), max(1, size)):
        yield items[start : start + size]
