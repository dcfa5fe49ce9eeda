"""Keeping benchmark test items out of training: an index of every benchmark's inputs and a
check of a mix's system and user turns against it.

Two texts overlap when, after :func:`normalise` (NFKC, lower case, punctuation to spaces), they
share a 13-word span (the n-gram of GPT-3's decontamination, Brown et al. 2020, app. C), or a
whole text, paragraph, line or sentence of one (sentences of six words or more) equals one of
the other. Indexed: Tensor Trust's benchmark samples (hijacking, extraction, extraction
detection, and RealGuardrails' chat copies), AlpacaFarm's 805 evaluation items (the 208 with
input are StruQ's test), StruQ's ``test`` and ``hackaprompt`` attack sentences, SEP's
``SEP_1000_keyword``, RealGuardrails' ``ifeval``/``sys_ifeval``/``ifeval_sep`` prompts and dolly's
``global_test``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

GRAM = 13  # words in a shared span that counts as overlap
MIN_SENTENCE = 6  # words a sentence needs to be matched on its own
BENCHMARK_FILES = {
    "tensortrust": (
        "attacks/tensortrust/hijacking_robustness_dataset.jsonl",
        "attacks/tensortrust/extraction_robustness_dataset.jsonl",
        "attacks/tensortrust/prompt_extraction_detection.jsonl",
        "system/realguardrails/tensortrust/hijacking.jsonl",
        "system/realguardrails/tensortrust/extraction.jsonl",
        "system/realguardrails/tensortrust/helpful.jsonl",
    ),
    "alpacafarm": ("attacks/alpacafarm/davinci_003_outputs.json",),
    "struq-test-attacks": ("attacks/alpacafarm/struq_attack_config.json",),
    "sep": ("attacks/sep/SEP_1000_keyword.json",),
    "ifeval": (
        "system/realguardrails/ifeval/ifeval.jsonl",
        "system/realguardrails/ifeval/sys_ifeval.jsonl",
        "system/realguardrails/ifeval/ifeval_sep.jsonl",
    ),
    "dolly-test": ("sft/dolly15k/global_test.json",),
}
# the fields of a benchmark row that are its inputs (a model sees them in the prompt)
FIELDS = (
    "pre_prompt",
    "post_prompt",
    "attack",
    "access_code",
    "llm_output",
    "instruction",
    "instruction_only",
    "input",
    "injection",
    "prompt",
    "context",
    "response",
)
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n")
_PLACEHOLDER = re.compile(r"\{injected_prompt(?:_spanish)?\}")


def normalise(text: str) -> str:
    """NFKC, lower case, every run of non-word characters one space."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def _units(text: str) -> tuple[list[str], set[str]]:
    """(words, units) of ``text``: its normalised words, and as units its whole normalised
    text, its paragraphs, and its lines and sentences of six words or more."""
    units, words = set(), []
    for paragraph in re.split(r"\n\s*\n", text):
        parts = [normalise(p) for p in _SPLIT.split(paragraph)]
        units.update(p for p in parts if len(p.split()) >= MIN_SENTENCE)
        joined = " ".join(p for p in parts if p)
        units.add(joined)
        words += joined.split()
    units.add(" ".join(words))
    units.discard("")
    return words, units


def _grams(words: list[str]) -> Iterator[int]:
    for i in range(len(words) - GRAM + 1):
        yield hash(" ".join(words[i : i + GRAM]))


@dataclass
class LeakIndex:
    """Normalised benchmark texts (whole, paragraphs, sentences) and their 13-word spans."""

    exact: dict[str, str] = field(default_factory=dict)
    grams: dict[int, str] = field(default_factory=dict)

    def add(self, text: str, label: str) -> None:
        words, units = _units(text)
        for unit in units:
            self.exact.setdefault(unit, label)
        for gram in _grams(words):
            self.grams.setdefault(gram, label)

    def hits(self, text: str) -> list[str]:
        """The benchmarks ``text`` overlaps (empty when it overlaps none)."""
        words, units = _units(text)
        found = {self.exact[u] for u in units if u in self.exact}
        found |= {self.grams[g] for g in _grams(words) if g in self.grams}
        return sorted(found)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        if "content" in value:  # a chat message
            yield from _strings(value["content"])
        for key in FIELDS:
            yield from _strings(value.get(key))
        yield from _strings(value.get("messages"))


def _attack_fragments(config: dict[str, Any]) -> Iterator[str]:
    yield config["TEST_INJECTED_PROMPT"]
    for split in ("test", "hackaprompt"):
        for sentence in config["IGNORE_ATTACK_SENTENCES"][split]:
            yield from (p for p in _PLACEHOLDER.split(sentence) if p.strip())


def benchmark_texts(root: Path) -> Iterator[tuple[str, str]]:
    """(benchmark, text) for every input text of every benchmark test item under ``root``."""
    from ...eval.data import read_rows

    for label, files in BENCHMARK_FILES.items():
        for name in files:
            if label == "struq-test-attacks":
                config = json.loads((root / name).read_text(encoding="utf-8"))
                yield from ((label, t) for t in _attack_fragments(config))
                continue
            for row in read_rows(root / name):
                yield from ((label, t) for t in _strings(row) if t.strip())


@lru_cache(maxsize=2)
def leak_index(root: Path) -> LeakIndex:
    """The index of every benchmark under ``root`` (built once per process)."""
    index, seen = LeakIndex(), set()
    for label, text in benchmark_texts(root):
        if text not in seen:  # RealGuardrails repeats Tensor Trust's samples
            seen.add(text)
            index.add(text, label)
    return index


@lru_cache(maxsize=2)
def tensortrust_codes(root: Path) -> frozenset[str]:
    """The benchmark samples' access codes, stripped and case-folded but otherwise raw (an
    emoji code normalises to nothing)."""
    from ...eval.data import read_rows

    files = BENCHMARK_FILES["tensortrust"]
    return frozenset(
        r["access_code"].strip().casefold() for f in files for r in read_rows(root / f)
    )


@dataclass(frozen=True)
class Leak:
    row: int
    role: str
    benchmarks: tuple[str, ...]
    text: str  # the first 160 characters of the offending turn


def _prompt_turns(row: dict[str, Any]) -> list[dict[str, str]]:
    return list(row.get("messages") or row.get("prompt") or [])


def find_leaks(rows: Iterable[dict[str, Any]], root: Path) -> list[Leak]:
    """The system and user turns of SFT (``messages``) or preference (``prompt``) rows that
    overlap a benchmark test item."""
    index = leak_index(root)
    leaks = []
    for i, row in enumerate(rows):
        for turn in _prompt_turns(row):
            if turn["role"] in ("system", "user") and (found := index.hits(turn["content"])):
                leaks.append(Leak(i, turn["role"], tuple(found), turn["content"][:160]))
    return leaks
