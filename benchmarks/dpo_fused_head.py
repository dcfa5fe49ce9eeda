"""TRL's fused LM head in a DPO step on the CPU: every position scored (TRL's own path off
Triton) against the completion's positions only (:func:`calyrex.training.dpo.completion_positions_only`).

    python benchmarks/dpo_fused_head.py [--model smollm2] [--methods calyrex lora]
        [--pairs results/study-real-smollm2-v2/data/preference.val.jsonl] [--batches 2]

One process, the two paths alternated on the same batches (so both see the same load): for
each method, batch and path, the seconds of ``compute_loss`` (policy and reference forwards)
and of its backward; the ratio of the step times; and whether the loss, the reward metrics and
the adapter gradients are equal bit for bit. The adapter gets small random weights first, so
policy and reference differ. Writes ``benchmarks/results/dpo-fused-head.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "results/study-real-smollm2-v2/data/preference.val.jsonl"


def measure(model_name: str, method: str, pairs: list[dict], batches: int) -> dict:
    from calyrex.adapters.loading import load_model
    from calyrex.adapters.methods import adapt
    from calyrex.span.markers import span_markers_reason
    from calyrex.training import TrainConfig, dpo
    from calyrex.training.run import _training_args

    torch.manual_seed(0)
    base, tok = load_model(model_name, dtype="float32", device="cpu")
    model = adapt(base, method, seed=0)
    if method == "calyrex":
        model.markers, model.markers_reason = span_markers_reason(tok)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 1e-3)
    cfg = TrainConfig(model=model_name, data="-", out=tempfile.mkdtemp(), objective="dpo")
    rows = dpo.encode_pairs(tok, pairs[: cfg.batch_size * batches], cfg.max_length)
    trainer = dpo.PreferenceTrainer(model, _training_args(cfg, "fp32"), rows, tok)
    paths = {
        "every_position": contextlib.nullcontext,
        "completion_only": dpo.completion_positions_only,
    }
    found = []
    for b in range(batches):
        batch = trainer.data_collator(rows[b * cfg.batch_size : (b + 1) * cfg.batch_size])
        seen = {}
        for name in [*paths, *paths]:  # each path twice, alternated
            with mock.patch.object(dpo, "completion_positions_only", paths[name]):
                model.zero_grad()
                start = time.perf_counter()
                loss = trainer.compute_loss(model, batch)
                forward = time.perf_counter() - start
                loss.backward()
                backward = time.perf_counter() - start - forward
            grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
            metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k != "num_tokens"}
            seen.setdefault(name, []).append((loss.detach(), grads, metrics, forward, backward))
        every, only = seen["every_position"][-1], seen["completion_only"][-1]
        step = {n: min(f + b_ for *_, f, b_ in runs) for n, runs in seen.items()}
        found.append(
            {
                "shape": list(batch["input_ids"].shape),
                "labelled_fraction": round(float(batch["completion_mask"].float().mean()), 4),
                "step_s": {n: round(s, 2) for n, s in step.items()},
                "speedup": round(step["every_position"] / step["completion_only"], 2),
                "same_loss": bool(torch.equal(every[0], only[0])),
                "same_gradients": bool(torch.equal(every[1], only[1])),
                "same_metrics": every[2] == only[2],
            }
        )
    return {"method": method, "batches": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--methods", nargs="+", default=["calyrex", "lora"])
    parser.add_argument("--pairs", default=str(PAIRS))
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/dpo-fused-head.json"))
    args = parser.parse_args()
    lines = Path(args.pairs).read_text().splitlines()
    pairs = [json.loads(line) for line in lines if line.strip()]
    result = {
        "model": args.model,
        "pairs": os.path.relpath(Path(args.pairs).resolve(), ROOT),
        "threads": torch.get_num_threads(),
        "runs": [measure(args.model, m, pairs, args.batches) for m in args.methods],
        "machine": {"platform": platform.platform(), "processor": platform.processor()},
        "torch": torch.__version__,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["runs"], indent=1))


if __name__ == "__main__":
    main()
