"""The real-model study's orchestration broken on purpose: the breaks ``scripts/break_code.py``
runs on ``calyrex study real``'s plan (run order, suites due, held-out items, records of a run
trained again), its learning-rate sweeps (the grid grown past an edge), its training budgets and
its status (the compute spent and left). Same shape as its ``BREAKS``."""

from __future__ import annotations

STUDY_TESTS = ["tests/test_study_real.py", "-k", "not quick"]
PLAN, TRAIN = "research/study/plan.py", "research/study/train.py"
STATUS, CURVES = "research/study/status.py", "research/study/curves.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
STUDY_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("plan: DPO arms after every SFT run, not each right after its start", PLAN, "                for dpo in (a for a in cfg.arms if a.init_from == arm.label):", "                for dpo in ():", STUDY_TESTS),
    ("plan: the extra arms before the paper's comparison", PLAN, "    for group in (main, extra):", "    for group in (extra, main):", STUDY_TESTS),
    ("plan: a DPO arm on a seed it does not train", PLAN, "                    if seed in cfg.seeds_of(dpo):", "                    if True:", STUDY_TESTS),
    ("plan: first-seed-only suites due on every seed", PLAN, "    return [s for s in cfg.suites if first or not s.first_seed_only]", "    return list(cfg.suites)", STUDY_TESTS),
    ("plan: the held-out items not on one-seed arms", PLAN, "    return arm is None or seed == cfg.heldout_seed or cfg.seeds_of(arm) == (seed,)", "    return arm is None or seed == cfg.heldout_seed", STUDY_TESTS),
    ("plan: a failed evaluation counts as finished", PLAN, '    return record if record.get("status") == "ok" else None', "    return record", STUDY_TESTS),
    ("plan: a run trained again reports its second run's records", PLAN, "    return kept if kept.is_file() else where / name", "    return where / name", STUDY_TESTS),
    ("sweep: a recipe's grid changed reuses the old choice", TRAIN, "    if key in chosen and {k: chosen[key].get(k) for k in recipe} == recipe:", "    if key in chosen:", STUDY_TESTS),
    ("sweep: a winner at the edge is not grown past", TRAIN, "        if best not in (values[0], values[-1]) or len(values) < 2 or grown == cfg.sweep_extend:", "        if True:", STUDY_TESTS),
    ("sweep: the grid grows at the wrong edge", TRAIN, "        values = sorted([*values, _past_edge(values, up=best == values[-1])])", "        values = sorted([*values, _past_edge(values, up=best == values[0])])", STUDY_TESTS),
    ("sweep: a grown grid's step a decade from the edge, not from its neighbour", TRAIN, "        decade, step = values[-2] * 10, values[-1] ** 2 / values[-2]", "        decade, step = values[-1] * 10, values[-1] ** 2 / values[-2]", STUDY_TESTS),
    ("sweep: the DPO sweep from a fresh adapter", TRAIN, "    if arm.init_from:\n        init = (", "    if False:\n        init = (", STUDY_TESTS),
    ("sweep: every arm swept in its own placement and loss", TRAIN, '        plain = replace(arm, placement="late8th", loss_type=Arm.loss_type)', "        plain = arm", STUDY_TESTS),
    ("train: equal-time steps from the reference's steps, not its seconds", TRAIN, '    return max(1, round(ref["seconds"] / per_step))', '    return max(1, ref["steps"])', STUDY_TESTS),
    ("train: a finished run trained again", TRAIN, '    if (where / "summary.json").is_file():\n        say(f"train {where.name}: finished earlier, not rerun")', '    if False:\n        say(f"train {where.name}: finished earlier, not rerun")', STUDY_TESTS),
    ("train: DPO's validation split is the SFT one's size", TRAIN, '    rows = cfg.preference_val_rows if arm.objective == "dpo" else cfg.val_rows', "    rows = cfg.val_rows", STUDY_TESTS),
    ("train: a run to convergence without patience", TRAIN, '        budget |= {"epochs": epochs, "eval_steps": cfg.eval_steps, "patience": cfg.patience}', '        budget |= {"epochs": epochs, "eval_steps": cfg.eval_steps}', STUDY_TESTS),
    ("status: a run trained again counts its second run only", STATUS, '    return 0.0 if t is None else t.get("seconds", 0) + t.get("first", {}).get("seconds", 0)', '    return 0.0 if t is None else t.get("seconds", 0)', STUDY_TESTS),
    ("status: the folders set aside left out of the compute", STATUS, "        spent[part] += sum(seconds[part] for seconds in aside.values())", "        spent[part] += 0", STUDY_TESTS),
    ("status: an interrupted run's share left is all of it", STATUS, '                share = 1 - t["step"] / t["of"]', "                share = 1.0", STUDY_TESTS),
    ("status: the held-out items never due", STATUS, '        todo += [(("eval", "heldout"),)] if r["heldout"] is False else []', "        todo += []", STUDY_TESTS),
    ("status: a method's runs not preferred to its objective's", STATUS, '            todo.append((("train", sweep_key(arm)), ("train", arm.objective)))', '            todo.append((("train", arm.objective), ("train", sweep_key(arm))))', STUDY_TESTS),
    ("status: a sweep already chosen estimated again", STATUS, "        if key in chosen or not todo:", "        if not todo:", STUDY_TESTS),
    ("status: an interrupted run's checkpoint not read", STATUS, "    last = get_last_checkpoint(str(where)) if where.is_dir() else None", "    last = None", STUDY_TESTS),
    ("curves: the training loss plotted as validation", CURVES, '    return [(r["step"], r["eval_loss"]) for r in rows if "eval_loss" in r]', '    return [(r["step"], r["loss"]) for r in rows if "loss" in r]', STUDY_TESTS),
]  # fmt: skip
