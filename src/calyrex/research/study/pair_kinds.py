"""A DPO run's validation rewards per kind of pair (the mix's ``tag``): which pairs it learned.

A DPO run's validation figures are means over every held-out pair: an accuracy of 0.74 can be
every refusal pair won and every "grant the right code" pair lost, a model that has learned to
refuse everything. This module evaluates the run's kept adapter against its reference (the
adapter it started from, as in training) on each kind of validation pair apart, with TRL's own
loss and reward metrics, and writes ``OUT/train/RUN/rewards_by_tag.json``:

    {"reference": "calyrex-late8th-s1", "n": {"granted": 12, ...},
     "by_tag": {"granted": {"loss": ..., "rewards/accuracies": ..., ...}, ...},
     "all": {...}, "seconds": ...}

``all`` is every pair at once, the run's own last validation figures again (a check that the
pairs and the reference are the training's); a kind counts each distinct pair once (a
balanced mix repeats its right-code pairs: ``n`` is the pairs, not the repeats). It needs both
adapters on disk: a run whose adapters went with a machine gets no file (the study says so),
until it is trained again.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from .config import Arm, StudyConfig
from .plan import run_name

FILE = "rewards_by_tag.json"


def _metrics(found: dict[str, float]) -> dict[str, float]:
    from ...training.dpo import REWARDS

    return {"loss": found["eval_loss"]} | {k: found[f"eval_{k}"] for k in REWARDS}


def rewards_by_tag(cfg: StudyConfig, out: Path, arm: Arm, seed: int) -> dict[str, Any] | None:
    """Computes and writes ``OUT/train/RUN/rewards_by_tag.json`` of a finished DPO run; None
    where the run or either adapter is not on disk. The study calls it once per run."""
    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback

    from ...adapters.loading import load_adapter, load_model
    from ...core.adapter_io import read_adapter
    from ...training.config import TrainConfig
    from ...training.dpo import PreferenceTrainer, encode_pairs, normalise_pair, starting_weights
    from ...training.run import _training_args
    from ..mix.command import val_path

    where = out / "train" / run_name(arm, seed)
    start = out / "train" / run_name(cfg.arm(arm.init_from), seed) / "adapter"
    summary = where / "summary.json"
    if not (summary.is_file() and (where / "adapter").is_dir() and start.is_dir()):
        return None
    begun = time.perf_counter()
    train_cfg = TrainConfig(**json.loads(summary.read_text())["config"])
    base, tok = load_model(cfg.model, dtype="float32", device="cpu")
    model = load_adapter(base, start, tokenizer=tok)  # the reference: the run's start
    reference = starting_weights(model)
    model.load_adapter_state_dict(read_adapter(where / "adapter")[1])  # the run's kept adapter
    model.eval()
    lines = val_path(out / "data" / arm.data).read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    pairs = [normalise_pair(row, f"validation pair {i}") for i, row in enumerate(rows)]
    groups: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row, pair in zip(rows, pairs, strict=True):  # a repeated pair once
        groups[row["tag"]].setdefault(json.dumps(pair, sort_keys=True), pair)
    precision = json.loads((where / "precision.json").read_text())["chosen"]
    args = _training_args(train_cfg, precision)
    every = encode_pairs(tok, pairs, train_cfg.max_length)  # in the file's order, as trained
    encoded = {
        tag: encode_pairs(tok, list(p.values()), train_cfg.max_length) for tag, p in groups.items()
    }
    trainer = PreferenceTrainer(
        model, args, every, tok, eval_dataset=every, reference_weights=reference
    )
    for callback in (PrinterCallback, ProgressCallback):  # the study's log: no metric dicts
        trainer.remove_callback(callback)
    found = {
        "reference": start.parent.name,
        "n": {tag: len(rows) for tag, rows in sorted(encoded.items())},
        "by_tag": {
            tag: _metrics(trainer.evaluate(Dataset.from_list(rows)))
            for tag, rows in sorted(encoded.items())
        },
        "all": _metrics(trainer.evaluate(Dataset.from_list(every))),
    }
    found["seconds"] = round(time.perf_counter() - begun, 2)  # the study's compute counts it
    from ...eval.data import write_json

    write_json(where / FILE, found)
    return found


def collected(cfg: StudyConfig, out: Path) -> dict[str, dict[str, Any]]:
    """Every DPO run's ``rewards_by_tag.json`` that is written, by run (nothing computed)."""
    from .plan import runs

    files = {run: out / "train" / run / FILE for run, arm, _ in runs(cfg) if arm is not None}
    return {run: json.loads(f.read_text()) for run, f in files.items() if f.is_file()}
