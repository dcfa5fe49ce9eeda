"""The real-model study's report broken on purpose: the breaks ``scripts/break_code.py`` runs on
``calyrex study real --stages report`` past the statistics' first table: cells over seeds,
differences and their pairing, training and sweep rows, and the markdown that says them (tables,
claims, verdict counts, the DPO rows). Same shape as its ``BREAKS``."""

from __future__ import annotations

REPORT_TESTS = ["tests/test_study_real.py", "tests/test_eval_report.py", "-k", "not quick"]
REPORT, MARKDOWN = "research/study/report.py", "research/study/markdown.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
REPORT_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("report: a cell's seeds taken past a missing one", REPORT, "        if record is None or m.name not in (record.get(\"metrics\") or {}):\n            break", "        if record is None or m.name not in (record.get(\"metrics\") or {}):\n            continue", REPORT_TESTS),
    ("report: first-seed-only suites averaged over every seed", REPORT, "        names = names[:1]  # run on an arm's first seed only", "        names = names  # run on an arm's first seed only", REPORT_TESTS),
    ("report: a rate over valid items shown as the mean of the seeds' rates", REPORT, "            cell[\"value\"] = column(avg)\n", "            pass\n", REPORT_TESTS),
    ("report: an item's score from its first seed only", REPORT, "            float(np.mean([s[k][1] for s in per_seed if k in s])),", "            float(next(s[k][1] for s in per_seed if k in s)),", REPORT_TESTS),
    ("report: validity read from one seed, not their mean", REPORT, "    v = float(np.mean(need))", "    v = float(need[0])", REPORT_TESTS),
    ("report: validity at the threshold undefined", REPORT, "    if v < MIN_VALIDITY:", "    if v <= MIN_VALIDITY:", REPORT_TESTS),
    ("report: an accuracy's stderr over n, not n - 1", REPORT, "return math.sqrt(p * (1 - p) / (n - 1))", "return math.sqrt(p * (1 - p) / n)", REPORT_TESTS),
    ("report: lm-eval's own stderr ignored", REPORT, "    if isinstance(value, int | float):\n        return float(value)", "    if False:\n        return float(value)", REPORT_TESTS),
    ("report: a difference's seeds not paired (the longer list cut from its end)", REPORT, "zip(a[\"per_seed\"][:k], b[\"per_seed\"][:k], strict=True)", "zip(a[\"per_seed\"][-k:], b[\"per_seed\"][-k:], strict=True)", REPORT_TESTS),
    ("report: a difference over every seed of the arm with more", REPORT, "cells[x] if len(cells[x][\"per_seed\"]) == k else _over_seeds(cfg, out, x, m, k)", "cells[x]", REPORT_TESTS),
    ("report: the seeds' spread reported as the first seed's", REPORT, "    diff[\"seed_spread\"] = [min(d[\"per_seed\"]), max(d[\"per_seed\"])]", "    diff[\"seed_spread\"] = [d[\"per_seed\"][0], d[\"per_seed\"][0]]", REPORT_TESTS),
    ("report: the base's cell compared once, not per seed", REPORT, "\"per_seed\": cells[\"base\"][\"per_seed\"] * len(cells[CALYREX][\"per_seed\"]),", "\"per_seed\": cells[\"base\"][\"per_seed\"],", REPORT_TESTS),
    ("report: a verdict from a secondary (old-rule) row", REPORT, "        if m.secondary:\n            cells = {}", "        if False:\n            cells = {}", REPORT_TESTS),
    ("report: DPO's gain against its SFT start over the SFT arm's own seeds", REPORT, "sft = _over_seeds(cfg, out, arm.init_from, m, k, like=arm)", "sft = _over_seeds(cfg, out, arm.init_from, m, k)", REPORT_TESTS),
    ("report: the DPO gain's verdict names the wrong side", REPORT, "\"verdict\": verdict(m, gain, \"SFT\", ours=\"DPO\"),", "\"verdict\": verdict(m, gain, \"DPO\", ours=\"SFT\"),", REPORT_TESTS),
    ("report: a row with no cells kept", REPORT, "        if row[\"cells\"]:\n            table[", "        if True:\n            table[", REPORT_TESTS),
    ("training: seconds per step from the mean run, not per run", REPORT, "\"seconds_per_step\": round(float(np.mean([s[\"seconds\"] / s[\"steps\"] for s in sums])), 2),", "\"seconds_per_step\": round(float(np.mean([s[\"seconds\"] for s in sums]) / sums[0][\"steps\"]), 2),", REPORT_TESTS),
    ("training: epochs over the mix's rows, not those kept", REPORT, "s[\"steps\"] * s[\"config\"][\"batch_size\"] / s[\"data\"][\"kept\"]", "s[\"steps\"] * s[\"config\"][\"batch_size\"] / s[\"data\"][\"rows\"]", REPORT_TESTS),
    ("training: params against CALYREX inverted", REPORT, "round(row[\"trainable_params\"] / ref, 4)", "round(ref / row[\"trainable_params\"], 4)", REPORT_TESTS),
    ("training: the last fall taken last minus the one before", REPORT, "falls.append(round(losses[-2][1] - losses[-1][1], 4))", "falls.append(round(losses[-1][1] - losses[-2][1], 4))", REPORT_TESTS),
    ("training: a run patience stopped counted as capped", REPORT, "capped += best == losses[-1][0] and not summary[\"validation\"][\"stopped_early\"]", "capped += best == losses[-1][0]", REPORT_TESTS),
    ("training: a trained-again run reported by its second run", REPORT, "    file = first_record(where, \"summary.json\")", "    file = where / \"summary.json\"", REPORT_TESTS),
    ("sweep: DPO rewards read from the first evaluation", REPORT, "    return {k: v for k, v in evaluations[-1].items() if k != \"step\"}", "    return {k: v for k, v in evaluations[0].items() if k != \"step\"}", REPORT_TESTS),
    ("curves: a run still training plotted", REPORT, "        if arm is not None and _first_summary(out / \"train\" / run):", "        if arm is not None and (out / \"train\" / run).is_dir():", REPORT_TESTS),
    ("markdown: a lower-is-better row shown with ↑", MARKDOWN, "        arrow = \"↑\" if row[\"higher_is_better\"] else \"↓\"", "        arrow = \"↑\"", REPORT_TESTS),
    ("markdown: an undefined cell shown with its number", MARKDOWN, "    if \"undefined\" in cell:\n        return \"undefined\"", "    if False:\n        return \"undefined\"", REPORT_TESTS),
    ("markdown: a log-probability shown in percent", MARKDOWN, "f\"{scale * x:.1f}\" if scale == 100 else f\"{x:.2f}\"", "f\"{100 * x:.1f}\"", REPORT_TESTS),
    ("markdown: seeds' spread shown when the seeds agree", MARKDOWN, "    spread = \"\" if a == b else", "    spread = \"\" if False else", REPORT_TESTS),
    ("markdown: columns whose seeds are in flagged as partial", MARKDOWN, "        if done and done[0] < planned:", "        if done and done[0] <= planned:", REPORT_TESTS),
    ("markdown: first-seed-only rows flag their arm as partial", MARKDOWN, "for c in cells if c.get(\"seeds_planned\") == planned})", "for c in cells})", REPORT_TESTS),
    ("markdown: a baseline's missing difference shifts the row's columns", MARKDOWN, "                else [\"–\", \"\"]\n            )", "                else []\n            )", REPORT_TESTS),
    ("markdown: a loss counted as a win", MARKDOWN, "    wins = sum(v == f\"{ours} better\" for v in verdicts)", "    wins = sum(v != \"no difference resolved\" for v in verdicts)", REPORT_TESTS),
    ("markdown: a claim with wins and losses said to reproduce", MARKDOWN, "    if wins and not losses:\n", "    if wins:\n", REPORT_TESTS),
    ("markdown: a claim's rows matched by prefix only when exact", MARKDOWN, "key == p or (p[-1] in \":@\" and key.startswith(p))", "key == p", REPORT_TESTS),
    ("markdown: undecidable rows not named under a claim", MARKDOWN, "            if blind:\n", "            if False:\n", REPORT_TESTS),
    ("markdown: forgetting counts a base-equal row with differing seeds", MARKDOWN, "r[\"vs_base\"][\"value\"] == 0 and r[\"vs_base\"][\"seed_spread\"] == [0, 0]", "r[\"vs_base\"][\"value\"] == 0", REPORT_TESTS),
    ("markdown: capped runs not named", MARKDOWN, "    if capped:  # \"converged\" only", "    if False:  # \"converged\" only", REPORT_TESTS),
    ("markdown: the sweep's chosen value not in bold", MARKDOWN, "    return f\"**{text}**\" if float(lr) == chosen else text", "    return text", REPORT_TESTS),
    ("markdown: a DPO run's rewards last → first", MARKDOWN, "f\"- {label} (run {seed + 1}): validation reward margin {margin[0]:.3f} → \"\n                f\"{margin[1]:.3f}", "f\"- {label} (run {seed + 1}): validation reward margin {margin[1]:.3f} → \"\n                f\"{margin[0]:.3f}", REPORT_TESTS),
    ("markdown: the pairs' 'all' row counts the first kind's n", MARKDOWN, "            n = sum(r[\"n\"].values()) if tag == \"all\" else r[\"n\"][tag]", "            n = r[\"n\"][tag] if tag in r[\"n\"] else next(iter(r[\"n\"].values()))", REPORT_TESTS),
    ("markdown: compute shown without the set-aside runs", MARKDOWN, "            for name, hours in (report.get(\"set_aside_h\") or {}).items()", "            for name, hours in {}.items()", REPORT_TESTS),
]  # fmt: skip
