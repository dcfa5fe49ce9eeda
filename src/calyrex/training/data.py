"""Chat SFT data: load, normalise, validate and encode conversations (issue 3).

Accepted rows, from JSONL files or any ``datasets`` source:
- OpenAI ``{"messages": [{"role", "content"}, ...]}``;
- ShareGPT ``{"conversations": [{"from", "value"}, ...]}``;
- pairs ``{"prompt", "response" | "completion", "system"?}``;
- instructions (Alpaca, Dolly, GPTeacher) ``{"instruction", "input" | "context"?,
  "output" | "response", "system"?}``: the input or context follows the instruction.

A source is ``PATH_OR_HUB_ID[:SPLIT][#N]`` (``#N`` keeps the first N rows); several sources,
comma-separated or as a list, form a mixture. Labels cover assistant contents only (every
assistant turn). Conversations without a system message get one from a seeded pool.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..span.chat import IGNORE_INDEX, SystemPromptTruncatedError, encode_one

SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
}
DEFAULT_SYSTEM_POOL = (
    "You are a helpful assistant.",
    "You are a helpful, honest and harmless assistant. Answer clearly and concisely.",
    "You are a knowledgeable assistant. Follow the user's instructions carefully.",
    "You are an AI assistant. Think step by step and give accurate answers.",
    "You are a friendly assistant who explains things simply.",
)


class DataError(ValueError):
    """Bad training data; the message names the source and row."""


@dataclass
class EncodeStats:
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {"kept": self.kept, "skipped": dict(self.skipped)}


def normalise(row: Any, where: str) -> list[dict[str, str]]:
    """One row in any accepted format → OpenAI messages; ``where`` names it in errors."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if "messages" in row:
        messages = row["messages"]
        ok = isinstance(messages, list) and all(
            isinstance(m, dict) and {"role", "content"} <= set(m) for m in messages
        )
        if not ok:
            raise DataError(f"{where}: 'messages' must be a list of {{'role', 'content'}} objects")
        return [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    if "conversations" in row:
        out = []
        for turn in row["conversations"] or []:
            if (
                not isinstance(turn, dict)
                or turn.get("from") not in SHAREGPT_ROLES
                or "value" not in turn
            ):
                raise DataError(
                    f"{where}: ShareGPT turn {turn!r} needs 'from' in {sorted(SHAREGPT_ROLES)} and 'value'"
                )
            out.append({"role": SHAREGPT_ROLES[turn["from"]], "content": str(turn["value"])})
        return out
    answer = row.get("response", row.get("completion"))
    if "prompt" in row and answer is not None:
        system = [{"role": "system", "content": str(row["system"])}] if row.get("system") else []
        return [
            *system,
            {"role": "user", "content": str(row["prompt"])},
            {"role": "assistant", "content": str(answer)},
        ]
    answer = row.get("output", row.get("response"))
    if "instruction" in row and answer is not None:
        extra = row.get("input") or row.get("context") or ""
        prompt = f"{row['instruction']}\n\n{extra}" if str(extra).strip() else row["instruction"]
        return normalise({"prompt": prompt, "response": answer, "system": row.get("system")}, where)
    raise DataError(
        f"{where}: unknown row format with keys {sorted(row)}; expected messages, conversations, "
        "prompt/response or instruction/output"
    )


def _parse_source(source: str) -> tuple[str, str, int | None]:
    source, _, limit = source.partition("#")
    path, split = source, "train"
    if ":" in source and not Path(source).exists():
        path, split = source.rsplit(":", 1)
    return path, split, int(limit) if limit else None


def _read_jsonl(path: Path) -> Iterator[tuple[Any, str]]:
    if path.stat().st_size == 0:
        raise DataError(f"{path} is empty")
    with open(path, encoding="utf-8") as f:
        if path.suffix == ".json":
            rows = json.load(f)
            yield from ((r, f"{path} row {i + 1}") for i, r in enumerate(rows))
            return
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line), f"{path}:{number}"
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{number}: malformed JSON ({err.msg})") from err


def read_rows(source: str) -> Iterator[tuple[Any, str]]:
    """(row, where) pairs of one source: a local JSON/JSONL file or a ``datasets`` source."""
    path, split, limit = _parse_source(source)
    local = Path(path)
    if local.suffix in (".jsonl", ".json") or local.is_file():
        if not local.is_file():
            raise DataError(f"data file {local} does not exist")
        rows = _read_jsonl(local)
    else:
        from datasets import load_dataset

        dataset = load_dataset(path, split=split)
        rows = ((r, f"{path}[{split}] row {i}") for i, r in enumerate(dataset))
    for i, item in enumerate(rows):
        if limit is not None and i >= limit:
            return
        yield item


def load_conversations(
    sources: str | Sequence[str],
    system_pool: Sequence[str] | None = DEFAULT_SYSTEM_POOL,
    seed: int = 0,
    skip_invalid: bool = False,
    stats: EncodeStats | None = None,
) -> list[list[dict[str, str]]]:
    """Read, normalise and validate every conversation before any compute is spent."""
    sources = [s.strip() for s in sources.split(",")] if isinstance(sources, str) else list(sources)
    rng = random.Random(seed)
    stats = stats or EncodeStats()
    out = []
    for source in sources:
        for row, where in read_rows(source):
            messages = normalise(row, where)
            if not any(m["role"] == "assistant" for m in messages):
                if skip_invalid:
                    stats.skipped["no_assistant_turn"] += 1
                    continue
                raise DataError(
                    f"{where}: conversation has no assistant turn (nothing to learn from)"
                )
            if messages[0]["role"] != "system" and system_pool:
                messages = [{"role": "system", "content": rng.choice(list(system_pool))}, *messages]
            out.append(messages)
    if not out:
        raise DataError(f"no usable conversations in {sources}")
    return out


def encode_conversations(
    tokenizer: Any,
    conversations: Sequence[Sequence[dict[str, str]]],
    max_length: int,
    on_truncate: str = "drop",
    stats: EncodeStats | None = None,
) -> list[dict[str, list[int]]]:
    """Encode with labels; a cut system prompt is dropped and counted, or an error (``on_truncate``)."""
    if on_truncate not in ("drop", "error"):
        raise ValueError(f"on_truncate must be 'drop' or 'error', not {on_truncate!r}")
    stats = stats or EncodeStats()
    rows = []
    for i, conv in enumerate(conversations):
        try:
            row = encode_one(tokenizer, conv, max_length=max_length)
        except SystemPromptTruncatedError as err:
            if on_truncate == "error":
                raise DataError(
                    f"conversation {i}: {err} (use on_truncate='drop' to skip such samples)"
                ) from err
            stats.skipped["system_prompt_truncated"] += 1
            continue
        if all(label == IGNORE_INDEX for label in row["labels"]):
            stats.skipped["no_assistant_tokens_after_truncation"] += 1
            continue
        rows.append(row)
    stats.kept = len(rows)
    if not rows:
        raise DataError(f"every conversation was skipped: {stats.summary()}")
    return rows
