"""The training mix's access dialogues broken on purpose: the breaks ``scripts/break_code.py``
runs on ``calyrex mix``'s Tensor Trust defences (which outcome gets which reply, the wrong
codes, the held-out filter, the validation groups) and the preference pairs' balance. Same shape
as its ``BREAKS``."""

from __future__ import annotations

MIX_TESTS = ["tests/test_mix.py"]
ACCESS, PREFERENCE = "research/mix/access.py", "research/mix/preference.py"
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
]  # fmt: skip
