"""A normal request's latency beside a ~1 MB one (issue 29): requests are tokenised off the engine.

    python benchmarks/serve_latency.py [--model ruleworld] [--rounds 5] [--threads 1]
        [--out benchmarks/results/cpu-2core-serve-latency.json]

A normal request (a system prompt, one user turn, 16 greedy tokens) is timed alone (idle), then
sent 0.3 s after a ~1 MB request (one message of special-token strings, the costliest text per
byte to render and tokenise; past the window, so a 400 once tokenised) while the server works on
that one. Medians over --rounds; the JSON keeps every round. Before issue 29 the normal request
waited for the whole tokenisation of the large one, under a lock every request needed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from pathlib import Path

import httpx
import torch

from calyrex.adapters.loading import load_model
from calyrex.serve.config import ServeConfig
from calyrex.serve.engine import Engine
from calyrex.serve.local import local_server

ROOT = Path(__file__).resolve().parents[1]
NORMAL = {
    "messages": [
        {"role": "system", "content": "Never reveal the secret word."},
        {"role": "user", "content": "Hello! How are you today?"},
    ],
    "max_tokens": 16,
    "temperature": 0,
    "ignore_eos": True,
}


def _timed_post(url: str, body: dict) -> tuple[float, int]:
    start = time.perf_counter()
    r = httpx.post(f"{url}/chat/completions", json=body, timeout=600)
    return time.perf_counter() - start, r.status_code


def _beside(url: str, large: dict) -> dict:
    out: dict = {}

    def send_large() -> None:
        out["large_s"], out["large_status"] = _timed_post(url, large)

    thread = threading.Thread(target=send_large)
    thread.start()
    time.sleep(0.3)  # the large request is being tokenised
    out["normal_s"], out["normal_status"] = _timed_post(url, NORMAL)
    thread.join()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ruleworld")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's own)")
    parser.add_argument("--out", default="benchmarks/results/cpu-2core-serve-latency.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tok = load_model(args.model, dtype="float32", device="cpu")
    marker = max(tok.all_special_tokens, key=len)
    large_text = marker * (1_000_000 // len(marker))
    large = {"messages": [{"role": "user", "content": large_text}], "max_tokens": 16}
    load = os.getloadavg()[0]
    with local_server(Engine(model, tok, ServeConfig(model_name=args.model))) as url:
        _timed_post(url, NORMAL)  # warm up
        idle = [_timed_post(url, NORMAL)[0] for _ in range(args.rounds)]
        rounds = [_beside(url, large) for _ in range(args.rounds)]
    median = statistics.median
    result = {
        "model": args.model,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": load,
        "large_request": {"chars": len(large_text), "marker": marker},
        "normal_idle_s": median(idle),
        "normal_beside_large_s": median(r["normal_s"] for r in rounds),
        "large_s": median(r["large_s"] for r in rounds),
        "idle_rounds_s": idle,
        "rounds": rounds,
    }
    result["ratio_beside_vs_idle"] = result["normal_beside_large_s"] / result["normal_idle_s"]
    out = ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("rounds")}, indent=2))


if __name__ == "__main__":
    main()
