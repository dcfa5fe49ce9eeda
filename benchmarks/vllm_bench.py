"""vLLM + CALYREX vs vLLM + base vs ``calyrex serve``: tokens/s on the same chat requests.

    .venv-vllm/bin/python benchmarks/vllm_bench.py [--rounds 3] [--out FILE]

Run by ``scripts/test.sh --vllm``. One model (a Qwen2-shaped checkpoint built offline, head_dim
64 as vLLM's CPU attention needs; CAL blocks late8th with non-zero weights), three OpenAI-
compatible servers started one after another (vLLM stock on the base directory, vLLM with the
plugin on the ``calyrex export-vllm`` directory, ``calyrex serve`` on base + adapter), each
measured with the same clients: 1 stream and 8 concurrent streams of greedy requests sharing a
system prompt. Prints the ratios measured in this run and writes them with the raw figures.
vLLM's KV-cache capacity (tokens, from its start-up log, same cache space) gives the measured
KV-memory overhead of CAL layers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "vllm_lane"))
SIZE = dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8,
            num_key_value_heads=2, head_dim=64, max_position_embeddings=2048)  # fmt: skip
LAYERS = [6, 7]  # late8th of 8 layers
STREAMS = (1, 8)


def _wait(url: str, proc: subprocess.Popen, log: Path) -> None:
    from calyrex.serve.local import wait_healthy

    if not wait_healthy(url, proc, timeout_s=600, poll_s=1):
        proc.kill()
        raise RuntimeError(f"server did not start:\n{log.read_text()[-4000:]}")


def _vllm(model: Path, calyrex: bool, port: int, log: Path) -> subprocess.Popen:
    from build import vllm_server

    extra = ["--max-model-len", "2048", "--served-model-name", "m", "--max-num-seqs", "8"]
    mode = ["--tokenizer-mode", "calyrex"] if calyrex else []
    return vllm_server(model, port, log, *extra, *mode)


def _calyrex_serve(base: Path, adapter: Path, port: int, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "calyrex", "serve", "--model", str(base), "--adapter",
           str(adapter), "--port", str(port), "--max-concurrency", "8"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _measure(url: str, system: str, tokens: int, requests: int) -> dict:
    """Each of 1 and 8 concurrent streams sends ``requests`` requests one after another."""
    from calyrex.bench.serve import throughput

    throughput(url, system, 1, 1, 4)  # warm-up
    return {str(s): throughput(url, system, s, requests, tokens) for s in STREAMS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/cpu-2core-vllm.json"))
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--requests", type=int, default=4, help="requests per stream")
    ap.add_argument("--rounds", type=int, default=1, help="each server started this many times")
    args = ap.parse_args()

    from build import build, tokenizer

    from calyrex.bench.serve import system_prompt
    from calyrex.serve.local import free_port

    root = Path(tempfile.mkdtemp(prefix="calyrex-vllm-bench-"))
    paths = build("qwen2", root / "m", size=SIZE, layers=LAYERS)
    system = system_prompt(tokenizer("qwen2"), 200)
    servers = {
        "vllm_base": lambda p, log: _vllm(paths["base"], False, p, log),
        "vllm_calyrex": lambda p, log: _vllm(paths["vllm"], True, p, log),
        "calyrex_serve": lambda p, log: _calyrex_serve(paths["base"], paths["adapter"], p, log),
    }
    runs: dict = {name: [] for name in servers}
    results: dict = {}
    start = time.perf_counter()
    for _ in range(args.rounds):  # the servers take turns, so slow phases of the machine are shared
        for name, launch in servers.items():
            port, log = free_port(), root / f"{name}.log"
            proc = launch(port, log)
            try:
                _wait(f"http://127.0.0.1:{port}", proc, log)
                runs[name].append(_measure(f"http://127.0.0.1:{port}/v1", system, args.tokens,
                                           args.requests))  # fmt: skip
            finally:
                proc.terminate()
                proc.wait(60)
            kv = re.search(r"KV cache size: ([\d,]+) tokens", log.read_text())
            tps = {s: round(runs[name][-1][str(s)]["tokens_per_s"], 2) for s in STREAMS}
            print(f"{name}: tokens/s {tps}", flush=True)
            results[name] = {"kv_cache_tokens": int(kv.group(1).replace(",", ""))} if kv else {}
    for name, measured in runs.items():  # per point, the median round (the middle one)
        for s in map(str, STREAMS):
            ordered = sorted(measured, key=lambda m: m[s]["tokens_per_s"])
            mid = ordered[(len(ordered) - 1) // 2][s]
            results[name][s] = {**mid, "all_tokens_per_s": [m[s]["tokens_per_s"] for m in measured]}
    ratios = {}
    for s in STREAMS:
        cal = results["vllm_calyrex"][str(s)]["tokens_per_s"]
        ratios[f"vllm_calyrex_vs_vllm_base_{s}"] = (
            cal / results["vllm_base"][str(s)]["tokens_per_s"]
        )
        ratios[f"vllm_calyrex_vs_calyrex_serve_{s}"] = (
            cal / results["calyrex_serve"][str(s)]["tokens_per_s"]
        )
    if "kv_cache_tokens" in results["vllm_base"] and "kv_cache_tokens" in results["vllm_calyrex"]:
        ratios["kv_bytes_per_token_calyrex_vs_base"] = (
            results["vllm_base"]["kv_cache_tokens"] / results["vllm_calyrex"]["kv_cache_tokens"]
        )
    import vllm

    record = {
        "command": f"python benchmarks/vllm_bench.py --rounds {args.rounds} --requests "
        f"{args.requests} --tokens {args.tokens}",
        "model": {**SIZE, "cal_layers": LAYERS, "system_prompt_tokens": 200},
        "tokens_per_request": args.tokens,
        "requests_per_stream": args.requests,
        "rounds": args.rounds,
        "vllm": vllm.__version__,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average": list(os.getloadavg()),
        },  # fmt: skip
        "wall_s": round(time.perf_counter() - start, 1),
        "results": results,
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
    }
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    for k, v in record["ratios"].items():
        print(f"{k}: {v:.3f}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
