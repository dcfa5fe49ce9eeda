"""Why ``calyrex demo --full`` is shaped as it is: the speed-ups and costs it rests on, measured
in one run on the shipped RuleWorld backbone.

    python benchmarks/ruleworld_sizing.py [--out docs/ruleworld/sizing.json]

- padding: the share of padded tokens in --full's first 100 training batches, random (the
  Trainer's default) vs grouped by length (transformers' ``LengthGroupedSampler``);
- training: non-padding tokens per second of a calyrex run, random vs grouped batches;
- long prompts: seconds per example of greedy generation at 2,048 tokens in one padded batch
  (SDPA's masked kernel) vs one at a time (``EvalConfig.batch_tokens``), and at 4,096 tokens;
- LoRA: seconds to answer the same short prompts with the PEFT adapter vs merged into the
  weights (``merge_and_unload``).

Prints the ratios and writes them with the raw figures; ``scripts/ruleworld_readme.py`` puts the
file in the README. Takes about 2 min on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from calyrex.research.ruleworld.pretrain import ASSET_DIR

ROOT = Path(__file__).resolve().parents[1]
STEPS, BATCH, MEASURED_BATCHES = 10, 16, 100


def _timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def padding_shares(tok, conversations: list, max_length: int) -> dict:
    """Padded-token share of the first batches of each sampler over --full's corpus, encoded as
    training encodes it."""
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from calyrex.training.data import encode_conversations

    lengths = [len(r["input_ids"]) for r in encode_conversations(tok, conversations, max_length)]
    torch.manual_seed(0)
    orders = {
        "random": torch.randperm(len(lengths)).tolist(),
        "grouped": list(LengthGroupedSampler(BATCH, lengths=lengths)),
    }
    shares = {}
    for name, order in orders.items():
        batches = [order[i : i + BATCH] for i in range(0, BATCH * MEASURED_BATCHES, BATCH)]
        padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
        shares[name] = round(1 - sum(lengths[i] for b in batches for i in b) / padded, 3)
    return shares


def training_speed(cfg, data: Path, tmp: Path) -> dict:
    """Non-padding tokens per second of ``STEPS`` calyrex steps, random vs grouped batches."""
    from calyrex.research.ruleworld.demo import _train

    speeds = {}
    for grouped in (False, True):
        run = dataclasses.replace(cfg, steps=STEPS, group_by_length=grouped)
        out = tmp / f"train-{grouped}"
        _train("calyrex", ASSET_DIR, data, out, run, seed=0)
        last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
        speeds["grouped" if grouped else "random"] = round(last["train_tokens_per_second"], 1)
    return speeds


def long_prompts(model, tok, world, n: int = 4) -> dict:
    """Seconds per example: 2,048-token prompts padded in one batch vs alone; 4,096 alone."""
    from calyrex.research.ruleworld import attacks
    from calyrex.research.ruleworld.evaluate import generate

    probe = world.filler(world.rng("calibrate"), 1000)
    per_word = len(tok(probe, add_special_tokens=False)["input_ids"]) / 1000
    convs = {
        t: [e.messages for e in attacks.longctx_examples(world, n, round(t / per_word))]
        for t in (2048, 4096)
    }
    out = {}
    for name, prompts, budget in (
        ("2048_padded_batch", convs[2048], None),
        ("2048_alone", convs[2048], 2048),
        ("4096_alone", convs[4096], 2048),
    ):
        seconds, _ = _timed(generate, model, tok, prompts, n, 24, budget)
        out[name] = round(seconds / n, 3)
    return out


def lora_merged(base_path: Path, tok, world, n: int = 48) -> dict:
    """Seconds to answer ``n`` short prompts with the PEFT LoRA adapter vs merged."""
    from calyrex import adapt
    from calyrex.adapters.loading import load_model
    from calyrex.research.ruleworld import attacks
    from calyrex.research.ruleworld.evaluate import generate

    prompts = [e.messages for e in attacks.injection_examples(world, n)]
    peft_model = adapt(load_model(str(base_path), None, "float32", "cpu")[0], "lora", seed=0).eval()
    unmerged, _ = _timed(generate, peft_model, tok, prompts, 16, 24)
    merged_model = peft_model.merge_and_unload().eval()
    merged, _ = _timed(generate, merged_model, tok, prompts, 16, 24)
    return {"adapter_seconds": round(unmerged, 2), "merged_seconds": round(merged, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "ruleworld" / "sizing.json"))
    args = parser.parse_args()
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    from calyrex.adapters.loading import load_model
    from calyrex.research.ruleworld.corpus import sft_corpus, write_jsonl
    from calyrex.research.ruleworld.demo import FULL
    from calyrex.research.ruleworld.world import World

    start, load = time.time(), os.getloadavg()[0]
    world = World(0)
    model, tok = load_model(str(ASSET_DIR), None, "float32", "cpu")
    model.eval()
    conversations = list(sft_corpus(world, FULL.conversations))
    results = {"padding_share": padding_shares(tok, conversations, FULL.max_length)}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "sft.jsonl"
        write_jsonl(conversations, data)
        results["train_tokens_per_second"] = training_speed(FULL, data, Path(tmp))
    results["long_prompt_seconds_per_example"] = long_prompts(model, tok, world)
    results["lora_generation"] = lora_merged(ASSET_DIR, tok, world)
    tps, longp, lora = (
        results["train_tokens_per_second"],
        results["long_prompt_seconds_per_example"],
        results["lora_generation"],
    )
    results["ratios"] = {
        "train_tokens_per_second_grouped_vs_random": round(tps["grouped"] / tps["random"], 2),
        "long_prompt_padded_vs_alone_2048": round(
            longp["2048_padded_batch"] / longp["2048_alone"], 2
        ),
        "long_prompt_4096_vs_2048_alone": round(longp["4096_alone"] / longp["2048_alone"], 2),
        "lora_merged_vs_adapter_time": round(lora["merged_seconds"] / lora["adapter_seconds"], 2),
    }
    entry = {
        "kind": "sizing",
        "command": "python benchmarks/ruleworld_sizing.py",
        "seconds": round(time.time() - start, 1),
        "cpus": torch.get_num_threads(),
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        "results": results,
    }
    Path(args.out).write_text(json.dumps(entry, indent=2) + "\n")
    for key, value in results["ratios"].items():
        print(f"{key}: {value}")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
