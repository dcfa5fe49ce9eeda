"""The RuleWorld SFT → DPO study in words and tables, from its result file (``dpo-study.json``).

:func:`verdict` answers the issue's question — does preference training help CALYREX more than
it helps LoRA? — per metric, from CALYREX's DPO gain minus LoRA's, paired by training seed: more
(or less) only when the 95 % t-interval over the seeds excludes 0, else "no difference shown".
"""

from __future__ import annotations

from typing import Any

from .dpo_study import LOWER_IS_BETTER, METRICS
from .report import cell

NAMES = {"calyrex": "CALYREX late8th", "lora": "LoRA", "parallel_mlp": "ParallelMLP"}


def _points(x: float) -> str:
    return f"{round(100 * x, 1) + 0.0:+.1f}"  # + 0.0: no signed zero


def _diff(entry: dict[str, Any]) -> str:
    ci = entry["ci95"]
    return _points(entry["mean"]) + (f" [{_points(ci[0])}, {_points(ci[1])}]" if ci else "")


def rates_table(result: dict[str, Any]) -> list[str]:
    lines = ["| method | " + " | ".join(METRICS.values()) + " |", "|---" * (len(METRICS) + 1) + "|"]
    for row, metrics in result["rows"].items():
        method, stage = row.rsplit("-", 1)
        name = f"{NAMES.get(method, method)} {'SFT → DPO' if stage == 'dpo' else 'SFT'}"
        lines.append(f"| {name} | " + " | ".join(cell(metrics[k]) for k in METRICS) + " |")
    return lines


def gains_table(result: dict[str, Any]) -> list[str]:
    """DPO minus SFT in points, per method; then CALYREX's gain minus each baseline's."""
    lines = ["| DPO − SFT, points | " + " | ".join(METRICS.values()) + " |"]
    lines.append("|---" * (len(METRICS) + 1) + "|")
    for method, gains in result["gains"].items():
        lines.append(
            f"| {NAMES.get(method, method)} | "
            + " | ".join(_diff(gains[k]) for k in METRICS)
            + " |"
        )
    for base, diffs in result["calyrex_gain_minus"].items():
        name = f"CALYREX's gain − {NAMES.get(base, base)}'s"
        lines.append(f"| {name} | " + " | ".join(_diff(diffs[k]) for k in METRICS) + " |")
    return lines


def partial(result: dict[str, Any]) -> list[str]:
    """The units finished so far (a seed counts once all three methods are done)."""
    units = result.get("units") or {}
    if not units:
        return []
    lines = ["", "Finished so far (rates with their Wilson 95 % interval over examples):", ""]
    lines += ["| seed · method · stage | " + " | ".join(METRICS.values()) + " |"]
    lines += ["|---" * (len(METRICS) + 1) + "|"]
    for unit, metrics in units.items():
        lines.append(f"| {unit} | " + " | ".join(cell(metrics[k]) for k in METRICS) + " |")
    return lines


def judge(entry: dict[str, Any], metric: str) -> str:
    """ "more", "less" or "no difference shown": whether CALYREX gained more on ``metric``."""
    ci = entry["ci95"]
    if ci is None or ci[0] <= 0 <= ci[1]:
        return "no difference shown"
    better = (ci[1] < 0) if metric in LOWER_IS_BETTER else (ci[0] > 0)
    return "more" if better else "less"


def verdict(result: dict[str, Any], baseline: str = "lora") -> str:
    """One paragraph: where DPO helped CALYREX more than ``baseline``, where less."""
    seeds = result["seeds"]
    diffs = result["calyrex_gain_minus"][baseline]
    by: dict[str, list[str]] = {"more": [], "less": [], "no difference shown": []}
    for k, label in METRICS.items():
        by[judge(diffs[k], k)].append(label.rstrip(" ↑↓"))
    name = NAMES.get(baseline, baseline)
    parts = [
        f"On RuleWorld ({len(seeds)} training seed{'s' * (len(seeds) != 1)}), preference "
        f"training helped CALYREX more than {name} on: {', '.join(by['more']) or 'none'}; "
        f"less on: {', '.join(by['less']) or 'none'}; no difference shown on: "
        f"{', '.join(by['no difference shown']) or 'none'} (CALYREX's DPO gain minus {name}'s, "
        "95 % t-interval over the seeds)."
    ]
    if len(seeds) < 2:
        parts.append("With one seed there is no interval: every difference is unresolved.")
    else:
        parts.append(own_effects(result))
    return " ".join(parts)


def own_effects(result: dict[str, Any]) -> str:
    """DPO − SFT per method where its interval excludes zero, as better or worse."""
    said = []
    for method, gains in result["gains"].items():
        shown = []
        for k, label in METRICS.items():
            way = judge(gains[k], k)  # "more": DPO improved this metric, "less": it hurt it
            if way != "no difference shown":
                word = "better" if way == "more" else "worse"
                shown.append(f"{label.rstrip(' ↑↓')} {_points(gains[k]['mean'])} ({word})")
        said.append(f"{NAMES.get(method, method)}: {', '.join(shown) or 'no change shown'}")
    return "DPO against SFT alone (points, interval excluding zero): " + "; ".join(said) + "."


def markdown(result: dict[str, Any]) -> list[str]:
    """The block the docs show (rates with their 95 % intervals over seeds, then the gains)."""
    if not result.get("seeds"):
        return ["No seed of the RuleWorld DPO study has finished yet.", *partial(result)]
    cfg = result["config"]
    head = (
        f"Seeds {', '.join(map(str, result['seeds']))}; SFT {cfg['sft']['steps']} steps of "
        f"{cfg['sft']['batch_size']}, then DPO {cfg['steps']} steps of {cfg['batch_size']} pairs "
        f"(β {cfg['beta']}, learning rate {cfg['lr_scale']}× each method's SFT rate) on "
        f"{cfg['pairs']:,} pairs; n per rate below (examples per seed): "
        + ", ".join(
            f"{METRICS[k].rstrip(' ↑↓')} {v['n']}" for k, v in result["rows"]["calyrex-sft"].items()
        )
        + "."
    )
    return [head, "", *rates_table(result), "", *gains_table(result), "", verdict(result)]
