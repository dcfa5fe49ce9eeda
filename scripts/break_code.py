"""Break the code on purpose, one break at a time, and count the tests that fail.

Each break replaces one line (or expression) of the span, mask, block, cache, adapter-file,
baseline, training-config or statistics code with a plausible bug; the guarding test files run on the broken
copy; the break is reverted. A break no test catches is a hole in the tests (docs/testing.md,
"Broken on purpose").

    git worktree add --detach /tmp/scratch HEAD
    python scripts/break_code.py --tree /tmp/scratch --out results/breaks/code.jsonl [NAME …]
    python scripts/break_code.py --table results/breaks/code.jsonl [--check]

``--tree`` is a scratch checkout (the breaks are written into it and reverted, one at a time);
the tests run with this interpreter and the tree's ``src`` first on ``PYTHONPATH``. ``--out`` is
appended to and resumed from (a break already recorded is skipped); ``NAME`` runs the breaks
whose description contains it. ``--table`` rewrites docs/testing.md's ``code-breaks`` block from
the record; ``--check`` changes nothing and exits 1 when the block is stale.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from doc_blocks import rewrite

ROOT = Path(__file__).resolve().parents[1]
CORE = [
    *(f"tests/test_{n}.py" for n in ("mask", "model", "core_v2", "cal_cache", "adapter_io")),
    *(f"tests/test_{n}.py" for n in ("templates", "span_paths", "placement", "variants", "chat")),
    *(f"tests/test_{n}.py" for n in ("adapter_contract", "model_contract", "prefill")),
]
COUNTS = ["tests/test_training.py", "-k", "parameter_counts or closed_form"]
POLICY = [
    "tests/test_serve.py",
    "tests/test_serve_errors.py",
    "-k",
    "system or developer or policy",
]

MASK, BLOCK, CACHE = "core/mask.py", "core/block.py", "core/cal_cache.py"
NAMES, IO, LAYER = "core/names.py", "core/adapter_io.py", "core/layer.py"
CHAT, MARKERS, POLICY_PY = "span/chat.py", "span/markers.py", "span/policy.py"
BASELINES = "adapters/baselines.py"
STATS = [
    *(f"tests/test_{n}.py" for n in ("intervals_over_seeds", "eval_report", "study_real")),
    *(f"tests/test_{n}.py" for n in ("eval_cases", "continuous_scores", "scorers")),
    *("-k", "not quick"),
]
INTERVALS, REPORT = "eval/intervals.py", "research/study/report.py"
CHECKS = [
    *("tests/test_training.py", "tests/test_cli_config.py", "tests/test_dpo.py", "-k"),
    "bad or refus or checked or invalid or unknown or error or config",
]
TRAIN_CONFIG = "training/config.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("mask: span keys visible to every query (no causal order inside the span)", MASK, "    return causal & key_valid[:, None, :]", "    return torch.ones_like(causal) & key_valid[:, None, :]", CORE),
    ("mask: padding keys visible (key_valid ignored)", MASK, "    return causal & key_valid[:, None, :]", "    return causal", CORE),
    ("mask: span gather indices reversed", MASK, "idx = order[:, :s_max]  # (B, S_max)", "idx = order[:, :s_max].flip(1)  # (B, S_max)", CORE),
    ("mask: a call's part of the system mask off by one token", MASK, "part = system_mask[:, past : past + length].bool()", "part = system_mask[:, past + 1 : past + 1 + length].bool()", CORE),
    ("mask: packed documents never detected", MASK, "    return bool(back.any())", "    return False", CORE),
    ("mask: host-gate span flags shifted by one position", MASK, "return flags.scatter_(1, pos, True)[:, :length]", "return flags.scatter_(1, pos, True)[:, 1 : length + 1]", CORE),
    ("block: W_O starts random (not 0)", BLOCK, "        nn.init.zeros_(self.cal_o_proj.weight)", "        nn.init.normal_(self.cal_o_proj.weight, std=cfg.init_std)", CORE),
    ("block: SwiGLU W_D starts random (not 0)", BLOCK, "        nn.init.zeros_(self.cal_down_proj.weight)", "        nn.init.normal_(self.cal_down_proj.weight, std=std)", CORE),
    ("block: rows that see no key get the attention output", BLOCK, "        h1 = torch.where(keep, h1, h)", "        h1 = h1", CORE),
    ("block: rows that see no key get the FFN", BLOCK, "torch.where(keep, h1 + self.cal_ffn(h1), h1)", "h1 + self.cal_ffn(h1)", CORE),
    ("block: cached keys joined after the new ones (keys and values out of step)", BLOCK, "return torch.cat([past[0].to(new[0].dtype), new[0]], 2), torch.cat(", "return torch.cat([new[0], past[0].to(new[0].dtype)], 2), torch.cat(", CORE),
    ("block: no attention mask at all", BLOCK, "attend = None if span.full else (span.visible | ~span.has_key[..., None])[:, None]", "attend = None", CORE),
    ("block: no zero gradient path for a batch without a span", BLOCK, "    return sum(p.sum() for p in params) * 0.0", "    return None", CORE),
    ("block: init_from_host leaves the biases", BLOCK, "                mine.bias.copy_(theirs.bias)", "                pass", CORE),
    ("block: init_from_host leaves the attention norm", BLOCK, "        self.cal_attn_norm.weight.copy_(host_layer.input_layernorm.weight)", "        pass", CORE),
    ("block: host gate biases the span keys instead of the others", BLOCK, "outside = (~span_keys).to(beta.dtype)", "outside = (span_keys).to(beta.dtype)", CORE),
    ("cache: span positions kept relative to the call (past not added)", CACHE, "self.key_pos = torch.cat([self.key_pos, idx + past], dim=1)", "self.key_pos = torch.cat([self.key_pos, idx], dim=1)", CORE),
    ("cache: a crop keeps the span keys past the cut", CACHE, "self.key_valid = self.key_valid & (self.key_pos < length)", "self.key_valid = self.key_valid", CORE),
    ("cache: a prefill on a reused cache does not start over", CACHE, "        if past == 0:", "        if past < 0:", CORE),
    ("cache: past_kv gives every cached key, also those of the call", CACHE, "return kv[0][:, :, : call.keys_before], kv[1][:, :, : call.keys_before]", "return kv", CORE),
    ("cache: shift moves the length but not the key positions", CACHE, "out.key_pos, out.length = self.key_pos + offset, self.length + offset", "out.key_pos, out.length = self.key_pos, self.length + offset", CORE),
    ("cache: decode steps unmasked even with padded spans", CACHE, "empty, full = not spans, spans and self.all_valid", "empty, full = not spans, spans", CORE),
    ("cache: repeat tiles the batch instead of interleaving rows", CACHE, "return self._mapped(lambda t: t.repeat_interleave(n, dim=0))", "return self._mapped(lambda t: t.repeat(n, *[1] * (t.dim() - 1)))", CORE),
    ("cache: cat of unequal spans still marked all valid", CACHE, "CALCache(key_pos, key_valid, kv, self.length, self.all_valid and not pad)", "CALCache(key_pos, key_valid, kv, self.length, self.all_valid)", CORE),
    ("layer: the call's new span K/V never appended to the cache", LAYER, "        if new is not None and store is not None:", "        if False:", CORE),
    ("names: adapter filter reads only the first name part", NAMES, 'return any(part.startswith(ADAPTER_PREFIX) for part in name.split("."))', "return name.startswith(ADAPTER_PREFIX)", CORE),
    ("names: host_name keeps the wrapper's part", NAMES, 'return ".".join(part for part in name.split(".") if part != HOST)', "return name", CORE),
    ("adapter io: missing tensors accepted (partial load)", IO, "    if set(given) != set(mine):", "    if set(given) - set(mine):", CORE),
    ("adapter io: sha256 never checked", IO, 'if config.get("weights_sha256") and file_sha256(file) != config["weights_sha256"]:', "if False:", CORE),
    ("adapter io: shapes never checked", IO, "wrong = [k for k, t in mine.items() if tuple(given[k].shape) != tuple(t.shape)]", "wrong = []", CORE),
    ("span: the first message is span whatever its role", CHAT, 'anchored = bool(conversation) and conversation[0]["role"] == "system"', "anchored = bool(conversation)", CORE),
    ("span: a token shared by the system prompt and other text is span", CHAT, "system = [int(anchored and o == {0}) for o in owners]", "system = [int(anchored and 0 in o) for o in owners]", CORE),
    ("span: special-token strings in user text not re-tokenised as plain text", CHAT, "    if not any(inside(h) for h in hits):", "    if True:", CORE),
    ("span fallback: left padding ignored (rows read from 0)", MARKERS, "first = 0 if attention_mask is None else int(attention_mask[b].long().argmax())", "first = 0", CORE),
    ("policy: a later system message keeps its role", POLICY_PY, '            role = "user"', "            pass", POLICY),
    ("policy: the client's system message kept beside the pinned one", POLICY_PY, "out = out[1:]  # overridden", "out = out  # overridden", POLICY),
    ("baselines: LoRA rank pattern gives no extra rank", BASELINES, "pattern[f\"^{name.replace('.', '[.]')}$\"] = rank + 1", "pattern[f\"^{name.replace('.', '[.]')}$\"] = rank", COUNTS),
    ("baselines: ParallelMLP width solved with 2·D·W", BASELINES, "width = max(1, round((per_block - hidden) / (3 * hidden)))", "width = max(1, round((per_block - hidden) / (2 * hidden)))", COUNTS),
    ("baselines: LoRA's extra-rank modules keep alpha 2r (alpha_pattern empty)", BASELINES, "alpha_pattern={k: 2 * v for k, v in pattern.items()},", "alpha_pattern={},", COUNTS),
    ("intervals: Wilson's interval with z for z² in its n² term", INTERVALS, "z * z / (4 * n * n)", "z / (4 * n * n)", STATS),
    ("intervals: a proportion's interval at z = 1 (68 %)", INTERVALS, "    lo, hi = wilson(k, n)", "    lo, hi = wilson(k, n, z=1.0)", STATS),
    ("intervals: the bootstrap's tails cut at 90 %", INTERVALS, "tail = (1 - level) / 2 * 100", "tail = (1 - level) * 100", STATS),
    ("intervals: the bootstrap never resamples (every draw the items as they are)", INTERVALS, "{g: v[rng.integers(0, len(v), len(v))] for g, v in groups.items()}", "{g: v for g, v in groups.items()}", STATS),
    ("intervals: a column pools its items instead of averaging its group means", INTERVALS, "return float(np.mean([v.mean() for v in groups.values()]))", "return float(np.mean(np.concatenate(list(groups.values()))))", STATS),
    ("intervals: paired differences taken b − a", INTERVALS, "return {k: (a[k][0], a[k][1] - b[k][1]) for k in common if a[k][0] == b[k][0]}", "return {k: (a[k][0], b[k][1] - a[k][1]) for k in common if a[k][0] == b[k][0]}", STATS),
    ("intervals: the seeds' sd divided by k, not k - 1", INTERVALS, "    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (k - 1))", "    sd = math.sqrt(sum((v - m) ** 2 for v in values) / k)", STATS),
    ("intervals: Student's t read at k degrees of freedom, not k - 1", INTERVALS, "return m, T95.get(k - 1, Z95) * sd / math.sqrt(k)", "return m, T95.get(k, Z95) * sd / math.sqrt(k)", STATS),
    ("intervals: over seeds, the t-interval alone (the examples' own interval dropped)", INTERVALS, "    lo = min(m - half, sum(e[\"ci95\"][0] for e in entries) / k)", "    lo = m - half", STATS),
    ("intervals: two intervals separated when their lower ends are", INTERVALS, 'if a["ci95"][0] > b["ci95"][1]:', 'if a["ci95"][0] > b["ci95"][0]:', STATS),
    ("report: a verdict ignores whether lower is better", REPORT, "better = (lo > 0) == m.higher_is_better", "better = lo > 0", STATS),
    ("report: a verdict from an interval that holds 0", REPORT, "if math.isnan(lo) or lo <= 0 <= hi:", "if math.isnan(lo):", STATS),
    ("report: a verdict from a metric undefined for a model (not playing the game)", REPORT, 'cells = {k: v for k, v in shown.items() if v and "undefined" not in v}', "cells = {k: v for k, v in shown.items() if v}", STATS),
    ("report: a difference's se from one side only", REPORT, 'cell["se"] = math.sqrt(a.get("se", math.nan) ** 2 + b.get("se", math.nan) ** 2)', 'cell["se"] = a.get("se", math.nan)', STATS),
    ("report: a difference's interval ±1 se (not ±1.96)", REPORT, 'diff["ci95"] = [diff["value"] - Z95 * se, diff["value"] + Z95 * se]', 'diff["ci95"] = [diff["value"] - se, diff["value"] + se]', STATS),
    ("train config: a precision not of the choices accepted", TRAIN_CONFIG, "        if self.precision not in PRECISIONS:", "        if False:", CHECKS),
    ("train config: an on_truncate not of the choices accepted", TRAIN_CONFIG, "        if self.on_truncate not in ON_TRUNCATE:", "        if False:", CHECKS),
    ("train config: an objective not of the choices accepted", TRAIN_CONFIG, "        if self.objective not in OBJECTIVES:", "        if False:", CHECKS),
    ("train config: a DPO reference not of the choices accepted (taken as the base)", TRAIN_CONFIG, "        if self.reference not in REFERENCES:", "        if False:", CHECKS),
    ("train config: beta 0 or below accepted", TRAIN_CONFIG, "        if self.beta <= 0:", "        if False:", CHECKS),
    ("train config: DPO under FSDP accepted", TRAIN_CONFIG, '        if self.objective == "dpo" and self.fsdp:', "        if False:", CHECKS),
    ("train config: --patience without --eval-data accepted", TRAIN_CONFIG, "        if self.patience is not None and (self.patience < 1 or not self.eval_data):", "        if False:", CHECKS),
    ("train config: eval_steps 0 accepted", TRAIN_CONFIG, "        if self.eval_steps < 1:", "        if False:", CHECKS),
    ("train config: neither max_steps nor epochs accepted", TRAIN_CONFIG, "        if self.max_steps <= 0 and self.epochs <= 0:", "        if False:", CHECKS),
    ("train config: unknown YAML options accepted", TRAIN_CONFIG, "        if unknown:\n", "        if False:\n", CHECKS),
]  # fmt: skip


def break_once(tree: Path, name: str, file: str, old: str, new: str, tests: list[str]) -> dict:
    """Apply one break in ``tree``, run its tests there, revert; the record of what failed."""
    path = tree / "src" / "calyrex" / file
    text = path.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise SystemExit(f"{file}: the text of {name!r} occurs {text.count(old)} times, not once")
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    start = time.time()
    path.write_text(text.replace(old, new), encoding="utf-8")
    try:
        run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header"]
        done = subprocess.run([*run, *tests], cwd=tree, env=env, capture_output=True, text=True)
    finally:
        path.write_text(text, encoding="utf-8")
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    failed = re.search(r"(\d+) failed", tail)
    errors = re.search(r"(\d+) error", tail)
    return {
        "break": name,
        "file": f"src/calyrex/{file}",
        "tests": " ".join(tests),
        "failed": int(failed.group(1)) if failed else 0,
        "errors": int(errors.group(1)) if errors else 0,
        "summary": tail,
        "seconds": round(time.time() - start),
    }


def read_records(path: Path) -> list[dict]:
    """The records of ``path`` (one JSON object a line), in the order they were written."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run(tree: Path, out: Path, only: list[str]) -> None:
    done = {r["break"] for r in read_records(out)} if out.exists() else set()
    out.parent.mkdir(parents=True, exist_ok=True)
    for name, *rest in BREAKS:
        if name in done or (only and not any(o in name for o in only)):
            continue
        record = break_once(tree, name, *rest)
        print(f"{record['failed']:3d} failed  {name}", flush=True)
        with out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def _files(record: dict) -> str:
    named = {" ".join(CORE): "the core's files", " ".join(STATS): "the statistics' files"}
    named[" ".join(CHECKS)] = "the config checks' tests"
    return named.get(record["tests"], f"`{record['tests']}`")


def table(records: list[dict]) -> str:
    """The markdown table of ``records``: each break, its test files, the tests that failed."""
    rows = [f"| {r['break']} | {_files(r)} | {r['failed'] + r['errors']} |" for r in records]
    return "\n".join(["| break | files run | tests failed |", "|---|---|---|", *rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="run only the breaks whose description holds one")
    parser.add_argument("--tree", type=Path, help="a scratch checkout to break")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "breaks" / "code.jsonl")
    parser.add_argument("--table", type=Path, help="write docs/testing.md's block from this record")
    parser.add_argument("--check", action="store_true", help="with --table: exit 1 when stale")
    args = parser.parse_args()
    if args.table:
        records = read_records(args.table)
        order = {b[0]: i for i, b in enumerate(BREAKS)}
        records.sort(key=lambda r: order[r["break"]])
        block = f"<!-- BEGIN code-breaks -->\n{table(records)}\n<!-- END code-breaks -->"
        page = ROOT / "docs" / "testing.md"
        return rewrite(
            {(page, "code-breaks"): block}, ROOT, args.check, "scripts/break_code.py --table"
        )
    if args.tree is None:
        parser.error("give --tree (a scratch checkout) or --table")
    if args.tree.resolve() == ROOT:
        parser.error("--tree must be a scratch checkout, not this one (breaks are written into it)")
    run(args.tree.resolve(), args.out, args.names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
