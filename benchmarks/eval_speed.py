"""The evaluation levers, measured in one run on SmolLM2 (fp32): each variant of a suite evaluated
on the same items, its seconds and the ratio to the first variant.

    python benchmarks/eval_speed.py [--limit 30] [--batch 16]

* ``tensortrust``: every reply 24 tokens (how the base's powered run was made) against the
  grant-line replies of :data:`calyrex.eval.grant.GRANT_TOKENS` (an extraction attack's
  reply is still read whole); the verdicts of the two must agree on the grant;
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


def _run(suite: str, limit: int, batch: int, new: int, model, tok, out: Path) -> float:
    from calyrex.eval.bench import EvalConfig
    from calyrex.eval.generate import Generator
    from calyrex.eval.runner import evaluate
    from calyrex.research.study.data import eval_data

    config = EvalConfig(data=eval_data(), limit=limit, max_new_tokens=new, batch_size=batch)
    start = time.perf_counter()
    evaluate([suite], out, config, loader=lambda: (Generator(model, tok, new, batch), None))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--only", choices=("tensortrust", "sys_ifeval"), help="one suite's lever")
    args = parser.parse_args()
    import calyrex.eval.tensortrust as tt
    from calyrex.adapters.loading import load_model
    from calyrex.eval.data import replies_file
    from calyrex.eval.grant import granted

    model, tok = load_model("smollm2", dtype="fp32")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        times, replies = {}, {}
        levers = {"tensortrust", "sys_ifeval"} if args.only is None else {args.only}
        for name, grant_tokens in (
            ()
            if "tensortrust" not in levers
            else (("every reply 24 tokens", 24), ("grant line 8 tokens", 8))
        ):
            tt.GRANT_TOKENS = grant_tokens
            out = root / f"tt{grant_tokens}"
            times[name] = _run("tensortrust", args.limit, args.batch, 24, model, tok, out)
            rows = replies_file(out, "tensortrust").read_text().splitlines()
            replies[name] = {r["id"]: r["response"] for r in map(json.loads, rows)}
        lines = []
        if times:
            first = next(iter(times))
            for name, seconds in times.items():
                lines.append(
                    f"tensortrust {name:24s} {seconds:7.1f} s  ×{times[first] / seconds:.2f}"
                )
            a, b = replies.values()
            same = sum(granted(a[k] or "") == granted(b[k] or "") for k in a)
            lines.append(f"tensortrust grant verdicts that agree: {same} of {len(a)}")
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
