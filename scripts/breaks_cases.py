"""``calyrex eval --cases`` and the per-item scores broken on purpose: the breaks
``scripts/break_code.py`` runs on a case's checks, its replies per reply length, the pass rates
and groups of the summary, and ``eval.items`` (each item's score from the benchmark's own
scorer, the basis of every interval). Same shape as its ``BREAKS``."""

from __future__ import annotations

CASES_TESTS = [
    *(f"tests/test_{n}.py" for n in ("eval_cases", "eval_report", "continuous_scores")),
    *("tests/test_study_real.py", "-k", "not quick"),
]
CASES, ITEMS = "eval/cases.py", "eval/items.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
CASES_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("cases: contains read case-sensitively under ignore_case", CASES, "if fold(s) not in text]", "if s not in reply]", CASES_TESTS),
    ("cases: not_contains passes when the text is there", CASES, "for s in e.not_contains if fold(s) in text]", "for s in e.not_contains if fold(s) not in text]", CASES_TESTS),
    ("cases: regex ignores ignore_case", CASES, "    if e.regex is not None and not re.search(e.regex, reply, flags):", "    if e.regex is not None and not re.search(e.regex, reply):", CASES_TESTS),
    ("cases: not_regex never fails", CASES, "    if e.not_regex is not None and (m := re.search(e.not_regex, reply, flags)):", "    if False and (m := re.search(e.not_regex, reply, flags)):", CASES_TESTS),
    ("cases: starts_with reads leading whitespace", CASES, "        head = reply.lstrip()", "        head = reply", CASES_TESTS),
    ("cases: a case's own reply length ignored", CASES, "groups.setdefault(case.max_new_tokens or max_new_tokens, []).append(i)", "groups.setdefault(max_new_tokens, []).append(i)", CASES_TESTS),
    ("cases: replies placed in the wrong cases", CASES, "        for i, reply in zip(indices, group.chat([cases[i].messages for i in indices]), strict=True):", "        for i, reply in zip(sorted(indices, reverse=True), group.chat([cases[i].messages for i in indices]), strict=True):", CASES_TESTS),
    ("cases: a skipped case scored as failed", CASES, "            row[\"pass\"] = None\n", "            row[\"pass\"] = False\n", CASES_TESTS),
    ("cases: skipped cases counted in n", CASES, "    scored = [r for r in rows if r[\"pass\"] is not None]", "    scored = list(rows)", CASES_TESTS),
    ("cases: a group with a skipped case passes", CASES, "return kind, None if None in verdicts else all(verdicts)", "return kind, all(v is not False for v in verdicts)", CASES_TESTS),
    ("cases: a group passes when any case passes", CASES, "return kind, None if None in verdicts else all(verdicts)", "return kind, None if None in verdicts else any(verdicts)", CASES_TESTS),
    ("cases: a group's kind from its first case", CASES, "    kind = \" + \".join(sorted({r[\"category\"] for r in members}))", "    kind = members[0][\"category\"]", CASES_TESTS),
    ("cases: the outputs written after the summary", CASES, "    atomic_write(directory / \"cases-outputs.jsonl\", lambda p: Path(p).write_text(lines))\n    write_json(directory / \"cases.json\", {**info, **summary})", "    write_json(directory / \"cases.json\", {**info, **summary})\n    (directory / \"cases-outputs.jsonl\").write_text(lines[: len(lines) // 2])", CASES_TESTS),
    ("items: a unit scored with its skipped items", ITEMS, "if i in rows and not rows[i].get(\"skipped\")]", "if i in rows]", CASES_TESTS),
    ("items: each item scored alone, not with its unit", ITEMS, "        units.setdefault(bench.unit(item), []).append(item)", "        units.setdefault(item_id(item), []).append(item)", CASES_TESTS),
    ("items: the first metric of the unit, not the column's", ITEMS, "            if any(fnmatch.fnmatchcase(key, p) for p in patterns) and metrics[key] is not None:", "            if metrics[key] is not None:", CASES_TESTS),
    ("items: an undefined unit scored 0", ITEMS, "and metrics[key] is not None:\n                out[unit] = (key, float(metrics[key]))", ":\n                out[unit] = (key, float(metrics[key] or 0))", CASES_TESTS),
    ("items: lm-eval's samples read as one per task", ITEMS, "            out[f\"{row['task']}:{row['doc_id']}\"] = (\"all\", float(row[key]))", "            out[f\"{row['task']}\"] = (\"all\", float(row[key]))", CASES_TESTS),
    ("items: a judged suite given per-item scores", ITEMS, "    if bench.needs_judge or hasattr(bench, \"run\") or not responses.is_file():", "    if hasattr(bench, \"run\") or not responses.is_file():", CASES_TESTS),
]  # fmt: skip
