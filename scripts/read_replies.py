"""Read a sample of one model's replies beside their verdicts, suite by suite: the check by eye
that a scorer's verdicts are right before any figure from them is reported.

    python scripts/read_replies.py results/study-real-smollm2-v2/eval/base [--suite tensortrust]
        [--n 6] [--seed 0] [--width 160]

For every suite folder of the run (``SUITE/SUITE.responses.jsonl``) it draws ``n`` scored items at
random (seeded) and prints each item's verdict fields (``SUITE.details.jsonl``, the scorer's own
per-item record) followed by the replies that belong to it (a Tensor Trust defence: its attack
and its right code; a SEP row: both conditions), one line each, cut to ``width`` characters.
A suite without per-item details (many-shot, the held-out access dialogues) prints its replies.
A ``calyrex eval --cases`` run (``RUN/cases-outputs.jsonl``) prints ``n`` groups of each kind
(or ``n`` cases of each category, for cases without a group), each case with its verdict.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from calyrex.eval.cases import by_key, group_verdict
from calyrex.eval.data import replies_file

# the field that names a details row's item, per scorer (the first one a row has)
ITEM_KEYS = ("defence", "id", "key", "sample")


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def item_of(row: dict) -> str | None:
    return next((str(row[k]) for k in ITEM_KEYS if k in row), None)


def replies_of(item: str, replies: dict[str, str]) -> list[tuple[str, str]]:
    """The replies of ``item``: its own id, or the ids it prefixes (``ITEM:part``)."""
    if item in replies:
        return [(item, replies[item])]
    return [(rid, text) for rid, text in replies.items() if rid.startswith(f"{item}:")]


def show(suite_dir: Path, n: int, rng: random.Random, width: int) -> None:
    name = suite_dir.name.removesuffix("-nosys")
    replies = {
        str(r["id"]): str(r.get("response", r.get("skipped", "")))
        for r in _rows(replies_file(suite_dir, name))
    }
    if not replies:
        return
    details = _rows(suite_dir / f"{name}.details.jsonl")
    print(f"\n=== {suite_dir.name}: {len(replies)} replies, {len(details)} scored items")
    if not details:
        for rid in rng.sample(sorted(replies), min(n, len(replies))):
            print(f"  {rid}: {replies[rid][:width]!r}")
        return
    for row in rng.sample(details, min(n, len(details))):
        item = item_of(row)
        verdict = {k: v for k, v in row.items() if k not in (*ITEM_KEYS, "prompt", "text")}
        print(f"- {item}: {json.dumps(verdict)[:width]}")
        for rid, text in replies_of(item or "", replies):
            print(f"    {rid}: {text[:width]!r}")


def show_cases(path: Path, n: int, rng: random.Random, width: int) -> None:
    rows = _rows(path)
    units = by_key([{"unit": r.get("group") or r["id"], **r} for r in rows], "unit")
    kinds: dict[str, list[str]] = {}
    for unit, members in units.items():
        kinds.setdefault(group_verdict(members)[0], []).append(unit)
    print(f"\n=== {path}: {len(rows)} cases, {len(units)} units")
    for kind, names in kinds.items():
        print(f"\n--- {kind}: {len(names)}")
        for unit in rng.sample(names, min(n, len(names))):
            verdict = group_verdict(units[unit])[1]
            held = "skipped" if verdict is None else "holds" if verdict else "does not hold"
            print(f"- {unit}: {held}")
            for r in units[unit]:
                verdict = "pass" if r["pass"] else f"FAIL {'; '.join(r['failed'])[:80]}"
                reply = r["reply"] if r["reply"] is not None else f"(skipped: {r['skipped']})"
                print(f"    {r['category']}: {verdict}: {reply[:width]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--suite", action="append", help="only these suite folders")
    parser.add_argument("--n", type=int, default=6, help="items per suite")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=160)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if (args.run_dir / "cases-outputs.jsonl").is_file():
        show_cases(args.run_dir / "cases-outputs.jsonl", args.n, rng, args.width)
    for suite_dir in sorted(p for p in args.run_dir.iterdir() if p.is_dir()):
        if not args.suite or suite_dir.name in args.suite:
            show(suite_dir, args.n, rng, args.width)


if __name__ == "__main__":
    main()
