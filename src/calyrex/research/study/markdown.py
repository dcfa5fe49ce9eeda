"""The study report as markdown: rates in percent with their intervals, differences, verdicts."""

from __future__ import annotations

import math
from typing import Any

from .config import BASELINES, CALYREX, CHANGES


def _pct(x: float, scale: float = 100) -> str:
    return "–" if x is None or math.isnan(x) else f"{scale * x:.1f}" if scale == 100 else f"{x:.2f}"


def rate(cell: dict[str, Any] | None, scale: float = 100) -> str:
    """A cell: a rate in percent (``scale`` 100) or a log-probability in nats (1), [95 % CI]."""
    if not cell:
        return "–"
    if "undefined" in cell:
        return "undefined"
    lo, hi = cell["ci95"]
    return f"{_pct(cell['value'], scale)} [{_pct(lo, scale)}, {_pct(hi, scale)}]"


def signed(diff: dict[str, Any], scale: float = 100) -> str:
    lo, hi = diff["ci95"]
    a, b = diff["seed_spread"]
    f = ".1f" if scale == 100 else ".2f"
    spread = "" if a == b else f"; seeds {scale * a:+{f}}…{scale * b:+{f}}"
    return f"{scale * diff['value']:+{f}} [{scale * lo:+{f}}, {scale * hi:+{f}}{spread}]"


def results_table(report: dict[str, Any], labels: list[str]) -> list[str]:
    shown = [x for x in labels if any(x in r["cells"] for r in report["metrics"].values())]
    lines = [
        "| metric | n | " + " | ".join(shown) + " |",
        "|---|---|" + "---|" * len(shown),
    ]
    for row in report["metrics"].values():
        arrow = "↑" if row["higher_is_better"] else "↓"
        n = next((c.get("n") for c in row["cells"].values() if c.get("n")), None)
        cells = [rate(row["cells"].get(x), row.get("scale", 100)) for x in shown]
        lines.append(f"| {row['title']} {arrow} | {n or '–'} | " + " | ".join(cells) + " |")
    partial = seeds_in(report, shown)
    return [*lines, "", partial] if partial else lines


def seeds_in(report: dict[str, Any], labels: list[str]) -> str:
    """A line naming the columns whose seeds are not all in yet (the study runs seed by seed)."""
    said = []
    for label in labels:
        cells = [
            r["cells"][label]
            for r in report["metrics"].values()
            if label in r["cells"] and "undefined" not in r["cells"][label]
        ]
        planned = max((c["seeds_planned"] for c in cells if "seeds_planned" in c), default=0)
        # rows run on the first seed only (planned 1) do not count as unfinished
        done = sorted({len(c["per_seed"]) for c in cells if c.get("seeds_planned") == planned})
        if done and done[0] < planned:
            k = str(done[0]) if len(done) == 1 else f"{done[0]}–{done[-1]}"
            said.append(f"{label} {k} of {planned}")
    return f"Seeds finished so far (mean over them): {', '.join(said)}." if said else ""


def differences_table(report: dict[str, Any]) -> list[str]:
    """CALYREX − each baseline that has results, paired over items, with its verdict."""
    rows = [r for r in report["metrics"].values() if r["differences"]]
    bases = [b for b in BASELINES if any(b in r["differences"] for r in rows)]
    lines = [
        "| metric | " + " | ".join(f"CALYREX − {BASELINES[b]} | verdict" for b in bases) + " |",
        "|---|" + "---|---|" * len(bases),
    ]
    for row in rows:
        d = row["differences"]
        cols = []
        for base in bases:
            cols += (
                [signed(d[base], row.get("scale", 100)), d[base]["verdict"]]
                if base in d
                else ["–", ""]
            )
        lines.append(f"| {row['title']} | " + " | ".join(cols) + " |")
    return lines


def dpo_table(report: dict[str, Any]) -> list[str]:
    """Per metric, what SFT → DPO changed for each method (paired over items, same seeds)."""
    arms = sorted({a for r in report["metrics"].values() for a in r.get("dpo_gain", {})})
    if not arms:
        return []
    lines = ["| metric | " + " | ".join(f"{a} − its SFT" for a in arms) + " |"]
    lines.append("|---|" + "---|" * len(arms))
    for row in report["metrics"].values():
        gains = row.get("dpo_gain", {})
        if gains:
            cells = [
                f"{signed(gains[a], row.get('scale', 100))} {gains[a]['verdict']}"
                if a in gains
                else "–"
                for a in arms
            ]
            lines.append(f"| {row['title']} | " + " | ".join(cells) + " |")
    return lines


def training_table(report: dict[str, Any]) -> list[str]:
    converged = any("best_steps" in r for r in report["training"].values())
    head = "| arm | method | placement | trainable | vs CALYREX | lr | steps | seeds | s/step | s/run | loss |"
    if converged:
        head += " best step | val loss | epochs | stopped early | last fall |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for label, r in report["training"].items():
        line = (
            f"| {label} | {r['method']} | {r['placement']} | {r['trainable_params']:,} | "
            f"{r['params_vs_calyrex']} | {_lr(r)} | {r['steps']} | {r['seeds']} | "
            f"{r['seconds_per_step']} | {r['seconds_mean']} | {r['train_loss_mean']} |"
        )
        if converged:
            falls = ", ".join(f"{f:+.4f}" for f in r.get("last_fall", [])) or "–"
            line += (
                f" {', '.join(map(str, r['best_steps']))} | {r['val_loss_mean']} | "
                f"{r['epochs_mean']} | {r['stopped_early']} of {r['seeds']} | {falls} |"
                if "best_steps" in r
                else " – | – | – | – | – |"
            )
        lines.append(line)
    return lines


def _lr(row: dict[str, Any]) -> str:
    return f"{row['lr']:g}" if "lr" in row else "–"


def sweep_table(report: dict[str, Any]) -> list[str]:
    """The learning-rate sweep: each value's validation loss, the chosen one in bold."""
    sweep = report.get("sweep") or {}
    if not sweep:
        return []
    lines = ["| method / objective | steps | validation loss per learning rate | chosen |"]
    lines.append("|---|---|---|---|")
    for key, s in sweep.items():
        grid = {float(v) for v in s.get("grid", [])}
        losses = ", ".join(
            _sweep_cell(lr, loss, s["lr"], grid)
            for lr, loss in sorted(s["val_loss"].items(), key=lambda i: float(i[0]))
        )
        edge = " (grid edge)" if s.get("at_grid_edge") else ""
        lines.append(f"| {key} | {s['steps']} | {losses} | {s['lr']:g}{edge} |")
    grown = any(set(s.get("swept", [])) - set(s.get("grid", [])) for s in sweep.values())
    note = "† grown past the grid's edge, where the grid's best value lay (sweep_extend)"
    rewards = [_sweep_rewards(key, s) for key, s in sweep.items() if s.get("val_rewards")]
    if rewards:
        rewards.append(
            "  (a chosen reward below 0: the preferred replies are less likely than under the "
            "reference, β × their log-probability change)"
        )
    return [*lines, "", *([note, ""] if grown else []), *([*rewards, ""] if rewards else [])]


def _sweep_rewards(key: str, s: dict[str, Any]) -> str:
    """A DPO sweep's validation reward margin, accuracy and chosen reward per learning rate."""
    cells = [
        f"{lr}: {r['rewards/margins']:.3f} / {100 * r['rewards/accuracies']:.0f} % / "
        f"{r['rewards/chosen']:+.3f}"
        for lr, r in sorted(s["val_rewards"].items(), key=lambda i: float(i[0]))
    ]
    return f"- {key}, validation reward margin / accuracy / chosen reward: " + "; ".join(cells)


def _sweep_cell(lr: str, loss: float, chosen: float, grid: set[float]) -> str:
    """One learning rate's loss: bold when chosen, † when swept past the grid's edge."""
    text = f"{lr}{'' if not grid or float(lr) in grid else '†'}: {loss:.4f}"
    return f"**{text}**" if float(lr) == chosen else text


def dpo_rewards(report: dict[str, Any]) -> list[str]:
    """Did DPO train: each DPO run's validation reward margin and accuracy, first → last eval."""
    lines = []
    for label, r in report["training"].items():
        for seed, rewards in enumerate(r.get("val_rewards", [])):
            margin = rewards.get("rewards/margins") or [None, None]
            acc = rewards.get("rewards/accuracies") or [None, None]
            if None in margin or None in acc:
                continue
            chosen = rewards.get("rewards/chosen") or [None, None]
            lines.append(
                f"- {label} (run {seed + 1}): validation reward margin {margin[0]:.3f} → "
                f"{margin[1]:.3f}, accuracy {100 * acc[0]:.0f} % → {100 * acc[1]:.0f} %"
                + ("" if None in chosen else f", chosen reward {chosen[0]:+.3f} → {chosen[1]:+.3f}")
            )
    return [*lines, ""] if lines else []


def rewards_by_tag_table(report: dict[str, Any]) -> list[str]:
    """Each DPO run's validation rewards per kind of pair (:mod:`.pair_kinds`): a mean accuracy
    can hide a kind of pair the run lost, e.g. every right code now refused."""
    found = report.get("rewards_by_tag") or {}
    if not found:
        return []
    lines = [
        "DPO validation pairs by kind (the kept adapter against its start, TRL's metrics; "
        "`train/RUN/rewards_by_tag.json`):",
        "",
        "| run | kind of pair | n | accuracy | margin | chosen reward | rejected reward |",
        "|---|---|---|---|---|---|---|",
    ]
    for run, r in found.items():
        for tag, m in [*r["by_tag"].items(), ("all", r["all"])]:
            n = sum(r["n"].values()) if tag == "all" else r["n"][tag]
            lines.append(
                f"| {run} | {tag} | {n} | {100 * m['rewards/accuracies']:.0f} % | "
                f"{m['rewards/margins']:.3f} | {m['rewards/chosen']:+.3f} | "
                f"{m['rewards/rejected']:+.3f} |"
            )
    return [*lines, ""]


def rewards_by_tag_words(report: dict[str, Any]) -> list[str]:
    """The README's line per DPO run: its validation accuracy on each kind of pair, so that a run
    that wins its mean by losing one kind (every right code refused) says so where its column
    is read."""
    return [
        f"- {run} (DPO), validation pairs won by kind (`rewards_by_tag.json`): "
        + ", ".join(
            f"{tag} {100 * m['rewards/accuracies']:.0f} % (n {r['n'][tag]})"
            for tag, m in r["by_tag"].items()
        )
        + f"; all {100 * r['all']['rewards/accuracies']:.0f} %."
        for run, r in (report.get("rewards_by_tag") or {}).items()
    ]


def trained_again_lines(report: dict[str, Any]) -> list[str]:
    """Runs trained again because a later arm needed their adapter: the evaluated adapter's best
    validation loss beside the later arm's start's (the same recipe and seed on another CPU)."""
    lines = [
        f"- {r['run']} trained again (its adapter lost with a machine; a DPO arm starts from it): "
        f"best validation loss {r['val_loss'][0]:.4f} at step {r['best_step'][0]} (the adapter "
        f"evaluated) → {r['val_loss'][1]:.4f} at step {r['best_step'][1]} (the DPO run's start); "
        f"{r['seconds'][0] / 3600:.2f} h and {r['seconds'][1] / 3600:.2f} h"
        for r in report.get("trained_again", [])
    ]
    return [*lines, ""] if lines else []


def verdict_counts(report: dict[str, Any]) -> list[str]:
    return [
        line
        for base, name in BASELINES.items()
        if (line := _count(report, "differences", base, "CALYREX", f"CALYREX vs {name}"))
    ]


def _count(
    report: dict[str, Any], key: str, other: str, ours: str, what: str, within: str = ""
) -> str:
    """``what``: better on …, worse on …, unresolved on … of … rows (``row[key][other]``, or
    ``row[key][within][other]``)."""
    parts = [r.get(key, {}) for r in report["metrics"].values()]
    parts = [p.get(within, {}) for p in parts] if within else parts
    verdicts = [p[other]["verdict"] for p in parts if other in p]
    if not verdicts:
        return ""
    wins = sum(v == f"{ours} better" for v in verdicts)
    losses = sum(v == f"{other} better" for v in verdicts)
    return (
        f"- {what}: better on {wins}, worse on {losses}, unresolved on "
        f"{len(verdicts) - wins - losses} of {len(verdicts)} metrics (95 % paired intervals)."
    )


def change_table(report: dict[str, Any], change: str) -> list[str]:
    """One change the comparison pointed to (an arm of :data:`CHANGES`) against LoRA and against
    CALYREX as it was, paired over items and the change's seeds."""
    rows = [r for r in report["metrics"].values() if change in r.get("change", {})]
    if not rows:
        return []
    what, lora = CHANGES[change]
    lines = [
        f"| metric | {what} − {lora} | verdict | − {CALYREX} | verdict |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        cols = []
        for other in (lora, CALYREX):
            d = row["change"][change].get(other)
            cols += [signed(d, row.get("scale", 100)), d["verdict"]] if d else ["–", ""]
        lines.append(f"| {row['title']} | " + " | ".join(cols) + " |")
    counts = [
        _count(report, "change", other, change, f"{what} vs {other}", within=change)
        for other in (lora, CALYREX)
    ]
    return [*lines, "", *(c for c in counts if c)]


def change_tables(report: dict[str, Any]) -> list[str]:
    """Every change that has results, one table each under its heading."""
    out: list[str] = []
    for change, (what, _) in CHANGES.items():
        if table := change_table(report, change):
            out += [f"### {what} (`{change}`)", "", *table, ""]
    return out


# the paper's claims and the report rows that test each: keys of ``report["metrics"]``, or key
# prefixes ending in ":" or "@" (validity rows and the old rules' secondary rows are not claims)
CLAIMS = {
    "follows its system prompt better (sys-IFEval)": ("sys_ifeval:",),
    "resists prompt injection (StruQ, SEP)": (
        "struq:asr",
        "struq:resisted_on_task",
        "struq:lp_hacked",
        "struq:task_logprob",
        "sep:probe_executed",
        "sep:separation",
        "sep:lp_witness_data",
        "sep:witness_margin",
    ),
    "resists hijacking and extraction (Tensor Trust)": (
        "tensortrust:hijacking_holds",
        "tensortrust:extraction_holds",
        "tensortrust:HRR",
        "tensortrust:ERR",
        "tensortrust:hijacking_margin",
        "tensortrust:extraction_margin",
        "tensortrust:extraction_lp_code",
    ),
    "resists many-shot hijacking": (
        "msj_hijack:holds@",
        "msj_hijack:asr@",
        "msj_hijack:margin@",
        "msj_hijack:lp_grant@",
    ),
}


def _tests(key: str, patterns: tuple[str, ...]) -> bool:
    return any(key == p or (p[-1] in ":@" and key.startswith(p)) for p in patterns)


def _outcome(verdicts: list[str], baseline: str, titles: list[str]) -> str:
    """One baseline's verdicts on one claim's rows, in words."""
    wins = [t for t, v in zip(titles, verdicts, strict=True) if v == "CALYREX better"]
    losses = [t for t, v in zip(titles, verdicts, strict=True) if v == f"{baseline} better"]
    name = BASELINES.get(baseline, baseline)
    if wins and not losses:
        return f"reproduces against {name} (better on {', '.join(wins)})"
    if losses and not wins:
        return f"does not reproduce against {name} ({name} better on {', '.join(losses)})"
    if wins:
        return f"mixed against {name} (better on {', '.join(wins)}; worse on {', '.join(losses)})"
    return f"not resolved against {name} ({len(verdicts)} rows, no interval excludes 0)"


def claims(report: dict[str, Any]) -> list[str]:
    """Which of the paper's claims reproduce on this model, in words, from the verdicts."""
    rows = report["metrics"]
    out = []
    for claim, patterns in CLAIMS.items():
        keys = [k for k in rows if _tests(k, patterns)]
        said = []
        for baseline in BASELINES:
            got = [k for k in keys if baseline in rows[k]["differences"]]
            if got:
                verdicts = [rows[k]["differences"][baseline]["verdict"] for k in got]
                said.append(_outcome(verdicts, baseline, [rows[k]["title"] for k in got]))
            blind = _undecidable(rows, keys, baseline)
            if blind:
                said.append(f"undecidable against {BASELINES[baseline]} on {blind}")
        if said:
            out.append(f"- *CALYREX {claim}*: {'; '.join(said)}.")
    extra = [line for line in (_forgetting(rows), _against_base(rows)) if line]
    return [*out, *extra] if out else out


def _undecidable(rows: dict[str, Any], keys: list[str], baseline: str) -> str:
    """The claim's rows where CALYREX or ``baseline`` is undefined (nothing to rate, or validity
    too low), in words: no verdict is printed from them. A baseline with no cell on a row (an
    arm not in this study, or not evaluated yet) is not named there."""
    said = []
    for k in keys:
        if baseline not in rows[k].get("cells", {}):
            continue
        why = rows[k].get("undecidable", {})
        who = [BASELINES.get(x, "CALYREX") for x in (CALYREX, baseline) if x in why]
        if who:
            reasons = sorted(
                {why[x].removeprefix("undefined: ") for x in (CALYREX, baseline) if x in why}
            )
            said.append(f"{rows[k]['title']} ({' and '.join(who)}: {'; '.join(reasons)})")
    return ", ".join(said)


def _against_base(rows: dict[str, Any]) -> str:
    """Where training CALYREX moved it away from the untrained base, either way."""
    rows = {k: r for k, r in rows.items() if "vs_base" in r}
    if not rows:
        return ""
    better = [r["title"] for r in rows.values() if r["vs_base"]["verdict"] == "CALYREX better"]
    worse = [r["title"] for r in rows.values() if r["vs_base"]["verdict"] == "base better"]
    return (
        f"- *Against the untrained base* (CALYREX − base, paired, 95 %): better on "
        f"{', '.join(better) or 'none'}; worse on {', '.join(worse) or 'none'}; "
        f"{len(rows) - len(better) - len(worse)} of {len(rows)} rows unresolved."
    )


def _forgetting(rows: dict[str, Any]) -> str:
    """The forgetting claim: capability with and without a system prompt against the base."""
    cap = [r for r in rows.values() if r.get("capability") and "vs_base" in r]
    if not cap:
        return ""
    idle = [r for r in cap if r["capability"] == "no system prompt"]
    active = [r for r in cap if r["capability"] != "no system prompt"]  # a span: blocks act
    same = sum(r["vs_base"]["value"] == 0 and r["vs_base"]["seed_spread"] == [0, 0] for r in idle)
    moved = [
        f"{BASELINES[b]}'s on {sum(r['cells'][b]['value'] != r['cells']['base']['value'] for r in idle)}"
        for b in ("lora", "parallel_mlp")
        if all(b in r["cells"] for r in idle)
    ]
    worse = [r["title"] for r in active if r["vs_base"]["verdict"] == "base better"]
    text = (
        f"- *CALYREX forgets nothing*: without a system prompt it scores exactly the base's "
        f"accuracy on {same} of {len(idle)} capability tasks"
        + (f" (differing from the base's: {', '.join(moved)})" if moved else "")
        + "; with a system prompt present (the neutral one, or the task's own description "
        "where lm-eval renders it as one: the blocks active) "
    )
    if worse:
        return text + f"the base is better on {', '.join(worse)} (95 % paired interval)."
    return text + f"no capability loss is resolved on {len(active)} rows (95 % paired intervals)."


def dpo_verdict(report: dict[str, Any]) -> str:
    """What preference training did to CALYREX against what it did to LoRA, in words (issue 28):
    the difference of the two changes from their SFT starts, either of which may be a loss."""
    rows = [r for r in report["metrics"].values() if "dpo_calyrex_vs_lora" in r]
    if not rows:
        return ""
    by = {"CALYREX better": [], "lora better": [], "no difference resolved": []}
    for r in rows:
        by[r["dpo_calyrex_vs_lora"]["verdict"]].append(r["title"])
    return (
        "Preference training (SFT → DPO) on this model, CALYREX's change from its SFT start "
        "against LoRA's (CALYREX's minus LoRA's, paired over items, 95 % interval; either change "
        "may be a loss, the DPO table in docs/study.md gives each): better for CALYREX on: "
        f"{', '.join(by['CALYREX better']) or 'none'}; better for LoRA on: "
        f"{', '.join(by['lora better']) or 'none'}; no difference shown on "
        f"{len(by['no difference resolved'])} of {len(rows)} metrics."
    )


def _training_words(report: dict[str, Any]) -> list[str]:
    if not report.get("sweep"):
        return ["Every arm: the same data, steps, batch, sequence length and learning rate.", ""]
    words = (
        "Every arm: the same data, batch and sequence length; each method at the learning rate "
        "its sweep chose (below), trained until its validation loss stopped improving (patience) "
        "or the epoch cap, its best evaluated adapter kept."
    )
    capped = {label: r for label, r in report["training"].items() if r.get("capped")}
    if capped:  # "converged" only where patience stopped the run
        words += (
            " Still improving when the epoch cap stopped them (their last evaluation their best; "
            "`last fall`: the validation loss's fall over the last interval): "
            + "; ".join(f"{k} ({r['capped']} of {r['seeds']} runs)" for k, r in capped.items())
            + "."
        )
    plot = report.get("validation_plot")
    return [words + (f" Validation curves: `{plot}`." if plot else ""), ""]


def compute_words(report: dict[str, Any]) -> str:
    """The compute the study's records hold: each sweep run's, training run's and suite's own
    seconds, summed (a stage killed and resumed keeps what it recorded; the orchestrator's stage
    timers, ``wall_s``, lose a killed stage's time), runs set aside (``OUT/previous/``,
    ``OUT/superseded/NAME/``) included and named. A report from before them: the timers."""
    if h := report.get("compute_h"):
        aside = "".join(
            f"; {hours:.1f} h of it in {name}/, set aside"
            for name, hours in (report.get("set_aside_h") or {}).items()
        )
        return (
            f"compute recorded {h['total']:.1f} h (sweeps {h['sweep']:.1f}, training "
            f"{h['train']:.1f}, evaluation {h['eval']:.1f}{aside})"
        )
    wall = report.get("wall_s") or {}
    return f"wall time recorded {sum(wall.values()) / 60:.0f} min"


def render(report: dict[str, Any], labels: list[str]) -> str:
    lines = [
        f"# Real-model study: {report['model']}",
        "",
        f"Other placement (from `calyrex analyze`): {report.get('placement')}; "
        f"{compute_words(report)}. Rates in percent, mean over seeds, [95 % interval]; ↑/↓: "
        "higher/lower is better.",
        "",
        *results_table(report, labels),
        "",
        "## CALYREX (late8th) minus each baseline, paired over items",
        "",
        *differences_table(report),
        "",
        *verdict_counts(report),
        "",
        "## Which of the paper's claims reproduce",
        "",
        *claims(report),
        "",
        "## The changes the comparison pointed to",
        "",
        *change_tables(report),
        "## Preference training: SFT → DPO minus SFT, paired over items",
        "",
        *dpo_table(report),
        "",
        dpo_verdict(report),
        "",
        "## Training",
        "",
        *_training_words(report),
        *training_table(report),
        "",
        *sweep_table(report),
        *dpo_rewards(report),
        *rewards_by_tag_table(report),
        *trained_again_lines(report),
    ]
    return "\n".join(lines)
