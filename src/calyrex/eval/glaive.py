"""Glaive function calling (``glaiveai/glaive-function-calling-v2``), a held-out slice.

Data: rows with ``system`` ("SYSTEM: ... functions ...") and ``chat`` ("USER: ...
ASSISTANT: <functioncall> {"name": ..., "arguments": '{...}'} <|endoftext|> FUNCTION
RESPONSE: ..."). The slice is the last ``limit or 1000`` rows of the train split (the dataset has
no test split; keep them out of training). Each conversation with a function call is cut at
its first call: the model sees the system message and the turns before it and must make it.

Metrics: ``call_name_acc`` (function name exact match), ``args_exact_match`` (name and the
parsed argument object both equal) and ``json_valid`` (the reply holds a call whose payload
parses as JSON with a string name and an object of arguments), over conversations with a
call. Calls are read from ``<functioncall> {...}`` (Glaive's format, whose arguments are a
single-quoted JSON string), ``<tool_call>{...}</tool_call>`` or a bare JSON object with a name.

Role mapping: ``system`` (its "SYSTEM: " prefix removed) is the system message; USER turns are
user messages, ASSISTANT turns assistant messages.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .bench import Benchmark, Context, Item, Row, answered
from .data import DataFormatError, read_rows, require

TURN = re.compile(r"(?:^|\n)\s*(USER|ASSISTANT|FUNCTION RESPONSE):\s?")
ROLES = {"USER": "user", "ASSISTANT": "assistant"}


def split_chat(chat: str) -> list[tuple[str, str]]:
    """(speaker, text) turns of a Glaive ``chat`` string, end-of-text markers removed."""
    parts = TURN.split(chat)
    return [
        (speaker, text.replace("<|endoftext|>", "").strip())
        for speaker, text in zip(parts[1::2], parts[2::2], strict=True)
    ]


def _json_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end <= start:
        return None
    payload = text[start : end + 1]
    # Glaive writes "arguments": '{...}' — a single-quoted JSON string
    payload = re.sub(r"(\"arguments\"\s*:\s*)'(.*)'(\s*})$", r"\1\2\3", payload, flags=re.DOTALL)
    try:
        obj = json.loads(payload)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def parse_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of the function call in ``text``, or None when there is no valid one."""
    for marker in ("<functioncall>", "<tool_call>"):
        if marker in text:
            text = text.split(marker, 1)[1].split("</tool_call>", 1)[0]
            break
    obj = _json_object(text)
    if obj is None or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return None
    return (obj["name"], args) if isinstance(args, dict) else None


def to_item(index: int, row: dict[str, Any]) -> Item | None:
    """The conversation up to the first function call, and that call; None without a call."""
    turns = split_chat(row["chat"])
    if not turns:
        raise DataFormatError(f"glaive row {index}: no USER/ASSISTANT turns in 'chat'")
    system = re.sub(r"^\s*SYSTEM:\s*", "", row["system"]).strip()
    messages = [{"role": "system", "content": system}] if system else []
    for speaker, text in turns:
        if speaker == "ASSISTANT" and "<functioncall>" in text:
            call = parse_call(text)
            if call is None or not messages or messages[-1]["role"] != "user":
                return None
            return {"id": str(index), "messages": messages, "name": call[0], "arguments": call[1]}
        if speaker not in ROLES:
            return None
        messages.append({"role": ROLES[speaker], "content": text})
    return None


def load_glaive(data: str | None, limit: int | None = None) -> list[Item]:
    n = limit or 1000
    if data and Path(data).exists():
        rows = read_rows(data)
    else:
        from datasets import load_dataset

        name = (data or "hf:glaiveai/glaive-function-calling-v2").removeprefix("hf:")
        rows = [dict(r) for r in load_dataset(name, split=f"train[-{n}:]")]
    rows = rows[-n:]
    require(rows, ("system", "chat"), data or "glaive-function-calling-v2")
    items = [to_item(i, r) for i, r in enumerate(rows)]
    return [it for it in items if it is not None]


class GlaiveFC(Benchmark):
    name = "glaive_fc"
    source = "glaiveai/glaive-function-calling-v2 (train, last 1000 rows)"

    def load(self, data: str | None, ctx: Context) -> list[Item]:
        return load_glaive(data, ctx.config.limit)

    def conversation(self, item: Item, ctx: Context) -> list[dict[str, str]]:
        return item["messages"]

    def score(self, items: list[Item], rows: list[Row], ctx: Context) -> dict[str, Any]:
        require(rows, ("id", "response"), "glaive_fc responses")
        pairs, skipped, missing = answered(self, items, rows)
        calls = [(item, parse_call(text)) for item, text in pairs]
        valid = [call is not None for _, call in calls]
        name_ok = [call is not None and call[0] == item["name"] for item, call in calls]
        args_ok = [call == (item["name"], item["arguments"]) for item, call in calls]
        n = len(valid)
        metrics = {
            "call_name_acc": sum(name_ok) / n if n else None,
            "args_exact_match": sum(args_ok) / n if n else None,
            "json_valid": sum(valid) / n if n else None,
            "n": n,
        }
        return {"metrics": metrics, "skipped": skipped, "missing": missing}
