"""The README's RuleWorld results, generated from committed result files (never retyped).

``docs/ruleworld/NAME.json`` holds one demo run: ``{"command", "seconds", "results"}`` (its
``results.json`` and the wall time and command of its ``run.json``); ``study.json`` the
variant study (:mod:`.study_report` renders it). :func:`section` renders
every such file — the command, the wall time, the table with 95 % intervals and the
comparisons whose intervals do not overlap — and ``python scripts/ruleworld_readme.py`` puts it
between its ``<!-- BEGIN ruleworld-results -->`` and ``<!-- END ruleworld-results -->`` markers
(``scripts/doc_blocks.py``; ``--check`` fails when the page is stale).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ...eval.intervals import is_rate, separated
from .report import NOTE, PLOTS, markdown_table, rows, run_line
from .study_report import render_study

BEGIN, END = "<!-- BEGIN ruleworld-results -->", "<!-- END ruleworld-results -->"
PAIRS = (("calyrex", "lora"), ("calyrex", "parallel_mlp"), ("calyrex", "base"), ("lora", "base"))


def record(run_dir: Path, docs: Path, name: str) -> Path:
    """Copy one demo run (``results.json``, ``run.json``, plots) into ``docs`` as ``NAME.*``."""
    run = json.loads((run_dir / "run.json").read_text())
    results = json.loads((run_dir / "results.json").read_text())
    docs.mkdir(parents=True, exist_ok=True)
    out = docs / f"{name}.json"
    keys = ("command", "seconds", "cpu_seconds", "cpus", "load_average")
    entry = {k: run[k] for k in keys if k in run}
    entry["results"] = results
    out.write_text(json.dumps(entry, indent=2) + "\n")
    for *_, plot in PLOTS:
        shutil.copyfile(run_dir / plot, docs / f"{name}-{plot}")
    return out


def claims(methods: dict[str, dict]) -> list[str]:
    """One line per method pair: the metrics where the intervals separate, and how many do not."""
    lines = []
    for x, y in PAIRS:
        if x not in methods or y not in methods:
            continue
        better, worse, tied = [], [], 0
        for key, label in rows(methods):
            a, b = methods[x][key], methods[y][key]
            if not (is_rate(a) and is_rate(b)):
                continue
            sign = separated(a, b) * (-1 if "↓" in label else 1)
            text = f"{label.strip()} {a['rate']:.2f} vs {b['rate']:.2f}"
            (better if sign > 0 else worse if sign < 0 else []).append(text)
            tied += sign == 0
        said = [f"better on {', '.join(better)}"] if better else []
        said += [f"worse on {', '.join(worse)}"] if worse else []
        said.append(
            f"no separation on the other {tied}" if said else f"no separation on any of {tied}"
        )
        lines.append(f"- **{x} vs {y}**: " + "; ".join(said) + ".")
    return lines


def _setup_line(setup: dict) -> str:
    ev = setup["eval"]
    params = ", ".join(
        f"{m} {setup[m]['trainable_params']:,}" for m in ("calyrex", "lora", "parallel_mlp")
    )
    grouped = " grouped by length" if setup.get("group_by_length") else ""
    return (
        f"{setup['sft_conversations']:,} SFT conversations, {setup['steps']} steps of batch "
        f"{setup['batch_size']}{grouped}, training seeds "
        f"{setup.get('train_seeds', [setup['seed']])}; {ev['n']} examples per suite "
        f"({ev.get('long_n') or ev['n']} per context length up to "
        f"{max(ev['context_tokens']):,} tokens, {ev.get('family_n') or ev['n']} per attack "
        f"family, {ev['turns']}-turn sessions); trainable parameters: {params}."
    )


def render_sizing(entry: dict, name: str) -> str:
    """``benchmarks/ruleworld_sizing.py``'s record: what ``--full``'s shape rests on."""
    r = entry["results"]
    pad, tps = r["padding_share"], r["train_tokens_per_second"]
    gen, lora, ratio = r["long_prompt_seconds_per_example"], r["lora_generation"], r["ratios"]
    return (
        f"{run_line(entry, name)} What `--full`'s shape rests on, measured in this one run:\n\n"
        f"- padded share of `--full`'s first 100 training batches: {pad['random']:.2f} in random "
        f"batches, {pad['grouped']:.2f} grouped by length;\n"
        f"- training speed (calyrex, 10 steps): {tps['random']:,.0f} non-padding tokens/s in "
        f"random batches, {tps['grouped']:,.0f} grouped "
        f"(×{ratio['train_tokens_per_second_grouped_vs_random']});\n"
        f"- greedy generation at 2,048 tokens: {gen['2048_padded_batch']:.2f} s per example in "
        f"one padded batch, {gen['2048_alone']:.2f} s alone "
        f"(×{ratio['long_prompt_padded_vs_alone_2048']}); at 4,096 tokens alone "
        f"{gen['4096_alone']:.2f} s (×{ratio['long_prompt_4096_vs_2048_alone']} the 2,048-token "
        f"cost);\n"
        f"- LoRA answering the same short prompts: {lora['adapter_seconds']:.1f} s as a PEFT "
        f"adapter, {lora['merged_seconds']:.1f} s merged "
        f"(×{ratio['lora_merged_vs_adapter_time']}).\n"
    )


def render(path: Path) -> str:
    entry = json.loads(path.read_text())
    if entry.get("kind") == "study":
        return render_study(path)
    if entry.get("kind") == "sizing":
        return render_sizing(entry, path.name)
    methods, setup = entry["results"]["methods"], entry["results"]["setup"]
    note = f"{entry['note']} " if entry.get("note") else ""  # what the record predates
    plots = " ".join(f"![{p[3]}](docs/ruleworld/{path.stem}-{p[3]})" for p in PLOTS)
    return (
        f"{run_line(entry, path.name)} {note}{_setup_line(setup)}\n\n"
        f"{markdown_table(methods)}\n"
        "Where the 95 % intervals do not overlap (↓ rows: lower is better):\n\n"
        + "\n".join(claims(methods))
        + f"\n\n{plots}\n"
    )


def section(docs: Path) -> str:
    files = sorted(docs.glob("*.json"))
    body = "\n".join(render(f) for f in files) if files else "No result files yet.\n"
    head = (
        "<!-- generated by scripts/ruleworld_readme.py from docs/ruleworld/*.json: "
        "do not edit by hand -->\n"
    )
    return f"{BEGIN}\n{head}{NOTE}\n\n{body}{END}"
