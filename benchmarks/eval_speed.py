"""The evaluation levers, measured in one run on SmolLM2 (fp32): each variant of a suite evaluated
on the same items, its seconds, prompt tokens run and the ratio to the first variant.

    python benchmarks/eval_speed.py [--limit 30] [--batch 16] [--only tensortrust]

* ``tensortrust`` and ``msj_hijack`` (k = 4, 16): every prompt prefilled alone against the
  prompts of one scoring unit (a defence's attack and right code; a sample's nested k-shot
  prompts and right code) sharing their common prefix's prefill
  (:mod:`calyrex.eval.prefill`); the replies of the two must be the same and their
  log-probabilities agree (the largest difference is printed);
* ``sys_ifeval``: ``generate`` (128 tokens) on 4 × ``--batch`` prompts in batches of ``--batch``
  against twice and four times that.

The load average is printed: wall time on a machine shared with another job says little.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

SHARED = ("tensortrust", "msj_hijack")


def _run(suite: str, limit: int, batch: int, new: int, model: Any, tok: Any, out: Path) -> float:
    from calyrex.eval.bench import EvalConfig
    from calyrex.eval.generate import Generator
    from calyrex.eval.runner import evaluate
    from calyrex.research.study.real import eval_data

    shots = (4, 16) if suite == "msj_hijack" else None
    config = EvalConfig(
        data=eval_data(), limit=limit, max_new_tokens=new, batch_size=batch, shots=shots
    )
    start = time.perf_counter()
    evaluate([suite], out, config, loader=lambda: (Generator(model, tok, new, batch), None))
    return time.perf_counter() - start


def _rows(out: Path, suite: str) -> dict[str, dict]:
    lines = (out / f"{suite}.responses.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def shared_prefix(suite: str, limit: int, batch: int, model: Any, tok: Any, root: Path) -> list:
    """Alone vs a unit's prefix once: seconds, prompt tokens, replies and log-probabilities."""
    import calyrex.eval.prefill as prefill

    shared = prefill._shared_prefix
    lines, runs = [], {}
    for name, fn in (("each prompt alone", lambda encs, owner: None), ("unit prefix once", shared)):
        prefill._shared_prefix = fn
        out = root / f"{suite}-{len(runs)}"
        try:
            seconds = _run(suite, limit, batch, 24, model, tok, out)
        finally:
            prefill._shared_prefix = shared
        record = json.loads((out / f"{suite}.json").read_text())
        runs[name] = (seconds, record.get("tokens", {}).get("prompt_tokens"), _rows(out, suite))
    first = next(iter(runs.values()))[0]
    for name, (seconds, tokens, _) in runs.items():
        ratio = first / seconds
        lines.append(f"{suite} {name:18s} {seconds:7.1f} s  {tokens} prompt tokens  ×{ratio:.2f}")
    a, b = (rows for _, _, rows in runs.values())
    same = sum(a[k].get("response") == b[k].get("response") for k in a)
    diffs = [
        abs(a[k]["logprobs"][t] - b[k]["logprobs"][t])
        for k in a
        for t in a[k].get("logprobs") or {}
    ]
    lines.append(
        f"{suite} replies that are the same: {same} of {len(a)}; "
        f"largest log-probability difference {max(diffs, default=0.0):.2e}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--only", choices=(*SHARED, "sys_ifeval"), help="one suite's lever")
    args = parser.parse_args()
    from calyrex.adapters.loading import load_model

    model, tok = load_model("smollm2", dtype="fp32")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    levers = {*SHARED, "sys_ifeval"} if args.only is None else {args.only}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for suite in (s for s in SHARED if s in levers):
            lines += shared_prefix(suite, args.limit, args.batch, model, tok, root)
        times = {}
        for batch in (args.batch, 2 * args.batch, 4 * args.batch) if "sys_ifeval" in levers else ():
            out = root / f"ifeval{batch}"
            # 4 × --batch prompts: the largest batch size holds them in one batch
            times[batch] = _run("sys_ifeval", 4 * args.batch, batch, 128, model, tok, out)
        for batch, seconds in times.items():
            ratio = times[args.batch] / seconds
            lines.append(f"sys_ifeval batch {batch:3d}          {seconds:7.1f} s  ×{ratio:.2f}")
    print("\n".join([*lines, f"load average {os.getloadavg()[0]:.2f} at the end"]))


if __name__ == "__main__":
    main()
