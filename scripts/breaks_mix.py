"""The training mix broken on purpose: the breaks ``scripts/break_code.py`` runs on ``calyrex
mix``'s Tensor Trust defences (which outcome gets which reply, the wrong codes, the held-out
filter, the validation groups), the preference pairs' balance, the verifiable rules' transforms
and checkers, the injected examples, the kinds' routing and split, and the benchmark-overlap
filter. Same shape as its ``BREAKS``."""

from __future__ import annotations

MIX_TESTS = ["tests/test_mix.py"]
ACCESS, PREFERENCE = "research/mix/access.py", "research/mix/preference.py"
RULES, INJECTION = "research/mix/rules.py", "research/mix/injection.py"
SFT, LEAKS, EXAMPLE = "research/mix/sft.py", "research/mix/leaks.py", "research/mix/example.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
MIX_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("mix: a wrong code may be the right one", ACCESS, "        if mine not in code.lower() and code.lower() not in mine:", "        if True:", MIX_TESTS),
    ("mix: a right code refused (its pair reversed)", ACCESS, "text, reply, wrong = d.access_code, GRANTED, refusal", "text, reply, wrong = d.access_code, refusal, GRANTED", MIX_TESTS),
    ("mix: a wrong code's rejected reply is a refusal too", ACCESS, "text, reply, wrong = _other_code(d, codes, rng), refusal, GRANTED", "text, reply, wrong = _other_code(d, codes, rng), refusal, refusal", MIX_TESTS),
    ("mix: an extraction's rejected reply does not leak the code", ACCESS, "reply, wrong = refusal, f\"The access code is: {d.access_code}\"", "reply, wrong = refusal, GRANTED", MIX_TESTS),
    ("mix: a denial phrase that grants or says the code kept", ACCESS, "        if not any(bad) and re.search(r\"\\w\", phrase):", "        if re.search(r\"\\w\", phrase):", MIX_TESTS),
    ("mix: a defence's outcomes in different groups (a split cuts it)", ACCESS, "group = f\"defence:{d.access_code}\\n{d.opening}\"", "group = f\"defence:{d.access_code}\\n{d.opening}\\n{outcome}\"", MIX_TESTS),
    ("mix: defences that overlap a benchmark kept", ACCESS, "        if short and plain and not held_out:", "        if short and plain:", MIX_TESTS),
    ("mix: a code holding 'granted' kept", ACCESS, " and \"\\n\" not in code and \"granted\" not in code.lower()", " and \"\\n\" not in code", MIX_TESTS),
    ("mix: every-outcome grants before it refuses", ACCESS, "\"every-outcome\": (\"wrong_code\", \"hijack\", \"extraction\", \"granted\"),", "\"every-outcome\": (\"granted\", \"wrong_code\", \"hijack\", \"extraction\"),", MIX_TESTS),
    ("mix: the closing defence left out of the user turn", ACCESS, "    return chat(item | {\"post_prompt\": defense.closing})", "    return chat(item | {\"post_prompt\": \"\"})", MIX_TESTS),
    ("preference: balance repeats the refused pairs", PREFERENCE, "(times if ex.reply == GRANTED else 1)", "(times if ex.reply != GRANTED else 1)", MIX_TESTS),
    ("preference: balance counts the preferred grants as rejected", PREFERENCE, "    rejected = sum(ex.rejected == GRANTED for ex in examples)", "    rejected = sum(ex.reply == GRANTED for ex in examples)", MIX_TESTS),
    ("rules: max words counts whitespace runs, not words", RULES, "    return len(WORD.findall(text))", "    return len(text.split())", MIX_TESTS),
    ("rules: a truncation may end at a colon", RULES, 'if prefix and not prefix.endswith(":") and', "if prefix and", MIX_TESTS),
    ("rules: a long first sentence cut one word past the limit", RULES, '        if count_words(" ".join([*kept, token])) > limit:', '        if count_words(" ".join(kept)) > limit:', MIX_TESTS),
    ("rules: 1,000 becomes '1 000' without commas", RULES, '    reply = re.sub(r"(?<=\\d),(?=\\d{3})", "", reply)  # 1,000 → 1000', "    pass", MIX_TESTS),
    ("rules: the JSON checker accepts other keys", RULES, '        and list(value) == ["answer"]', '        and "answer" in value', MIX_TESTS),
    ("rules: a postscript checker accepts P.S. in the only paragraph", RULES, 'lambda t: len(ps := _paragraphs(t)) > 1 and ps[-1].startswith("P.S. ")', 'lambda t: (ps := _paragraphs(t)) and ps[-1].startswith("P.S. ")', MIX_TESTS),
    ("rules: the ending checker accepts the phrase alone", RULES, "lambda t: t.rstrip().endswith(phrase) and len(t.strip()) > len(phrase)", "lambda t: t.rstrip().endswith(phrase)", MIX_TESTS),
    ("rules: an empty reply obeys max words", RULES, "        lambda t: 0 < count_words(t) <= limit,", "        lambda t: count_words(t) <= limit,", MIX_TESTS),
    ("rules: starts-with accepts the word inside a longer one", RULES, 'lambda t: re.match(rf"{re.escape(word)}\\b", t.lstrip()) is not None', "lambda t: t.lstrip().startswith(word)", MIX_TESTS),
    ("rules: one bullet is a list", RULES, '    return len(lines) > 1 and all(re.match(r"- \\S", line) for line in lines)', '    return all(re.match(r"- \\S", line) for line in lines)', MIX_TESTS),
    ("rules: numbered lines need not count from 1", RULES, 'all(line.startswith(f"{i}. ") for i, line in enumerate(lines, 1))', 'all(re.match(r"\\d+\\. ", line) for line in lines)', MIX_TESTS),
    ("rules: all capitals applies to a reply with a letter without a capital", RULES, 'lambda r: any(c.islower() for c in r) and r.upper().isupper(),', "lambda r: any(c.islower() for c in r),", MIX_TESTS),
    ("rules: no commas misses the full-width comma", RULES, 'lambda t: bool(t.strip()) and "," not in t and "，" not in t,', 'lambda t: bool(t.strip()) and "," not in t,', MIX_TESTS),
    ("rules: quotes accept a lone double quote", RULES, """lambda t: len(s := t.strip()) > 2 and s[0] == s[-1] == '"',""", """lambda t: len(s := t.strip()) > 0 and s[0] == s[-1] == '"',""", MIX_TESTS),
    ("rules: list items keep their bullets", RULES, '    lines = [MARKER.sub("", line).strip() for line in reply.splitlines()]', "    lines = [line.strip() for line in reply.splitlines()]", MIX_TESTS),
    ("injection: an item injected into itself", INJECTION, "        while other.instruction == task.instruction:", "        while False:", MIX_TESTS),
    ("injection: the injected item's reply is the target", INJECTION, 'yield Example(prompt, task.response, task.source, "injection", style, other.response)', 'yield Example(prompt, other.response, task.source, "injection", style, task.response)', MIX_TESTS),
    ("injection: the sentence's placeholder left in", INJECTION, '        sentence.replace("{injected_prompt}", _inline(instruction)) if sentence else instruction', "        f\"{sentence} {instruction}\" if sentence else instruction", MIX_TESTS),
    ("injection: an acronym lower-cased", INJECTION, "    if len(first) > 1 and first[1:].islower():", "    if len(first) > 1:", MIX_TESTS),
    ("injection: an injectable item may carry its own context", INJECTION, "        not record.context\n", "        True\n", MIX_TESTS),
    ("injection: every injection naive", INJECTION, "        ignore = rng.random() < IGNORE_SHARE", "        ignore = rng.random() < 0", MIX_TESTS),
    ("sft: counts that do not sum to n", SFT, "    for k in sorted(exact, key=lambda k: out[k] - exact[k])[: n - sum(out.values())]:", "    for k in []:", MIX_TESTS),
    ("sft: an instruction item is also an injection task", SFT, "        tasks=[r for i, r in enumerate(with_context) if i % 3 != 2],", "        tasks=[r for i, r in enumerate(with_context) if i % 3 != 1],", MIX_TESTS),
    ("sft: a rule whose transform cannot apply is used", SFT, "        rule = next((rule for rule in rotation if rule.applies(r.response)), None)", "        rule = rotation[0]", MIX_TESTS),
    ("sft: a rule row keeps the untransformed reply", SFT, 'yield Example(prompt, rule.transform(r.response), r.source, "rule", rule.name)', 'yield Example(prompt, r.response, r.source, "rule", rule.name)', MIX_TESTS),
    ("sft: role-play without a role in its first sentence kept", SFT, "    if len(sentences) < 2 or not ROLE.match(sentences[0]):", "    if len(sentences) < 2:", MIX_TESTS),
    ("sft: the held-out hash unseeded", SFT, 'digest = hashlib.sha256(f"{seed}:{example.group_key()}".encode()).digest()', 'digest = hashlib.sha256(example.group_key().encode()).digest()', MIX_TESTS),
    ("sft: the validation split shuffled as the training split", SFT, '("" if name == "train" else f":{name}")', '""', MIX_TESTS),
    ("leaks: a 14-word span needed", LEAKS, "GRAM = 13  # words", "GRAM = 14  # words", MIX_TESTS),
    ("leaks: normalise keeps the case", LEAKS, '    text = unicodedata.normalize("NFKC", text).lower()', '    text = unicodedata.normalize("NFKC", text)', MIX_TESTS),
    ("leaks: short sentences matched alone", LEAKS, "        units.update(p for p in parts if len(p.split()) >= MIN_SENTENCE)", "        units.update(p for p in parts if p)", MIX_TESTS),
    ("leaks: a chat message's content not indexed", LEAKS, '        if "content" in value:  # a chat message\n            yield from _strings(value["content"])', '        if False:  # a chat message\n            yield from _strings(value["content"])', MIX_TESTS),
    ("leaks: the hackaprompt sentences not indexed", LEAKS, '    for split in ("test", "hackaprompt"):', '    for split in ("test",):', MIX_TESTS),
    ("leaks: assistant turns checked too", LEAKS, '            if turn["role"] in ("system", "user") and (found := index.hits(turn["content"])):', '            if (found := index.hits(turn["content"])):', MIX_TESTS),
    ("example: a group kept when one of its examples leaks", EXAMPLE, "        ok = all(\n", "        ok = any(\n", MIX_TESTS),
    ("example: a new group started only at a grouped example", EXAMPLE, "        if group and (not ex.group or ex.group != group[0].group):", "        if group and ex.group and ex.group != group[0].group:", MIX_TESTS),
    ("example: chars count the shorter reply", EXAMPLE, "        return sum(len(m[\"content\"]) for m in self.prompt) + max(map(len, replies))", "        return sum(len(m[\"content\"]) for m in self.prompt) + min(map(len, replies))", MIX_TESTS),
]  # fmt: skip
