"""Print the figures of a benchmark run as tables, each beside its ratio and the FLOP ratio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

MIB = 2**20


def _header(r: dict[str, Any]) -> str:
    m = r["machine"]
    hw = m.get("gpu") or f"{m['cpu']} ({m['cpu_cores']} cores, {m['torch_threads']} threads)"
    head = (
        f"machine: {hw} · {m['device']} {m['dtype']} · {m['platform']}\n"
        f"versions: python {m['python']} · torch {m['torch']} · transformers {m['transformers']}"
        f" · peft {m['peft']} · calyrex {m['calyrex']}"
    )
    p = m.get("precision")  # absent in files written before --dtype auto
    if p:
        head += f"\nprecision: {p['chosen']} ({p.get('asked', '')}: {p['reason']})"
    s = r.get("shape") or r.get("model")
    if s is None:  # serve only: its model is named in its own table
        return f"{head} · preset {r['settings']['preset']}"
    what = f"shape: {s['name']}"
    if "model" in r:  # a real model: where the resolver found it, when the name is not the path
        where = f", {s['path']}" if s["path"] != s["name"] else ""
        what = f"model: {s['name']} ({s['model_type']}{where})"
    return (
        f"{head}\n"
        f"{what} (hidden {s['hidden_size']}, {s['num_hidden_layers']} layers, "
        f"{s['num_attention_heads']} heads, {s['num_key_value_heads']} kv heads, FFN "
        f"{s['intermediate_size']}, vocab {s['vocab_size']}) · CAL blocks after layers "
        f"{r['cal_layers']} · preset {r['settings']['preset']}"
    )


def _train(t: dict[str, Any]) -> Table:
    c = t["case"]
    table = Table(
        title=f"Training step · batch {c['batch']} × {c['tokens']} tokens, system span "
        f"{c['system']}, loss on the last {c['labelled']} · median of {c['steps']} steps"
    )
    for col in ("method", "trainable", "step s", "tok/s", "activation MiB", "time ×LoRA",
                "memory ×LoRA", "FLOP ×LoRA"):  # fmt: skip
        table.add_column(col, justify="right")
    lora = t["methods"]["lora"]
    for name, m in t["methods"].items():
        table.add_row(
            name,
            f"{m['trainable']:,}",
            f"{m['step_s']:.3f}",
            f"{m['tokens_per_s']:.0f}",
            f"{m['activation_bytes'] / MIB:.1f}",
            f"{m['step_s'] / lora['step_s']:.3f}",
            f"{m['activation_bytes'] / lora['activation_bytes']:.3f}",
            f"{m['flops'] / lora['flops']:.3f}",
        )
    return table


def _inference(i: dict[str, Any]) -> list[Table]:
    table = Table(
        title=f"Inference · batch 1, {i['tokens']} prompt tokens (system span {i['system']}), "
        f"{i['decode_steps']} decode steps"
    )
    for col in ("", "base tok/s", "calyrex tok/s", "ratio", "FLOP limit", "weights limit"):
        table.add_column(col, justify="right")
    pre, dec = i["prefill_tokens_per_s"], i["decode_tokens_per_s"]
    table.add_row(
        "prefill",
        f"{pre['base']:.1f}",
        f"{pre['calyrex']:.1f}",
        f"{i['prefill_ratio_vs_base']:.3f}",
        f"{1 / i['flop_ratio_vs_base']:.3f}",
        "",
    )
    table.add_row("decode", f"{dec['base']:.2f}", f"{dec['calyrex']:.2f}",
                  f"{i['decode_ratio_vs_base']:.3f}", f"{1 / i['decode_flop_ratio_vs_base']:.3f}",
                  f"{1 / i['weight_ratio_vs_base']:.3f}")  # fmt: skip
    ctx = Table(title="Decode step time vs context (system span fixed)")
    for col in ("context", "base ms", "calyrex ms", "added ms"):
        ctx.add_column(col, justify="right")
    for row in i["decode_vs_context"]:
        ctx.add_row(str(row["context"]), f"{1e3 * row['base_step_s']:.2f}",
                    f"{1e3 * row['calyrex_step_s']:.2f}", f"{1e3 * row['added_step_s']:.2f}")  # fmt: skip
    return [table, ctx]


def _scaling(s: dict[str, Any]) -> Table:
    rows = s["block_vs_length"]
    table = Table(title=f"One CAL block vs T (system span {rows[0]['span']}) beside one host layer")
    for col in ("T", "CAL ms", "CAL µs/token", "host layer ms", "host µs/token"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["tokens"]), f"{1e3 * r['cal_block_s']:.1f}",
                      f"{r['cal_block_us_per_token']:.1f}", f"{1e3 * r['host_layer_s']:.1f}",
                      f"{r['host_layer_us_per_token']:.1f}")  # fmt: skip
    return table


def _shared(s: dict[str, Any]) -> Table:
    c = s["case"]
    table = Table(
        title=f"Shared system prompt · {c['batch']} conversations × ({c['system']} system + "
        f"{c['conversation']} conversation tokens)"
    )
    for col in ("", "every row", "once, shared", "saving"):
        table.add_column(col, justify="right")
    table.add_row(
        "prefill of the batch, s",
        f"{s['naive_prefill_s']:.3f}",
        f"{s['shared_prefill_s']:.3f}",
        f"{100 * s['prefill_saving']:.1f} %",
    )
    table.add_row(
        "CAL keys/values, ms",
        f"{1e3 * s['cal_kv_per_row_s']:.2f}",
        f"{1e3 * s['cal_kv_once_s']:.2f}",
        f"{100 * s['cal_kv_saving']:.1f} %",
    )
    table.add_row("CAL keys/values, KiB", f"{s['cal_kv_bytes_per_row'] / 1024:.0f}",
                  f"{s['cal_kv_bytes_shared'] / 1024:.0f}",
                  f"{100 * (1 - s['cal_kv_bytes_shared'] / s['cal_kv_bytes_per_row']):.1f} %")  # fmt: skip
    return table


def _serve(s: dict[str, Any]) -> Table:
    from .serve import rows

    c = s["case"]
    table = Table(
        title=f"Serving · calyrex serve on loopback, {s['model']} (CAL after layers "
        f"{s['cal_layers']}), {c['tokens']} tokens per request, {c['requests']} requests per stream"
    )
    for col in ("figure", "CALYREX", "compared with", "ratio", "goal"):
        table.add_column(col, justify="right")
    for row in rows(s):
        table.add_row(*row)
    return table


def show(results: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(width=None if Console().is_terminal else 132)
    console.print(_header(results))
    if "train" in results:
        console.print(_train(results["train"]))
    if "inference" in results:
        for table in _inference(results["inference"]):
            console.print(table)
    if "scaling" in results:
        console.print(_scaling(results["scaling"]))
    if "shared" in results:
        console.print(_shared(results["shared"]))
    if "serve" in results:
        console.print(_serve(results["serve"]))


def write_json(results: dict[str, Any], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=2, default=str) + "\n")
