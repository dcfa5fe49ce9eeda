"""Readers of the public training sources under ``shared/data/real`` (its ``SOURCES.md`` says
where each file comes from). Nothing is copied into the project; every reader takes the folder.

Training may read only: databricks-dolly-15k's ten ``local_training_*`` shards (``global_test``
stays held out), GPTeacher role-play, the ``train`` ignore-attack sentences of StruQ's
``struq_attack_config.json`` and Tensor Trust's raw defences dump. The benchmark files are read
by :mod:`calyrex.research.mix.leaks`, to keep them out.
"""

from __future__ import annotations

import bz2
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ...eval.grant import granted_whole

DOLLY_SHARDS = "sft/dolly15k/local_training_*.json"
GPTEACHER = "sft/gpteacher-roleplay/roleplay-simple-deduped-roleplay-instruct.json"
STRUQ = "attacks/alpacafarm/struq_attack_config.json"
TENSORTRUST_RAW = "attacks/tensortrust/raw_dump_defenses.jsonl.bz2"


@dataclass(frozen=True)
class Instruction:
    """One instruction-tuning record (dolly: ``context``; GPTeacher: its ``input``)."""

    instruction: str
    context: str
    response: str
    category: str
    source: str


@dataclass(frozen=True)
class Defense:
    """One valid Tensor Trust defence: its own access code made the game's model grant access."""

    defense_id: int
    opening: str
    closing: str
    access_code: str


def real_dir() -> Path:
    """``shared_data_dir() / "real"``, or a FileNotFoundError that says how to point at it."""
    from ...eval.data import shared_data_dir

    root = shared_data_dir() / "real"
    if not root.is_dir():
        raise FileNotFoundError(
            f"the real data folder {root} is missing (set CALYREX_SHARED_DATA to the shared data)"
        )
    return root


def source_files(root: Path) -> dict[str, list[Path]]:
    """Every file a training mix reads, by source (for the recipe's sha256 list)."""
    return {
        "dolly15k": sorted(root.glob(DOLLY_SHARDS)),
        "gpteacher-roleplay": [root / GPTEACHER],
        "struq-train-attacks": [root / STRUQ],
        "tensortrust-raw": [root / TENSORTRUST_RAW],
    }


def _key(*texts: str) -> tuple[str, ...]:
    return tuple(" ".join(t.lower().split()) for t in texts)


def _dedupe(records: list[Instruction]) -> tuple[Instruction, ...]:
    seen: set[tuple[str, ...]] = set()
    out = []
    for r in records:
        key = _key(r.instruction, r.context)
        if key not in seen and r.instruction.strip() and r.response.strip():
            seen.add(key)
            out.append(r)
    return tuple(out)


@lru_cache(maxsize=4)
def dolly(root: Path) -> tuple[Instruction, ...]:
    """databricks-dolly-15k's training shards in file order, deduplicated on instruction+context."""
    records = []
    for file in sorted(root.glob(DOLLY_SHARDS)):
        for r in json.loads(file.read_text(encoding="utf-8")):
            records.append(
                Instruction(
                    r["instruction"].strip(),
                    (r.get("context") or "").strip(),
                    r["response"].strip(),
                    r.get("category", ""),
                    "dolly15k",
                )
            )
    if not records:
        raise FileNotFoundError(f"no {DOLLY_SHARDS} under {root}")
    return _dedupe(records)


@lru_cache(maxsize=4)
def gpteacher_roleplay(root: Path) -> tuple[Instruction, ...]:
    """GPTeacher role-play records (``instruction, input, response``), deduplicated."""
    rows = json.loads((root / GPTEACHER).read_text(encoding="utf-8"))
    records = [
        Instruction(
            r["instruction"].strip(),
            (r.get("input") or "").strip(),
            r["response"].strip(),
            "roleplay",
            "gpteacher-roleplay",
        )
        for r in rows
    ]
    return _dedupe(records)


def attack_sentences(root: Path, split: str = "train") -> tuple[str, ...]:
    """StruQ's ignore-attack sentences of ``split`` (``train``, ``test`` or ``hackaprompt``);
    each holds ``{injected_prompt}``. Training mixes use ``train`` only."""
    config = json.loads((root / STRUQ).read_text(encoding="utf-8"))
    return tuple(config["IGNORE_ATTACK_SENTENCES"][split])


def _defenses(root: Path) -> Iterator[Defense]:
    with bz2.open(root / TENSORTRUST_RAW, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            opening = (r.get("opening_defense") or "").strip()
            closing = (r.get("closing_defense") or "").strip()
            code = (r.get("access_code") or "").strip()
            granted = r.get("output_is_access_granted") and granted_whole(r.get("llm_output") or "")
            if opening and code and granted:
                yield Defense(int(r["defense_id"]), opening, closing, code)


@lru_cache(maxsize=4)
def tensortrust_defenses(root: Path) -> tuple[Defense, ...]:
    """The raw dump's valid defences (the game's model said exactly "access granted" to the
    access code), streamed from the bz2 file and deduplicated on (opening, closing, code)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for d in _defenses(root):
        key = _key(d.opening, d.closing, d.access_code)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return tuple(out)
