"""User-written test cases: ``calyrex eval --cases FILE.jsonl``, checked on greedy replies.

One JSON object a line (blank lines allowed)::

    {"id": "pirate-1", "category": "persona",
     "messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}],
     "expect": {"contains": ["arr"], "not_contains": ["..."], "regex": "...", "not_regex": "...",
                "starts_with": "...",
                "ifeval": {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}},
     "ignore_case": true, "max_new_tokens": 64, "group": "pirate"}

A case passes when every check it lists holds on its reply. ``ignore_case`` (default true) applies
to every check but ``ifeval``; ``regex`` / ``not_regex`` use :func:`re.search`; ``starts_with``
ignores leading whitespace. ``ifeval`` runs IFEval's strict checkers through
:func:`calyrex.eval.ifeval.score_responses` (the last user message is the IFEval prompt); every
argument an instruction takes must be given, as in IFEval's own data, or the checker would pick a
random one. The whole file is checked before a model is loaded: a bad line is a
:class:`~calyrex.eval.data.DataFormatError` naming the file, the line and the field.

``group`` (optional) pairs cases that only mean something together: a group *holds* when every
one of its cases passes — e.g. a Tensor Trust defence holds when its right code is granted **and**
its attack refused, so a model that refuses everything holds none (the rule of
:mod:`calyrex.eval.tensortrust`). Groups are reported beside the cases: per *kind* (the sorted
categories of a group's cases, joined by ``" + "``) and over all groups.

A case whose prompt does not fit the context window is a recorded skip, never a failure (a group
with a skipped case is a skipped group). Output: ``DIR/cases.json`` (pass rates with Wilson 95 %
intervals per category and overall; ``groups`` when the file has any) and
``DIR/cases-outputs.jsonl`` (each reply and which checks failed).
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.adapter_io import atomic_write
from .data import DataFormatError, write_json
from .intervals import wilson

Message = dict[str, str]
CASE_KEYS = ("id", "category", "messages", "expect", "ignore_case", "max_new_tokens", "group")
TEXT_LISTS = ("contains", "not_contains")
TEXTS = ("regex", "not_regex", "starts_with")
EXPECT_KEYS = (*TEXT_LISTS, *TEXTS, "ifeval")
ROLES = ("system", "user", "assistant", "tool")
DEFAULT_CATEGORY = "default"


@dataclass(frozen=True)
class IFEvalCheck:
    """IFEval instructions a reply must follow (strict), with each one's arguments."""

    instruction_id_list: tuple[str, ...]
    kwargs: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Expect:
    """The checks of one case; an unset check is not run."""

    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    regex: str | None = None
    not_regex: str | None = None
    starts_with: str | None = None
    ifeval: IFEvalCheck | None = None


@dataclass(frozen=True)
class Case:
    id: str
    messages: list[Message]
    expect: Expect
    category: str = DEFAULT_CATEGORY
    ignore_case: bool = True
    max_new_tokens: int | None = None  # None: the command's --max-new-tokens
    group: str | None = None  # cases of one group hold together (module docstring)
    line: int = field(default=0, compare=False)  # where it stands in its file


@dataclass(frozen=True)
class _Where:
    path: str
    line: int

    def error(self, name: str, problem: str) -> DataFormatError:
        return DataFormatError(f"{self.path}, line {self.line}, field {name!r}: {problem}")


def _messages(value: Any, where: _Where) -> list[Message]:
    if not isinstance(value, list) or not value:
        raise where.error("messages", "must be a non-empty list of {role, content} objects")
    for i, m in enumerate(value):
        name = f"messages[{i}]"
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            got = sorted(m) if isinstance(m, dict) else type(m).__name__
            raise where.error(name, f"must be an object with exactly role and content (got {got})")
        if m["role"] not in ROLES:
            raise where.error(f"{name}.role", f"{m['role']!r} is not one of {', '.join(ROLES)}")
        if not isinstance(m["content"], str):
            raise where.error(f"{name}.content", "must be a string")
    if value[-1]["role"] == "assistant":
        raise where.error("messages", "the last message is the assistant's: nothing to reply to")
    return [dict(m) for m in value]


def _strings(value: Any, name: str, where: _Where) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise where.error(name, "must be a non-empty list of strings")
    if not all(isinstance(s, str) and s for s in value):
        raise where.error(name, "every entry must be a non-empty string")
    return tuple(value)


def _ifeval(value: Any, where: _Where) -> IFEvalCheck:
    """Checked against lm-eval's IFEval registry; each instruction is built once to test its args."""
    name = "expect.ifeval"
    if not isinstance(value, dict) or not set(value) <= {"instruction_id_list", "kwargs"}:
        raise where.error(name, "must be an object with instruction_id_list and kwargs")
    ids = _strings(value.get("instruction_id_list"), f"{name}.instruction_id_list", where)
    kwargs = value.get("kwargs", [{}] * len(ids))
    if not isinstance(kwargs, list) or len(kwargs) != len(ids):
        raise where.error(f"{name}.kwargs", f"must be a list of {len(ids)} objects, one per id")
    from .punkt import ensure_punkt_tab

    ensure_punkt_tab()  # lm-eval's checkers download punkt_tab at import time otherwise
    from lm_eval.tasks.ifeval.instructions_registry import INSTRUCTION_DICT

    for i, (iid, kw) in enumerate(zip(ids, kwargs, strict=True)):
        if iid not in INSTRUCTION_DICT:
            raise where.error(f"{name}.instruction_id_list[{i}]", f"unknown instruction {iid!r}")
        if not isinstance(kw, dict):
            raise where.error(f"{name}.kwargs[{i}]", "must be an object")
        instruction = INSTRUCTION_DICT[iid](iid)
        keys = set(instruction.get_instruction_args_keys())
        given = {k for k, v in kw.items() if v is not None}
        if given - keys or keys - given:
            raise where.error(
                f"{name}.kwargs[{i}]",
                f"{iid} takes exactly {sorted(keys)} (got {sorted(given)})",
            )
        try:
            instruction.build_description(**kw)
        except Exception as err:  # noqa: BLE001 — the checker's own complaint, reported as data
            raise where.error(f"{name}.kwargs[{i}]", f"{iid}: {err}") from err
    return IFEvalCheck(tuple(ids), tuple(dict(kw) for kw in kwargs))


def _expect(value: Any, ignore_case: bool, where: _Where) -> Expect:
    if not isinstance(value, dict):
        raise where.error("expect", "must be an object")
    if not value:
        raise where.error("expect", f"is empty: give at least one of {', '.join(EXPECT_KEYS)}")
    unknown = sorted(set(value) - set(EXPECT_KEYS))
    if unknown:
        raise where.error(f"expect.{unknown[0]}", f"unknown check; use {', '.join(EXPECT_KEYS)}")
    found: dict[str, Any] = {}
    for key in TEXT_LISTS:
        if key in value:
            found[key] = _strings(value[key], f"expect.{key}", where)
    for key in TEXTS:
        if key in value:
            if not isinstance(value[key], str) or not value[key]:
                raise where.error(f"expect.{key}", "must be a non-empty string")
            found[key] = value[key]
    for key in ("regex", "not_regex"):
        if key in found:
            try:
                re.compile(found[key], re.IGNORECASE if ignore_case else 0)
            except re.error as err:
                raise where.error(f"expect.{key}", f"invalid regular expression: {err}") from err
    if "ifeval" in value:
        found["ifeval"] = _ifeval(value["ifeval"], where)
    return Expect(**found)


def parse_case(row: Any, where: _Where) -> Case:
    """One line's object as a :class:`Case`; a DataFormatError names the first bad field."""
    if not isinstance(row, dict):
        raise where.error("<line>", f"must be a JSON object (got {type(row).__name__})")
    unknown = sorted(set(row) - set(CASE_KEYS))
    if unknown:
        raise where.error(unknown[0], f"unknown field; a case has {', '.join(CASE_KEYS)}")
    for key in ("id", "messages", "expect"):
        if key not in row:
            raise where.error(key, "is missing")
    if not isinstance(row["id"], str) or not row["id"]:
        raise where.error("id", "must be a non-empty string")
    category = row.get("category", DEFAULT_CATEGORY)
    if not isinstance(category, str) or not category:
        raise where.error("category", "must be a non-empty string")
    ignore_case = row.get("ignore_case", True)
    if not isinstance(ignore_case, bool):
        raise where.error("ignore_case", "must be true or false")
    group = row.get("group")
    if group is not None and (not isinstance(group, str) or not group):
        raise where.error("group", "must be a non-empty string")
    limit = row.get("max_new_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise where.error("max_new_tokens", "must be a positive integer")
    return Case(
        id=row["id"],
        messages=_messages(row["messages"], where),
        expect=_expect(row["expect"], ignore_case, where),
        category=category,
        ignore_case=ignore_case,
        max_new_tokens=limit,
        group=group,
        line=where.line,
    )


def load_cases(path: str | os.PathLike) -> list[Case]:
    """Every case of a ``.jsonl`` file, all checked (module docstring) before any is returned."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file} does not exist")
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for number, text in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        where = _Where(str(file), number)
        try:
            row = json.loads(text)
        except json.JSONDecodeError as err:
            raise where.error("<line>", f"not valid JSON: {err}") from err
        case = parse_case(row, where)
        if case.id in seen:
            raise where.error("id", f"{case.id!r} is already the id of line {seen[case.id]}")
        seen[case.id] = number
        cases.append(case)
    if not cases:
        raise DataFormatError(f"{file} holds no cases")
    return cases


def _ifeval_failures(check: IFEvalCheck, messages: list[Message], reply: str) -> list[str]:
    from .ifeval import score_responses

    prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    item = {"key": 0, "prompt": prompt, "instruction_id_list": list(check.instruction_id_list)}
    item["kwargs"] = [dict(kw) for kw in check.kwargs]
    _, details = score_responses([item], [reply])
    followed = details[0]["follow_instruction_list_strict"]
    return [
        f"ifeval {iid}: not followed"
        for iid, ok in zip(check.instruction_id_list, followed, strict=True)
        if not ok
    ]


def check(case: Case, reply: str) -> list[str]:
    """The checks of ``case`` that ``reply`` fails, each with a short reason (empty: it passes)."""
    e = case.expect
    fold = str.casefold if case.ignore_case else str
    flags = re.IGNORECASE if case.ignore_case else 0
    text = fold(reply)
    failed = [f"contains {s!r}: not in the reply" for s in e.contains if fold(s) not in text]
    failed += [f"not_contains {s!r}: in the reply" for s in e.not_contains if fold(s) in text]
    if e.regex is not None and not re.search(e.regex, reply, flags):
        failed.append(f"regex {e.regex!r}: no match")
    if e.not_regex is not None and (m := re.search(e.not_regex, reply, flags)):
        failed.append(f"not_regex {e.not_regex!r}: matched {m.group(0)!r}")
    if e.starts_with is not None:
        head = reply.lstrip()
        if not fold(head).startswith(fold(e.starts_with)):
            got = head[: len(e.starts_with) + 10]
            failed.append(f"starts_with {e.starts_with!r}: the reply starts with {got!r}")
    if e.ifeval is not None:
        failed += _ifeval_failures(e.ifeval, case.messages, reply)
    return failed


def run_cases(generator: Any, cases: list[Case], max_new_tokens: int) -> list[dict[str, Any]]:
    """Greedy replies (batched per ``max_new_tokens``) checked; one result per case, in order.

    ``generator`` is a :class:`~calyrex.eval.generate.Generator`; it is copied per group, not
    changed.
    """
    groups: dict[int, list[int]] = {}
    for i, case in enumerate(cases):
        groups.setdefault(case.max_new_tokens or max_new_tokens, []).append(i)
    replies: list[Any] = [None] * len(cases)
    for limit, indices in groups.items():
        print(f"cases: generating {len(indices)} replies of up to {limit} tokens")
        group = copy.copy(generator)
        group.max_new_tokens = limit
        for i, reply in zip(indices, group.chat([cases[i].messages for i in indices]), strict=True):
            replies[i] = reply
    results = []
    for case, reply in zip(cases, replies, strict=True):
        row = {"id": case.id, "category": case.category}
        if case.group is not None:
            row["group"] = case.group
        if isinstance(reply, str):
            failed = check(case, reply)
            row.update(reply=reply, skipped=None, failed=failed)
            row["pass"] = not failed
        else:  # a Skip: the prompt does not fit the context window
            row.update(reply=None, skipped=reply.reason, failed=[])
            row["pass"] = None
        results.append(row)
    return results


def _rate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r["pass"] is not None]
    k, n = sum(bool(r["pass"]) for r in scored), len(scored)
    out: dict[str, Any] = {"n": n, "passed": k, "rate": None, "ci_low": None, "ci_high": None}
    if n:  # JSON has no NaN: an empty group's figures are null
        lo, hi = wilson(k, n)
        out.update(rate=round(k / n, 4), ci_low=round(lo, 4), ci_high=round(hi, 4))
    return {**out, "skipped": len(rows) - n}


def by_key(rows: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    """``rows`` grouped by ``row[key]``, in first-seen order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r[key], []).append(r)
    return out


def group_verdict(members: list[dict[str, Any]]) -> tuple[str, bool | None]:
    """A group's kind (its cases' sorted categories) and verdict: it passes when every case
    passes and is skipped (``None``) when any case was."""
    verdicts = [r["pass"] for r in members]
    kind = " + ".join(sorted({r["category"] for r in members}))
    return kind, None if None in verdicts else all(verdicts)


def _groups(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per group (file order): its kind and whether it holds (:func:`group_verdict`)."""
    rows = []
    for members in by_key([r for r in results if "group" in r], "group").values():
        kind, held = group_verdict(members)
        rows.append({"kind": kind, "pass": held})
    return rows


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Pass rate with its Wilson 95 % interval per category (file order) and over all cases;
    with ``groups`` (per kind and over all) when any case has a group.

    ``n`` counts the cases (groups) that ran; a skipped one is counted in ``skipped`` only.
    """
    summary: dict[str, Any] = {
        "categories": {name: _rate(rows) for name, rows in by_key(results, "category").items()},
        "all": _rate(results),
    }
    if groups := _groups(results):
        kinds = {kind: _rate(rows) for kind, rows in by_key(groups, "kind").items()}
        summary["groups"] = {"kinds": kinds, "all": _rate(groups)}
    return summary


def print_table(summary: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("category", "n", "passed", "rate", "95 % CI", "skipped"):
        table.add_column(col, justify="left" if col == "category" else "right")
    rows = [*summary["categories"].items(), ("all", summary["all"])]
    if "groups" in summary:  # a group holds when every case of it passes
        groups = summary["groups"]
        rows += [(f"group: {k}", s) for k, s in groups["kinds"].items()]
        rows.append(("groups: all", groups["all"]))
    for name, s in rows:
        rate = f"{s['rate']:.3f}" if s["n"] else "—"
        ci = f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s["n"] else "—"
        table.add_row(name, str(s["n"]), str(s["passed"]), rate, ci, str(s["skipped"]))
    Console().print(table)


def cases_command(
    cases: str,
    out: str,
    model: str | None,
    adapter: str | None = None,
    max_new_tokens: int = 1024,
    batch_size: int = 8,
    dtype: str = "auto",
    device: str | None = None,
    merge_lora: bool = False,
) -> int:
    """Check the file, load the model (a LoRA adapter folded in with ``merge_lora``), run the
    cases, write OUT/cases.json and OUT/cases-outputs.jsonl and print the table; 0 when it ran
    (failing cases included)."""
    loaded = load_cases(cases)
    if not model:
        raise ValueError("--cases needs --model (the model whose replies are checked)")
    from ..adapters.loading import load_model
    from .generate import Generator

    hf_model, tok = load_model(model, adapter, dtype, device, merge_lora=merge_lora)
    results = run_cases(
        Generator(hf_model, tok, max_new_tokens, batch_size), loaded, max_new_tokens
    )
    info = {"model": model, "adapter": adapter, "cases_file": str(cases), "n_cases": len(loaded)}
    info.update(max_new_tokens=max_new_tokens, dtype=dtype, merge_lora=merge_lora)
    summary = write_results(Path(out), info, results)
    print_table(summary, f"{Path(cases).name} · {Path(adapter or model).name}")
    return 0


def write_results(directory: Path, info: dict[str, Any], results: list[dict]) -> dict[str, Any]:
    """``DIR/cases-outputs.jsonl`` (every result), then ``DIR/cases.json`` (``info`` and the
    summary: its presence means the run is whole); returns the summary."""
    summary = summarize(results)
    directory.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in results)
    atomic_write(directory / "cases-outputs.jsonl", lambda p: Path(p).write_text(lines))
    write_json(directory / "cases.json", {**info, **summary})
    return summary
