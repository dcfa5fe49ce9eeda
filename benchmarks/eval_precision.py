"""One study model's whole evaluation again at another precision, or with LoRA merged or not:
what it costs, and whether the verdicts hold (issue 37's 30-minute goal; the study itself is
pinned to fp32).

    python benchmarks/eval_precision.py results/study-real-smollm2-v2 calyrex-late8th-s0 \
        --precision bf16 --out /tmp/eval-bf16 [--json benchmarks/results/eval-precision.json]
    python benchmarks/eval_precision.py results/study-real-smollm2-v2 lora-s0 \
        --precision fp32 --lora merged --out /tmp/eval-merged \
        [--json benchmarks/results/eval-merge-lora.json]

Runs every suite the default study (:data:`calyrex.research.study.config.FULL`) runs on RUN
(its adapter must still be on disk) at ``--precision``, in ``--out``, then prints per suite the seconds
of both (the study's records, as the study ran them, against this run's), the share of
replies that came out identical and every headline metric side by side. Run it on an idle
machine: both timings are wall time. A bf16 run is only fast where the CPU has bf16 matmul
units (AMX, avx512_bf16); elsewhere it is emulated and far slower
(:mod:`calyrex.backbones.precision`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def _replies(folder: Path) -> dict[str, str | None]:
    out = {}
    for file in folder.glob("*.responses.jsonl"):
        for line in file.read_text().splitlines():
            row = json.loads(line)
            out[str(row["id"])] = row.get("response")
    return out


def _record(folder: Path) -> dict[str, Any]:
    name = folder.name.removesuffix("-nosys")
    file = folder / f"{name}.json"
    return json.loads(file.read_text()) if file.is_file() else {}


def compare(ref: Path, new: Path) -> list[dict[str, Any]]:
    """Per suite folder of run folder ``ref`` that ``new`` holds too: seconds of each, replies
    identical (share of the ids both have; None for suites without replies) and the scalar
    metrics of each."""
    rows = []
    for folder in sorted(p for p in ref.iterdir() if p.is_dir()):
        other = new / folder.name
        if not other.is_dir():
            continue
        a, b = _record(folder), _record(other)
        ra, rb = _replies(folder), _replies(other)
        common = ra.keys() & rb.keys()
        metrics = {
            k: (v, (b.get("metrics") or {}).get(k))
            for k, v in (a.get("metrics") or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        rows.append(
            {
                "suite": folder.name,
                "seconds": (a.get("seconds"), b.get("seconds")),
                "replies": len(common),
                "identical": sum(ra[i] == rb[i] for i in common) / len(common) if common else None,
                "metrics": metrics,
            }
        )
    return rows


def main() -> None:
    from calyrex.backbones.precision import cpu_flags
    from calyrex.research.study.config import FULL
    from calyrex.research.study.evaluate import eval_run
    from calyrex.research.study.plan import runs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("run")
    parser.add_argument("--precision", default="bf16", choices=("fp32", "bf16", "fp16"))
    parser.add_argument(
        "--lora",
        choices=("merged", "unmerged"),
        default="merged" if FULL.merge_lora else "unmerged",
        help="a LoRA run evaluated folded into the weights (PEFT merge_and_unload) or as adapters",
    )
    parser.add_argument(
        "--suites", nargs="+", metavar="KEY", help="only these suites (e.g. arc_easy piqa-nosys)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    # the default study's recipe and suites
    cfg = replace(FULL, precision=args.precision, merge_lora=args.lora == "merged")
    if args.suites:
        unknown = set(args.suites) - {s.key for s in cfg.suites}
        if unknown:
            raise SystemExit(f"unknown suites {sorted(unknown)}; choose from the study's keys")
        cfg = replace(cfg, suites=tuple(s for s in cfg.suites if s.key in args.suites))
    plan = {r: (a, s) for r, a, s in runs(cfg)}
    if args.run not in plan:
        raise SystemExit(f"unknown run {args.run!r}; choose from {sorted(plan)}")
    arm, seed = plan[args.run]
    lora = arm is not None and arm.method == "lora"
    adapter = None if arm is None else args.study / "train" / args.run / "adapter"
    if adapter is not None and not adapter.is_dir():
        raise SystemExit(f"{adapter} is not on disk: the study no longer keeps this run's adapter")
    first = arm is None or seed == cfg.seeds_of(arm)[0]  # as calyrex.research.study.real
    args.out.mkdir(parents=True, exist_ok=True)
    data = args.out / "data"
    if not data.exists():
        data.symlink_to((args.study / "data").resolve())  # the held-out access dialogues
    start = time.perf_counter()
    eval_run(cfg, args.run, adapter, args.out, first)
    wall = time.perf_counter() - start
    table = compare(args.study / "eval" / args.run, args.out / "eval" / args.run)
    variant = args.precision + (f", LoRA {args.lora}" if lora else "")
    print(f"{'suite':<22} {'s (study)':>10} {f's ({variant})':>10} {'identical':>10}")
    for row in table:
        ref, new = row["seconds"]
        same = "–" if row["identical"] is None else f"{100 * row['identical']:.1f} %"
        print(f"{row['suite']:<22} {ref or '–':>10} {new or '–':>10} {same:>10}")
        for key, (a, b) in row["metrics"].items():
            if a != b:
                print(f"    {key}: {a} → {b}")
    ref_total = sum(r["seconds"][0] or 0 for r in table)
    new_total = sum(r["seconds"][1] or 0 for r in table)
    print(
        f"total: study {ref_total / 60:.1f} min, {variant} {new_total / 60:.1f} min "
        f"(this run's wall {wall / 60:.1f} min); load average {os.getloadavg()[0]:.2f}"
    )
    if args.json:
        record = {
            "study": str(args.study),
            "run": args.run,
            "precision": args.precision,
            "lora": args.lora if lora else None,
            "cpu": platform.processor() or platform.machine(),
            "bf16_flags": sorted(cpu_flags()),
            "wall_s": round(wall, 1),
            "suites": table,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
