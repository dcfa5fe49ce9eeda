"""The evaluation's running broken on purpose: the breaks ``scripts/break_code.py`` runs on
``calyrex eval``'s runner (suites chosen, finished and skipped suites, replies saved and resumed,
a suite's clock and token counts, the summary), its file helpers and its chat generator. Same
shape as its ``BREAKS``."""

from __future__ import annotations

# the tests that run ``calyrex eval``: the runners end to end, the CLI, the generator's reader
RUN_TESTS = [
    *(f"tests/test_{n}.py" for n in ("eval_runners", "eval_ifeval", "eval_judged", "eval_lm")),
    *(f"tests/test_{n}.py" for n in ("prefill", "eval_cases", "eval_report", "eval_real")),
    "-x",
]
RUNNER, DATA = "eval/runner.py", "eval/data.py"
GENERATE, ATTEMPTS = "eval/generate.py", "core/attempts.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
RUN_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("runner: 'paper' after a named suite lists it twice", RUNNER, "names += [n for n in PAPER if n not in names]", "names += list(PAPER)", RUN_TESTS),
    ("runner: an unknown suite name ignored", RUNNER, "        elif part:\n            raise ValueError", "        elif False:\n            raise ValueError", RUN_TESTS),
    ("runner: a suite recorded as skipped not retried", RUNNER, 'json.loads(file.read_text()).get("status") == "ok"', 'json.loads(file.read_text()).get("status") in ("ok", "skipped")', RUN_TESTS),
    ("runner: a finished suite run again", RUNNER, '        if file.is_file() and json.loads(file.read_text()).get("status") == "ok":', "        if False:", RUN_TESTS),
    ("runner: saved replies ignored, every item generated again", RUNNER, "    pending = [it for it in items if bench.row_id(it) not in done]", "    pending = list(items)", RUN_TESTS),
    ("runner: saved replies read but not kept", RUNNER, "    rows = read_rows(cache) if cache.is_file() else []", "    rows = []", RUN_TESTS),
    ("runner: replies not saved as they come", RUNNER, "                append_row(cache, row)\n", "                pass\n", RUN_TESTS),
    ("runner: the clock not saved after each reply", RUNNER, "                    ctx.clock.tick()\n", "                    pass\n", RUN_TESTS),
    ("runner: a clock resumed without its replies", RUNNER, "        resumed = replies_file(out, name).is_file() and self.file.is_file()", "        resumed = self.file.is_file()", RUN_TESTS),
    ("runner: a suite's tokens counted from the model's first suite", RUNNER, "used = {k: v - before[k] for k, v in cost(ctx).items()}", "used = cost(ctx)", RUN_TESTS),
    ("runner: per-item details not written", RUNNER, "    if details is not None:\n", "    if False:\n", RUN_TESTS),
    ("runner: a suite with no items scored", RUNNER, "    if not items:\n", "    if False:\n", RUN_TESTS),
    ("runner: an unreachable judge stops the run", RUNNER, "        except (JudgeUnavailable, NeedsModel) as err:", "        except NeedsModel as err:", RUN_TESTS),
    ("runner: the model loaded again for every suite", RUNNER, "if responses is None and ctx.generator is None and loader is not None:", "if responses is None and loader is not None:", RUN_TESTS),
    ("runner: a suite with no record reads as ok in the summary", RUNNER, 'else {"status": "missing"}', 'else {"status": "ok"}', RUN_TESTS),
    ("runner: true/false flags read as headline figures", RUNNER, "isinstance(v, int | float) and not isinstance(v, bool)", "isinstance(v, int | float)", RUN_TESTS),
    ("runner: a skipped suite's reason left out of the summary", RUNNER, '        if record.get("reason"):\n', "        if False:\n", RUN_TESTS),
    ("runner: a suite that did not run left out of summary.md", RUNNER, '        if entry["status"] != "ok":\n', "        if False:\n", RUN_TESTS),
    ("data: a .json list read as JSON lines", DATA, '        if file.suffix == ".json":', '        if file.suffix == ".jsonl":', RUN_TESTS),
    ("data: rows that are not objects accepted", DATA, "    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):", "    if not isinstance(rows, list):", RUN_TESTS),
    ("data: a row lacking a field accepted", DATA, "        missing = [f for f in fields if f not in row]", "        missing = []", RUN_TESTS),
    ("data: $CALYREX_SHARED_DATA ignored", DATA, '    if os.environ.get("CALYREX_SHARED_DATA"):', "    if False:", RUN_TESTS),
    ("generate: a prompt whose reply would pass the window runs", GENERATE, "            if length + self.max_new_tokens > self.window:", "            if length > self.window:", RUN_TESTS),
    ("generate: replies placed in index order, generated in length order", GENERATE, "                chunk, self._generate([conversations[i] for i in chunk]), strict=True", "                sorted(chunk), self._generate([conversations[i] for i in chunk]), strict=True", RUN_TESTS),
    ("generate: the tokenizer's padding side not given back", GENERATE, "            tok.padding_side = side\n", "            pass\n", RUN_TESTS),
    ("generate: batches padded on the tokenizer's side", GENERATE, 'side, tok.padding_side = tok.padding_side, "left"', "side, tok.padding_side = tok.padding_side, tok.padding_side", RUN_TESTS),
    ("generate: new tokens counted past the first end", GENERATE, '"new_tokens"] += int((stop.cumsum(-1) == 0).sum())', '"new_tokens"] += int((~stop).sum())', RUN_TESTS),
    ("generate: padded tokens counted as the real ones", GENERATE, '        self.stats["padded_tokens"] += mask.numel()', '        self.stats["padded_tokens"] += int(mask.sum())', RUN_TESTS),
    ("generate: special tokens left in the reply", GENERATE, "tok.decode(row[width:], skip_special_tokens=True)", "tok.decode(row[width:], skip_special_tokens=False)", RUN_TESTS),
    ("generate: a target past the window scored", GENERATE, '        if len(row["input_ids"]) > self.window:', "        if False:", RUN_TESTS),
    ("generate: the window from the tokenizer, not the model", GENERATE, "    return int(window) if window else int(", "    return int(1 << 30) if window else int(", RUN_TESTS),
    ("attempts: a resumed run's seconds omit its earlier attempts", ATTEMPTS, "        return self.before + self.this_attempt", "        return self.this_attempt", RUN_TESTS),
    ("attempts: this attempt's seconds include the earlier ones", ATTEMPTS, '            "seconds_this_attempt": round(attempt, digits),', '            "seconds_this_attempt": round(self.before + attempt, digits),', RUN_TESTS),
]  # fmt: skip
