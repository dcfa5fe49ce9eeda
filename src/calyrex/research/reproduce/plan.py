"""``--dry-run``: every command, model and data set of the run, with sizes and GPU-hours, before
anything is loaded or downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import estimate
from .hub import Hub, human, local_size
from .launch import gpu_count, shell, train_argv
from .stages import Run, data_args

# where a suite's data comes from when the YAML names none (the runners' own defaults)
DEFAULTS: dict[str, str] = {
    "ifeval": "hf:google/IFEval",
    "long_ifeval": "hf:google/IFEval",
    "long_ifeval_context": "hf:Salesforce/wikitext",
    "glaive_fc": "hf:glaiveai/glaive-function-calling-v2",
    "mmlu": "hf:cais/mmlu",
    "gsm8k": "hf:openai/gsm8k",
    "squadv2": "hf:rajpurkar/squad_v2",
}
FETCH: dict[str, str] = {
    "sysbench": "git clone https://github.com/PKU-Baichuan-MLSystemLab/SysBench",
    "tensortrust": "git clone https://github.com/HumanCompatibleAI/tensor-trust-data",
    "msj": "downloaded on first use from github.com/KutalVolkan/many-shot-jailbreaking-dataset",
}


def _source_line(hub: Hub, role: str, name: str, source: str | None) -> str:
    if source is None:
        how = FETCH.get(name, "no default source: give it in the YAML's eval.data")
        return f"  {role:6s} {name:20s} (none given) {how}"
    if source.startswith("hf:"):
        repo = source[3:].split(":")[0].split("#")[0]
        return f"  {role:6s} {name:20s} {source}  {hub.size(repo, 'dataset')}"
    path = Path(source)
    if path.exists():
        return f"  {role:6s} {name:20s} {source}  {human(local_size(path))} (local)"
    return f"  {role:6s} {name:20s} {source}  MISSING locally — {FETCH.get(name, 'fetch it first')}"


def _train_sources(tc: Any) -> list[str]:
    specs = tc.data if isinstance(tc.data, list) else tc.data.split(",")
    return [s.strip() for s in specs if s.strip()]


def _conversations(specs: list[str]) -> int | None:
    total = 0
    for spec in specs:
        if "#" in spec:
            total += int(spec.rsplit("#", 1)[1])
        elif Path(spec).is_file():
            total += sum(1 for line in Path(spec).read_text().splitlines() if line.strip())
        else:
            return None
    return total


def data_lines(run: Run, hub: Hub) -> list[str]:
    lines = ["Data sets"]
    tc = run.cfg.train_config(run.methods[0], "-")
    for spec in _train_sources(tc):
        local = Path(spec.split("#")[0])
        source = str(local) if local.exists() else "hf:" + spec
        lines.append(_source_line(hub, "train", "sft", source))
    data = run.cfg.eval.data
    names = list(run.suites) + (["long_ifeval_context"] if "long_ifeval" in run.suites else [])
    for name in names:
        lines.append(_source_line(hub, "eval", name, data.get(name) or DEFAULTS.get(name)))
    spec = run.cfg.eval
    judged = [s for s in run.suites if s in ("sysbench", "msj")]
    if judged:
        judge = spec.judge or "none — judged suites will be recorded as skipped"
        lines.append(f"  judge  {judge} {spec.judge_model or ''} (for {', '.join(judged)})")
    for name, why in spec.not_run.items():
        lines.append(f"  left out: {name} ({why})")
    return lines


def command_lines(run: Run, gpus: int) -> list[str]:
    cfg, out, spec = run.cfg, run.out, run.cfg.eval
    lines = ["Commands (each stage writes where these would)"]
    for method in run.methods:
        lines.append(f"  [train]   {shell(train_argv(cfg, method, out / 'train' / method, gpus))}")
    data = data_args(spec.data, run.suites)
    for label in run.labels:
        argv = ["calyrex", "eval", "--model", cfg.model]
        if label != "base":
            argv += ["--adapter", str(out / "train" / label / "adapter")]
        argv += [
            "--suite",
            ",".join(run.suites),
            "--out",
            str(out / "eval" / label),
            "--label",
            label,
        ]
        argv += ["--data", *data] if data else []
        argv += (
            ["--judge", spec.judge, "--judge-model", spec.judge_model or ""] if spec.judge else []
        )
        lines.append(f"  [eval]    {shell(argv)}")
    argv = ["calyrex", "analyze", "--model", cfg.model, "--out", str(out / "analyze")]
    lines.append(f"  [analyze] {shell(argv)}")
    ab = cfg.ablate
    argv = ["calyrex", "ablate", "--model", cfg.model, "--config", cfg.train["calyrex"]]
    argv += ["--presets", *ab.presets, "--suite", ab.suites, "--out", str(out / "ablate")]
    ablate_data = data_args(ab.data or spec.data, ab.suites.split(","))
    argv += ["--eval-data", *ablate_data] if ablate_data else []
    lines.append(f"  [ablate]  {shell(argv)}")
    runs = [str(out / "eval" / label) for label in run.labels]
    argv = [
        "calyrex",
        "report",
        "--runs",
        *runs,
        "--baseline",
        "base",
        "--out",
        str(out / "report"),
    ]
    lines.append(f"  [report]  {shell(argv)}   + OUT/report.md (the paper's table)")
    return lines


def estimate_rows(
    run: Run, bench: str | None, gpus: int
) -> tuple[list[tuple[str, str, float]], str]:
    """[(stage, unit, GPU-hours)] and the basis of the rates."""
    cfg = run.cfg
    found = estimate.geometry(cfg, cfg.model)
    if found is None:
        return [], None
    g, hf = found
    r = estimate.rates(cfg.estimate, bench)
    rows = []
    for method in run.methods:
        tc = cfg.train_config(method, "-")
        if tc.max_steps > 0:
            sequences = tc.max_steps * tc.batch_size * tc.grad_accum * max(1, gpus)
        else:
            n = _conversations(_train_sources(tc))
            sequences = int((n or 0) * tc.epochs)
        fl = estimate.train_flops(g, hf, method, tc, cfg.estimate, sequences)
        rows.append(("train", method, fl / r.train.get(method, r.train["calyrex"]) / 3600))
    per_model = estimate.eval_seconds(g, run.suites, r, cfg.eval.max_new_tokens) / 3600
    rows += [("eval", label, per_model) for label in run.labels]
    examples = cfg.analyze.max_examples or 128
    rows.append(
        ("analyze", f"{examples} examples", estimate.analyze_seconds(g, examples, r) / 3600)
    )
    tc = cfg.train_config("calyrex", "-")
    n = _conversations(_train_sources(tc)) or 0
    sequences = (
        cfg.ablate.steps * tc.batch_size * tc.grad_accum if cfg.ablate.steps else int(n * tc.epochs)
    )
    ablate = sum(
        estimate.train_flops(g, hf, "calyrex", _with(tc, p), cfg.estimate, sequences)
        / r.train["calyrex"]
        for p in cfg.ablate.presets
    )
    suites = cfg.ablate.suites.split(",")
    ablate += (len(cfg.ablate.presets) + 1) * estimate.eval_seconds(
        g, suites, r, cfg.ablate.max_new_tokens
    )
    rows.append(("ablate", f"{len(cfg.ablate.presets)} presets", ablate / 3600))
    return rows, r


def _with(tc: Any, preset: str) -> Any:
    import dataclasses

    return dataclasses.replace(tc, placement=preset, layers=None)


def print_plan(run: Run, stages: list[str], bench: str | None = None) -> dict[str, Any]:
    """Print the plan; return it (the estimate rows included) for tests and JSON."""
    hub, gpus = Hub(), gpu_count()
    print(f"== calyrex reproduce: {run.cfg.name} -> {run.out}  (dry run: nothing is loaded) ==")
    print(
        f"stages: {' '.join(stages)}   methods: {' '.join(run.methods)}   suites: {','.join(run.suites)}"
    )
    launch = (
        f"accelerate launch, configs/accelerate/{run.cfg.launch}.yaml"
        if gpus > 1
        else "one process"
    )
    print(f"GPUs visible: {gpus} -> training in {launch}")
    print(
        f"Model\n  {run.cfg.model}  {hub.size(run.cfg.model) if not Path(run.cfg.model).exists() else human(local_size(Path(run.cfg.model))) + ' (local)'}"
    )
    print("\n".join(data_lines(run, hub) + command_lines(run, gpus)))
    rows, rates = estimate_rows(run, bench, gpus)
    if rates is None:
        print("Estimate: none — the model's shape is unknown offline (add `geometry:` to the YAML)")
        return {"rows": [], "basis": None, "total": None, "hub": hub.unreachable}
    basis = rates.basis
    print(f"Estimate\n| stage | unit | {rates.unit} |\n|---|---|---|")
    for stage in [s for s in stages if s != "report"]:
        for st, unit, hours in rows:
            if st == stage:
                print(f"| {st} | {unit} | {hours:.3g} |")
    total = sum(h for st, _, h in rows if st in stages)
    print(f"| **total** | | **{total:.3g}** |\nbasis: {basis}")
    if hub.unreachable:
        print(f"note: hub metadata could not be read ({hub.unreachable}); sizes above are unknown")
    return {"rows": rows, "basis": basis, "total": total, "hub": hub.unreachable}
