"""The study's README section and plot, rendered from its committed result file.

One row per variant (base first), the study's metrics as columns, each with its 95 % interval;
then, per CALYREX variant, where its interval separates from LoRA's (the LoRA trained for as many
steps, when the study has one); then the issue's goal — held-out rules and attack success at
least LoRA's (no interval separating it below) with task accuracy exactly the base's — and which
variants meet it, if any.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...eval.intervals import separated, yerr
from .report import cell, run_line

COLUMNS = (
    ("rule_adherence_heldout", "held-out ↑"),
    ("rule_adherence_single", "single ↑"),
    ("multiturn_adherence", "multi-turn ↑"),
    ("session_stability", "stability ↑"),
    ("attack_families_success", "attack families ↓"),
    ("attack_control_success", "no attack ↓"),
    ("hijack_success", "hijack ↓"),
    ("access_granted_rightful", "rightful ↑"),
    ("task_accuracy", "tasks ↑"),
)
GOAL = ("rule_adherence_heldout", "attack_families_success")  # vs LoRA; tasks: exactly the base's
REUSED = (
    "\\* trained by an earlier process of the same code on the same corpus and reused (its time "
    "is not in the wall or CPU time above). Train minutes are wall time on a shared machine."
)
PLOT_COLUMNS = ("rule_adherence_heldout", "attack_families_success", "task_accuracy")


def _below(a: dict, b: dict, lower_is_better: bool) -> bool:
    """``a`` worse than ``b`` with non-overlapping 95 % intervals."""
    return separated(a, b) == (1 if lower_is_better else -1)


def _above(a: dict, b: dict, lower_is_better: bool) -> bool:
    return _below(b, a, lower_is_better)


def table(methods: dict[str, dict], variants: dict[str, dict], steps: int) -> str:
    head = "| variant | layers | params | steps | loss | train min | "
    head += " | ".join(c for _, c in COLUMNS)
    lines = [head + " |", "|---" * (len(COLUMNS) + 6) + "|"]
    for name, metrics in methods.items():
        v = variants.get(name, {})
        layers = ",".join(map(str, v["layers"])) if v.get("layers") else v.get("placement", "–")
        layers = "all (LoRA)" if v.get("method") == "lora" else layers
        params = f"{v['trainable_params']:,}" if v else "–"
        loss = f"{v['train_loss']:.3f}" if v else "–"
        minutes = f"{v['train_seconds'] / 60:.1f}{'*' if v.get('reused') else ''}" if v else "–"
        n_steps = (v.get("steps") or steps) if v else "–"
        cells = " | ".join(cell(metrics.get(k)) for k, _ in COLUMNS)
        lines.append(
            f"| {name} | {layers if v else '–'} | {params} | {n_steps} | {loss} | {minutes} "
            f"| {cells} |"
        )
    return "\n".join(lines) + "\n"


def reference(v: dict, variants: dict[str, dict]) -> str:
    """The LoRA a variant is judged against: the one trained for as many steps, else ``lora``
    (else the first LoRA of the study)."""
    loras = [n for n, w in variants.items() if w["method"] == "lora"]
    same = [n for n in loras if variants[n]["steps"] == v["steps"]]
    return same[0] if same else "lora" if "lora" in loras else loras[0]


def verdicts(methods: dict[str, dict], variants: dict[str, dict]) -> list[str]:
    """Per CALYREX variant: separations from its LoRA, and whether it meets the goal."""
    if not any(v["method"] == "lora" for v in variants.values()):
        return ["LoRA was not run: nothing to compare with."]
    base, lines, met = methods["base"], [], []
    for name, v in variants.items():
        if v["method"] != "calyrex":
            continue
        ref = reference(v, variants)
        m, lora = methods[name], methods[ref]
        pairs = [(k, f"{lab} {m[k]['rate']:.2f} vs {lora[k]['rate']:.2f}") for k, lab in COLUMNS]
        better = [text for k, text in pairs if _above(m[k], lora[k], "success" in k)]
        worse = [text for k, text in pairs if _below(m[k], lora[k], "success" in k)]
        said = [f"better on {', '.join(better)}"] if better else []
        said += [f"worse on {', '.join(worse)}"] if worse else []
        lines.append(f"- **{name} vs {ref}**: {'; '.join(said) or 'no separation'}.")
        held = all(not _below(m[k], lora[k], "success" in k) for k in GOAL)
        if held and m["task_accuracy"]["rate"] == base["task_accuracy"]["rate"]:
            met.append(f"{name} (vs {ref})")
    goal = (
        f"**Goal met by**: {', '.join(met)} (held-out rules and attack-family success not "
        "separated below LoRA's, task accuracy exactly the base's)."
        if met
        else "**Goal met by no variant**: none has both held-out adherence and attack-family "
        "success within LoRA's reach (intervals not separated on the wrong side) with task "
        "accuracy exactly the base's."
    )
    return [*lines, "", goal]


def _seeds(setup: dict) -> str:
    seeds = setup.get("train_seeds", [setup["seed"]])
    if len(seeds) == 1:
        return f"training seed {seeds[0]}"
    return (
        f"training seeds {', '.join(map(str, seeds))} (each rate the mean over the seeds, its "
        "interval the wider of the seeds' t-interval and the examples' own; loss the mean)"
    )


def render_study(path: Path) -> str:
    entry = json.loads(path.read_text())
    methods, setup = entry["results"]["methods"], entry["results"]["setup"]
    ev = setup["eval"]
    notes = "; ".join(f"{n}: {v['note']}" for n, v in setup["variants"].items() if v["note"])
    return (
        f"{run_line(entry, path.name)} "
        f"{setup['sft_conversations']:,} SFT conversations, {setup['steps']} steps of batch "
        f"{setup['batch_size']} unless noted, {_seeds(setup)}, the demo's learning "
        f"rates; {ev['n']} examples per suite ({ev['family_n']} per attack family, "
        f"{ev['turns']}-turn sessions). {notes}.\n\n"
        f"{table(methods, setup['variants'], setup['steps'])}\n{REUSED}\n\n"
        + "\n".join(verdicts(methods, setup["variants"]))
        + "\n"
    )


def plot(methods: dict[str, dict], path: Path) -> None:
    """Grouped bars with 95 % error bars: :data:`PLOT_COLUMNS` per variant (base first)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(methods)
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(PLOT_COLUMNS)
    for i, key in enumerate(PLOT_COLUMNS):
        xs = [j + (i - (len(PLOT_COLUMNS) - 1) / 2) * width for j in range(len(names))]
        entries = [methods[n][key] for n in names]
        ys = [e["rate"] for e in entries]
        ax.bar(xs, ys, width, yerr=yerr(entries), capsize=2, label=key.replace("_", " "))
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set(ylabel="rate (95 % interval)", ylim=(0, 1.05))
    ax.set_title("CALYREX variants vs parameter-matched LoRA (RuleWorld, one seed)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
