"""Reading benchmark files: JSON / JSONL rows, checked fields, the shared reference data folder."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


class DataFormatError(ValueError):
    """A benchmark file that is not in the format its loader expects; the message says what is."""


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a ``.jsonl`` file (one object a line) or a ``.json`` file (a list of objects)."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file} does not exist")
    text = file.read_text(encoding="utf-8")
    try:
        if file.suffix == ".json":
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise DataFormatError(f"{file} is not valid JSON/JSONL: {err}") from err
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise DataFormatError(f"{file} must hold a list of JSON objects")
    return rows


def require(rows: Sequence[dict[str, Any]], fields: Iterable[str], source: str) -> None:
    """Refuse rows that lack ``fields``, naming the first bad row and what the format needs."""
    fields = list(fields)
    for i, row in enumerate(rows):
        missing = [f for f in fields if f not in row]
        if missing:
            raise DataFormatError(
                f"{source}: row {i} lacks {missing}; this benchmark expects rows with {fields} "
                f"(got keys {sorted(row)[:8]})"
            )


def replies_file(out: Path, suite: str) -> Path:
    """Where a suite's generated replies are saved as they come (``OUT/SUITE.responses.jsonl``):
    the cache an interrupted suite resumes from and what ``--responses`` rescoring reads."""
    return out / f"{suite}.responses.jsonl"


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append one JSON line and flush it, so an interrupted run keeps what it produced."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
        f.flush()


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Rows as JSON lines, written atomically (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    os.replace(tmp, path)


def shared_data_dir() -> Path:
    """The project's shared reference data: ``$CALYREX_SHARED_DATA`` or ``<repo>/../shared/data``."""
    if os.environ.get("CALYREX_SHARED_DATA"):
        return Path(os.environ["CALYREX_SHARED_DATA"])
    return Path(__file__).resolve().parents[3].parent / "shared" / "data"
