"""What one model's evaluation cost, suite by suite: seconds, prompts, tokens, tokens per second.

    python benchmarks/eval_cost.py results/study-real-smollm2-v2/eval/base [--budget 30]

Reads the records ``calyrex eval`` (and ``calyrex study real``'s eval stage) wrote in one run's
folder (``SUITE/NAME.json``: ``seconds`` and ``tokens``, what the model computed: prompts,
real and padded prompt tokens, teacher-forced target tokens, generated tokens —
:data:`calyrex.eval.generate.COST_KEYS`; records written before a path counted show "–") and
prints one row per suite and the total against a budget in minutes (issue 37: one model in 30 minutes on the 2-core
CPU). The machine's load average is printed with it: the timings are wall time, so a loaded
machine makes them longer, and a figure is only as good as the load it was taken under.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

# (record key, header, width)
COLUMNS = (
    ("prompts", "prompts", 8),
    ("prompt_tokens", "prompt tok", 11),
    ("padded_tokens", "padded tok", 11),
    ("target_tokens", "target tok", 11),
    ("new_tokens", "new tok", 8),
)


def rows(run_dir: Path) -> list[dict]:
    out = []
    for record_file in sorted(run_dir.glob("*/*.json")):
        record = json.loads(record_file.read_text())
        if record_file.name in ("run.json", "summary.json") or "suite" not in record:
            continue
        tokens = record.get("tokens") or {}
        row = {"suite": record_file.parent.name, "seconds": record.get("seconds")}
        out.append(row | {key: tokens.get(key) for key, _, _ in COLUMNS})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--budget", type=float, default=30.0, help="minutes")
    args = parser.parse_args()
    table = rows(args.run_dir)
    print(f"{'suite':<22} {'seconds':>8} " + " ".join(f"{h:>{w}}" for _, h, w in COLUMNS), end="")
    print(f" {'tok/s':>7}")
    total = 0.0
    for r in table:
        s = r["seconds"]
        total += s or 0.0
        rate = f"{r['prompt_tokens'] / s:7.0f}" if s and r["prompt_tokens"] else "      –"
        cells = [f"{r[k]:>{w}}" if r[k] is not None else f"{'–':>{w}}" for k, _, w in COLUMNS]
        print(f"{r['suite']:<22} {s if s is not None else '–':>8} {' '.join(cells)} {rate}")
    print(
        f"total {total / 60:.1f} min of a {args.budget:.0f}-minute budget "
        f"({'within' if total <= 60 * args.budget else 'over'}); "
        f"load average now {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
