"""The learning-rate sweep behind ``calyrex.research.ruleworld.demo.LR``.

Each method is trained on the demo's SFT data (same steps, batch and seed as the demo) at each
learning rate of its grid; the mean training loss of each run is printed and written to
``OUT/sweep.json``. The demo uses, per method, the rate with the lowest training loss — chosen
on training loss, never on an evaluation metric. About 10 minutes on 2 CPU cores.

    python scripts/ruleworld_lr_sweep.py [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from calyrex.research.ruleworld.corpus import sft_corpus, write_jsonl
from calyrex.research.ruleworld.demo import FULL, _train
from calyrex.research.ruleworld.pretrain import ASSET_DIR
from calyrex.research.ruleworld.world import World

GRID = {
    "calyrex": (5e-3, 1e-2, 2e-2),
    "lora": (2e-3, 5e-3, 1e-2),
    "parallel_mlp": (5e-3, 1e-2, 2e-2, 4e-2),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="ruleworld-lr-sweep")
    root = Path(parser.parse_args().out)
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    data = root / "sft.jsonl"
    write_jsonl(sft_corpus(World(0), FULL.conversations), data)
    losses: dict[str, dict[str, float]] = {}
    for method, grid in GRID.items():
        for lr in grid:
            cfg = dataclasses.replace(FULL, lr={method: lr})
            info = _train(method, ASSET_DIR, data, root / f"{method}-{lr:g}", cfg, seed=0)
            losses.setdefault(method, {})[f"{lr:g}"] = round(info["train_loss"], 3)
            print(method, f"{lr:g}", losses[method][f"{lr:g}"], flush=True)
    best = {m: min(v, key=v.get) for m, v in losses.items()}
    (root / "sweep.json").write_text(json.dumps({"loss": losses, "best": best}, indent=2) + "\n")
    print(json.dumps({"loss": losses, "best": best}))


if __name__ == "__main__":
    main()
