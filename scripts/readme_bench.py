"""Rewrite the measured benchmark tables in the docs from the committed result files.

    python scripts/readme_bench.py            # rewrite each block between its markers
    python scripts/readme_bench.py --check    # exit 1 if a page is not what the files give

Every block is written into one docs page (``BLOCKS``: block name, page, result file, renderer;
the page holds it between ``<!-- BEGIN name -->`` and ``<!-- END name -->``, ``doc_blocks``):
``docs/benchmarks.md`` gets the current run (``benchmarks/results/cpu-2core-qwen2.5-0.5b.json``,
with the core v2 before/after table from the ``core-v2-*.json`` pairs in ``PAIRS`` when both
exist) and the real-model run (``cpu-2core-smollm2.json``, ``scripts/bench_smollm2.sh``);
``docs/vllm.md`` the vLLM lane (``cpu-2core-vllm.json``, ``benchmarks/vllm_bench.py``);
``docs/serving.md`` the serving run (``cpu-2core-serve-ruleworld.json``, ``calyrex bench
--sections serve``) and the latency beside a large request (``cpu-2core-serve-latency.json``,
``benchmarks/serve_latency.py``); ``docs/dpo.md`` the DPO reference's memory
(``dpo-memory.json``, ``benchmarks/dpo_memory.py``). A block whose result file is not recorded
yet is left alone (and named on stderr); a page without its markers is an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from doc_blocks import rewrite

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CURRENT = RESULTS / "cpu-2core-qwen2.5-0.5b.json"
PAIRS = [  # (before, after, what was run): each pair measured back to back on one machine
    ("core-v2-before.json", "core-v2-after.json", "--sections train inference"),
    (
        "core-v2-before-inference.json",
        "core-v2-after-inference.json",
        "--sections inference --repeats 4 --decode-steps 16",
    ),
]
VLLM = RESULTS / "cpu-2core-vllm.json"  # benchmarks/vllm_bench.py (the vLLM lane)
SMOLLM2 = RESULTS / "cpu-2core-smollm2.json"  # scripts/bench_smollm2.sh (a real model)
GPU = RESULTS / "gpu-h200-qwen2.5-0.5b.json"  # the full preset on a lent NVIDIA H200
SERVE = RESULTS / "cpu-2core-serve-ruleworld.json"  # calyrex bench --sections serve
SERVE_LATENCY = RESULTS / "cpu-2core-serve-latency.json"  # benchmarks/serve_latency.py
DPO_MEMORY = RESULTS / "dpo-memory.json"  # benchmarks/dpo_memory.py
DPO_FUSED = RESULTS / "dpo-fused-head.json"  # benchmarks/dpo_fused_head.py
DOCS = ROOT / "docs"
MIB = 2**20
GOALS = {  # the goals on the CPU preset
    "train_time_ratio_vs_lora": "≤ 0.70",
    "train_activation_memory_ratio_vs_lora": "≤ 0.45",
    "prefill_ratio_vs_base": "≥ 0.85",
    "decode_ratio_vs_base": "≥ 0.88",
}
MODEL_GOALS = {  # the goals on a real model: (bound, True when the ratio must be at least it)
    "prefill_ratio_vs_base": (0.90, True),
    "decode_ratio_vs_base": (0.90, True),
    "train_time_ratio_vs_lora": (0.70, False),
}


def _wall(r: dict) -> str:
    s = sum(r[k].get("wall_s", 0) for k in ("train", "inference", "scaling", "shared") if k in r)
    return f"{int(s // 60)} min {int(s % 60)} s"


def headline(r: dict) -> str:
    t, i = r["train"]["methods"], r["inference"]
    pre, dec = i["prefill_tokens_per_s"], i["decode_tokens_per_s"]
    rows = [
        "| figure | CALYREX | vs | measured ratio | FLOP / weights limit | goal |",
        "|---|---|---|---|---|---|",
        f"| training step time | {t['calyrex']['step_s']:.2f} s | LoRA {t['lora']['step_s']:.2f} s "
        f"(ParallelMLP {t['parallel_mlp']['step_s']:.2f} s) | **{r['train_time_ratio_vs_lora']:.3f}**"
        f" | {r['train_flop_ratio_vs_lora']:.3f} | {GOALS['train_time_ratio_vs_lora']} |",
        f"| training activation memory | {t['calyrex']['activation_bytes'] / MIB:.1f} MiB | LoRA "
        f"{t['lora']['activation_bytes'] / MIB:.1f} MiB (ParallelMLP "
        f"{t['parallel_mlp']['activation_bytes'] / MIB:.1f}) | "
        f"**{r['train_activation_memory_ratio_vs_lora']:.3f}** | — | "
        f"{GOALS['train_activation_memory_ratio_vs_lora']} |",
        f"| prefill, {i['tokens']} tokens | {pre['calyrex']:.1f} tok/s | base {pre['base']:.1f} "
        f"tok/s | **{r['prefill_ratio_vs_base']:.3f}** | {1 / r['flop_ratio_vs_base']:.3f} "
        f"(FLOPs ×{r['flop_ratio_vs_base']:.3f}) | {GOALS['prefill_ratio_vs_base']} |",
        f"| decode at {i['tokens']} context | {dec['calyrex']:.2f} tok/s | base {dec['base']:.2f} "
        f"tok/s | **{r['decode_ratio_vs_base']:.3f}** | {1 / r['decode_flop_ratio_vs_base']:.3f} "
        f"FLOPs / {1 / i['weight_ratio_vs_base']:.3f} weights | {GOALS['decode_ratio_vs_base']} |",
    ]
    return "\n".join(rows)


def decode_table(r: dict) -> str:
    rows = r["inference"]["decode_vs_context"]
    head = "| decode context | " + " | ".join(str(x["context"]) for x in rows) + " |"
    sep = "|---|" + "---|" * len(rows)
    base = "| base ms / step | " + " | ".join(f"{1e3 * x['base_step_s']:.1f}" for x in rows)
    cal = "| CALYREX ms / step | " + " | ".join(f"{1e3 * x['calyrex_step_s']:.1f}" for x in rows)
    add = "| added by CAL, ms | " + " | ".join(f"{1e3 * x['added_step_s']:.1f}" for x in rows)
    return "\n".join([head, sep, base + " |", cal + " |", add + " |"])


def scaling_table(r: dict) -> str:
    rows = r["scaling"]["block_vs_length"]
    head = f"| T (span {rows[0]['span']}) | " + " | ".join(str(x["tokens"]) for x in rows) + " |"
    sep = "|---|" + "---|" * len(rows)
    cal = "| one CAL block, µs / token | " + " | ".join(
        f"{x['cal_block_us_per_token']:.1f}" for x in rows
    )
    host = "| one host layer, µs / token | " + " | ".join(
        f"{x['host_layer_us_per_token']:.1f}" for x in rows
    )
    return "\n".join([head, sep, cal + " |", host + " |"])


def _less(saving: float) -> str:
    """A saving as the change it makes: "−84.2 %" for a saving, "+15.9 %" for a loss."""
    return f"−{100 * saving:.1f} %" if saving >= 0 else f"+{-100 * saving:.1f} %"


def shared_text(r: dict) -> str:
    s, c = r["shared"], r["shared"]["case"]
    return (
        f"Shared system prompt, {c['batch']} conversations × ({c['system']} system + "
        f"{c['conversation']} conversation tokens): prefill of the batch "
        f"{s['naive_prefill_s']:.2f} s with every row computing the prompt vs "
        f"{s['shared_prefill_s']:.2f} s with the prompt computed once "
        f"({_less(s['prefill_saving'])}); the CAL keys/values alone "
        f"{1e3 * s['cal_kv_per_row_s']:.1f} ms vs {1e3 * s['cal_kv_once_s']:.1f} ms "
        f"({_less(s['cal_kv_saving'])}) and {s['cal_kv_bytes_per_row'] / MIB:.1f} MiB vs "
        f"{s['cal_kv_bytes_shared'] / MIB:.1f} MiB."
    )


def before_after(pairs: list[tuple[dict, dict, str]]) -> str:
    rows = [
        "| ratio | run (`calyrex bench ...`) | before core v2 | after core v2 | goal |",
        "|---|---|---|---|---|",
    ]
    names = {
        "train_time_ratio_vs_lora": "training step time, CALYREX ÷ LoRA",
        "train_activation_memory_ratio_vs_lora": "training activation memory, CALYREX ÷ LoRA",
        "prefill_ratio_vs_base": "prefill tokens/s, CALYREX ÷ base",
        "decode_ratio_vs_base": "decode tokens/s, CALYREX ÷ base",
    }
    for key, label in names.items():
        for before, after, run in pairs:
            if key in before and key in after:
                rows.append(
                    f"| {label} | `{run}` | {before[key]:.3f} | {after[key]:.3f} | {GOALS[key]} |"
                )
    return "\n".join(rows)


def section() -> str:
    r = json.loads(CURRENT.read_text())
    m = r["machine"]
    parts = [
        f"`calyrex bench --json {CURRENT.relative_to(ROOT)}` — the `{r['settings']['preset']}` "
        "preset, so **reduced lengths** (table above) — on "
        f"{m['cpu_cores']} cores of an {m['cpu']} shared with other jobs, {m['dtype']}, torch "
        f"{m['torch']}, transformers {m['transformers']}, peft {m['peft']}, "
        f"{r['shape']['name']} shape with random weights, CAL blocks after layers "
        f"{r['cal_layers'][0]}–{r['cal_layers'][-1]}. {_wall(r)} of measured sections; repeats "
        "are few, so ratios move by a few % between runs.",
        headline(r),
        decode_table(r),
        scaling_table(r),
        shared_text(r),
    ]
    pairs = [
        (json.loads((RESULTS / b).read_text()), json.loads((RESULTS / a).read_text()), run)
        for b, a, run in PAIRS
        if (RESULTS / b).exists() and (RESULTS / a).exists()
    ]
    if pairs:
        parts.append(
            "**Core v2 before/after** (the blocks as modules in the module tree, per-call span "
            "as layer arguments, the CAL cache on the HF cache): the same `calyrex bench` "
            "command at the commit before core v2 (8cd1be5) and at the current code, back to "
            "back on the same (slower, shared) machine, `--decode-contexts 1024`; files "
            "`benchmarks/results/core-v2-*.json`. Ratios move by ±0.05 between runs here, in "
            "both directions, so read each pair against the other:"
        )
        parts.append(before_after(pairs))
    return "\n\n".join(parts)


def gpu_section() -> str:
    """The full preset on a GPU (``GPU``), the same tables as the CPU run's."""
    r = json.loads(GPU.read_text())
    m = r["machine"]
    return "\n\n".join(
        [
            f"`calyrex bench --json {GPU.relative_to(ROOT)}` — the `{r['settings']['preset']}` "
            f"preset (full lengths) — on one {m['gpu']}, {m['dtype']}, torch {m['torch']}, "
            f"transformers {m['transformers']}, peft {m['peft']} (the GPU machine's own), "
            f"{r['shape']['name']} shape with random weights, CAL blocks after layers "
            f"{r['cal_layers'][0]}–{r['cal_layers'][-1]}. One run of {_wall(r)}; its printed "
            f"tables are in `{GPU.with_suffix('.log').relative_to(ROOT)}`. The goals were set "
            "for the CPU preset.",
            headline(r),
            decode_table(r),
            scaling_table(r),
            shared_text(r),
        ]
    )


def vllm_section() -> str:
    """The vLLM lane's benchmark (``benchmarks/vllm_bench.py``) as a table with its conditions."""
    r = json.loads(VLLM.read_text())
    res, ratio, m = r["results"], r["ratios"], r["model"]
    tps = {k: {s: v[s]["tokens_per_s"] for s in ("1", "8")} for k, v in res.items()}
    rows = [
        "| streams | vLLM + CALYREX | vLLM + base | `calyrex serve` | CALYREX ÷ base (goal ≥ 0.8) "
        "| vLLM + CALYREX ÷ `calyrex serve` |",
        "|---|---|---|---|---|---|",
    ]
    for s in ("1", "8"):
        rows.append(
            f"| {s} | {tps['vllm_calyrex'][s]:.1f} tok/s | {tps['vllm_base'][s]:.1f} tok/s | "
            f"{tps['calyrex_serve'][s]:.1f} tok/s | **{ratio[f'vllm_calyrex_vs_vllm_base_{s}']:.3f}**"
            f" | {ratio[f'vllm_calyrex_vs_calyrex_serve_{s}']:.2f} |"
        )
    kv = ratio.get("kv_bytes_per_token_calyrex_vs_base")
    cond = (
        f"`{r['command']}` (vLLM {r['vllm']}, {r['machine']['cpus']} CPUs, load average "
        f"{r['machine']['load_average'][0]:.1f}, {r['wall_s'] / 60:.1f} min): a Qwen2-shaped "
        f"model built offline (hidden {m['hidden_size']}, {m['num_hidden_layers']} layers, "
        f"{m['num_attention_heads']} heads of 64, {m['num_key_value_heads']} KV heads), CAL blocks "
        f"after layers {m['cal_layers']} with non-zero weights, fp32, `--enforce-eager`; every "
        f"request a {m['system_prompt_tokens']}-token system prompt shared by all and "
        f"{r['tokens_per_request']} generated tokens (`ignore_eos`), {r.get('requests_per_stream', 4)}"
        " requests per stream, the same httpx clients streaming from each OpenAI server in turn, "
        f"{r.get('rounds', 1)} round(s) of the three servers (the median round per point; all "
        "rounds are in the file)."
    )
    kv_text = (
        f" KV-cache bytes per token, CALYREX ÷ base: **{kv:.3f}** (vLLM's capacity in the same "
        f"1 GiB: base {res['vllm_base']['kv_cache_tokens']:,} vs CALYREX "
        f"{res['vllm_calyrex']['kv_cache_tokens']:,} tokens; CAL layers keep K/V for every token "
        "at the padded head size). vLLM's CPU worker runs its OpenMP threads on one of the two "
        "cores (it reserves the other for the server process); `calyrex serve` uses both."
        if kv
        else ""
    )
    return cond + kv_text + "\n\n" + "\n".join(rows)


def _goal(r: dict, key: str) -> tuple[str, str]:
    """(the goal as text, whether ``r[key]`` meets it) for a key of ``MODEL_GOALS``."""
    if key not in MODEL_GOALS:
        return "—", "—"
    bound, at_least = MODEL_GOALS[key]
    met = r[key] >= bound if at_least else r[key] <= bound
    return f"{'≥' if at_least else '≤'} {bound:.2f}", "yes" if met else "**no**"


def smollm2_section() -> str:
    """The real-model run (``scripts/bench_smollm2.sh``): ratios against the goals, conditions."""
    r = json.loads(SMOLLM2.read_text())
    m, mo, p = r["machine"], r["model"], r["machine"]["precision"]
    t, i = r["train"], r["inference"]
    tm, c = t["methods"], t["case"]
    pre, dec = i["prefill_tokens_per_s"], i["decode_tokens_per_s"]
    figures = [  # (label, key, CALYREX, compared with)
        (f"prefill tokens/s, {i['tokens']} tokens", "prefill_ratio_vs_base",
         f"{pre['calyrex']:.1f}", f"base {pre['base']:.1f}"),
        (f"decode tokens/s at {i['tokens']} context", "decode_ratio_vs_base",
         f"{dec['calyrex']:.2f}", f"base {dec['base']:.2f}"),
        ("training step time", "train_time_ratio_vs_lora",
         f"{tm['calyrex']['step_s']:.2f} s", f"LoRA {tm['lora']['step_s']:.2f} s"),
        ("training activation memory", "train_activation_memory_ratio_vs_lora",
         f"{tm['calyrex']['activation_bytes'] / MIB:.1f} MiB",
         f"LoRA {tm['lora']['activation_bytes'] / MIB:.1f} MiB"),
    ]  # fmt: skip
    rows = [
        "| figure | CALYREX | compared with | ratio | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    for label, key, cal, other in figures:
        goal, met = _goal(r, key)
        rows.append(f"| {label} | {cal} | {other} | **{r[key]:.3f}** | {goal} | {met} |")
    cond = (
        f"`scripts/bench_smollm2.sh` (`calyrex bench --model {mo['name']} --sections "
        f"{' '.join(s for s in ('train', 'inference') if s in r)}`): {mo['name']}, the real "
        f"weights ({mo['model_type']}, hidden {mo['hidden_size']}, {mo['num_hidden_layers']} "
        f"layers, {mo['num_attention_heads']} heads, {mo['num_key_value_heads']} KV heads, "
        f"vocab {mo['vocab_size']:,}), CAL blocks after layers {r['cal_layers'][0]}–"
        f"{r['cal_layers'][-1]}, **{p['chosen']}** (`--dtype {p.get('asked', 'auto')}`: "
        f"{p['reason']}), on {m['cpu_cores']} cores of an {m['cpu']} ({m['torch_threads']} "
        f"threads), torch {m['torch']}, transformers {m['transformers']}, peft {m['peft']}. "
        f"Training: batch {c['batch']} × {c['tokens']} tokens, system span {c['system']}, loss "
        f"on the last {c['labelled']}, median of {c['steps']} steps. Inference: batch 1, "
        f"{i['tokens']} prompt tokens (system span {i['system']}), {i['decode_steps']} decode "
        f"steps, median of {r['settings']['repeats']} alternating repeats. {_wall(r)} of "
        "measured sections."
    )
    parts = [cond, "\n".join(rows)]
    if i.get("decode_vs_context"):
        parts.append(decode_table(r))
    return "\n\n".join(parts)


def _span(values: list[float]) -> str:
    return f"{min(values):.0f}–{max(values):.0f}"


def serve_section() -> str:
    """The serving run (``calyrex bench --sections serve``): conditions, table, round spread."""
    from calyrex.bench.serve import markdown

    r = json.loads(SERVE.read_text())
    m, st, s = r["machine"], r["settings"], r["serve"]
    case, layers = s["case"], s["cal_layers"]
    cond = (
        f"`calyrex bench --sections serve --threads {m['torch_threads']} --json "
        f"{SERVE.relative_to(ROOT)}` (the `{st['preset']}` preset, `calyrex.bench.serve`): the "
        f"`{s['model']}` model served as is and with zero-initialised CALYREX blocks after layers "
        f"{layers[0]}–{layers[-1]} (`{st['placement']}`: the same text, the full cost), each "
        "server in its own process on 127.0.0.1, httpx clients streaming SSE, every request "
        f"{case['tokens']} tokens (`ignore_eos`), {case['requests']} requests per stream, each "
        f"point {case['rounds']} rounds with the two servers taking turns (medians); "
        f"{m['cpu_cores']} cores of an {m['cpu']} shared with other jobs, {m['dtype']}, torch "
        f"{m['torch']}, transformers {m['transformers']}; {s['ttft']['cached_tokens']} prompt "
        f"tokens reused on a cache hit; {s['wall_s'] / 60:.1f} min of measured serving. The "
        "table is `calyrex.bench.serve.markdown` of that file:"
    )
    spread = "; ".join(
        f"{p['streams']} stream{'s' if p['streams'] > 1 else ''}: base "
        f"{_span(p['base']['all_tokens_per_s'])}, CALYREX {_span(p['calyrex']['all_tokens_per_s'])}"
        for p in s["throughput"]
    )
    note = (
        f"Tokens/s over the rounds ({spread}): on a shared machine the throughput ratios move "
        "between runs, so read them against that spread."
    )
    return f"{cond}\n\n{markdown(s)}\n\n{note}"


def serve_latency_section() -> str:
    """A normal request's latency beside a large one (``benchmarks/serve_latency.py``)."""
    r = json.loads(SERVE_LATENCY.read_text())
    big = r["large_request"]
    statuses = sorted({x["large_status"] for x in r["rounds"]})
    return (
        f"`python benchmarks/serve_latency.py` (`{r['model']}`, {r['torch_threads']} torch "
        f"thread, {r['cpus']} cores at load average {r['load_average_at_start']:.1f}, "
        f"medians of {len(r['rounds'])} rounds; `{SERVE_LATENCY.relative_to(ROOT)}`): a normal "
        f"request takes {r['normal_idle_s']:.2f} s alone and {r['normal_beside_large_s']:.2f} s "
        f"(×{r['ratio_beside_vs_idle']:.1f}) while the server tokenises a {big['chars']:,}-"
        f"character message of `{big['marker']}` strings ({r['large_s']:.1f} s, then a "
        f"{'/'.join(map(str, statuses))} past the window)."
    )


def _millions(n: int) -> str:
    return f"{n / 1e6:.1f} M" if n else "0"


def dpo_memory_section() -> str:
    """The free DPO reference against a deep copy (``benchmarks/dpo_memory.py``)."""
    r = json.loads(DPO_MEMORY.read_text())
    free, copy = r["runs"]["free"], r["runs"]["copy"]
    rows = [
        "| reference | peak RSS | weights held | reference parameters | s / step |",
        "|---|---|---|---|---|",
    ]
    for label, run in (("free (adapters off)", free), ("deep copy of the base", copy)):
        rows.append(
            f"| {label} | {run['peak_rss_mb']:,.0f} MB | {run['weights_held_mb']:,.0f} MB | "
            f"{_millions(run['reference_parameters'])} | {run['seconds_per_step']:.1f} |"
        )
    same = "give the same losses" if r["same_losses"] else "give different losses"
    return (
        f"`python benchmarks/dpo_memory.py` ({r['model']}, `{r['method']}`, {r['steps']} steps, "
        f"torch {r['machine']['torch']}; `{DPO_MEMORY.relative_to(ROOT)}`):\n\n"
        + "\n".join(rows)
        + f"\n\nThe free reference saves {r['peak_rss_saved_mb']:,.0f} MB of peak memory "
        f"(peak ratio {r['peak_rss_ratio_free_vs_copy']:.3f}); the copy holds "
        f"{copy['weights_held_mb'] - free['weights_held_mb']:,.0f} MB more weights. Both runs "
        f"{same} at every step."
    )


def dpo_fused_section() -> str:
    """TRL's fused LM head over every position against the completion's only
    (``benchmarks/dpo_fused_head.py``)."""
    r = json.loads(DPO_FUSED.read_text())
    rows = [
        "| method | batch (rows × tokens) | labelled positions | every position | completion only "
        "| speed-up | same loss, metrics, gradients |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in r["runs"]:
        for b in run["batches"]:
            same = b["same_loss"] and b["same_metrics"] and b["same_gradients"]
            rows.append(
                f"| `{run['method']}` | {b['shape'][0]} × {b['shape'][1]} | "
                f"{b['labelled_fraction']:.1%} | {b['step_s']['every_position']:.1f} s | "
                f"{b['step_s']['completion_only']:.1f} s | ×{b['speedup']:.2f} | "
                f"{'yes, bit for bit' if same else 'no'} |"
            )
    return (
        f"`python benchmarks/dpo_fused_head.py` ({r['model']}, {r['threads']} threads, torch "
        f"{r['torch']}, pairs `{r['pairs']}`; `{DPO_FUSED.relative_to(ROOT)}`), seconds of a "
        "DPO step (policy and reference forwards, backward), the faster of two alternated "
        "tries:\n\n" + "\n".join(rows)
    )


BLOCKS = [  # (block name, page, the result file it is written from, renderer)
    ("bench-measured", DOCS / "benchmarks.md", CURRENT, section),
    ("bench-smollm2", DOCS / "benchmarks.md", SMOLLM2, smollm2_section),
    ("bench-gpu", DOCS / "benchmarks.md", GPU, gpu_section),
    ("vllm-bench", DOCS / "vllm.md", VLLM, vllm_section),
    ("bench-serve", DOCS / "serving.md", SERVE, serve_section),
    ("serve-latency", DOCS / "serving.md", SERVE_LATENCY, serve_latency_section),
    ("dpo-memory", DOCS / "dpo.md", DPO_MEMORY, dpo_memory_section),
    ("dpo-fused-head", DOCS / "dpo.md", DPO_FUSED, dpo_fused_section),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    blocks = {}
    for name, page, source, make in BLOCKS:
        if not source.exists():
            print(
                f"readme_bench: {source.relative_to(ROOT)} not recorded: skipped", file=sys.stderr
            )
            continue
        blocks[page, name] = f"<!-- BEGIN {name} -->\n{make()}\n<!-- END {name} -->"
    return rewrite(blocks, ROOT, args.check, "python scripts/readme_bench.py")


if __name__ == "__main__":
    sys.exit(main())
