"""The ``calyrex ruleworld-*`` subcommands: thin wrappers over the RuleWorld library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from .pretrain import pretrain as _pretrain


def pretrain(
    seed: int = 0, out: str | None = None, quick: bool = False, steps: int | None = None
) -> None:
    """Pretrain RuleWorld's backbone from scratch (default: into the packaged asset directory).

    About 10 minutes on 2 idle CPU cores; --quick trains a narrow one for a few steps (CI).

    Args:
        seed: the world and the initialisation
        out: the directory to write (default: the packaged asset directory)
        quick: a narrow backbone for a few steps (CI)
        steps: training steps (default: the recipe's)
    """
    _pretrain(seed=seed, out=out, quick=quick, steps=steps)


def corpus(out: str, n: int = 5000, seed: int = 0, kind: Literal["sft", "general"] = "sft") -> None:
    """Write N conversations as OpenAI-messages JSONL: KIND "sft" (rule following) or "general".

    Args:
        out: the JSONL file to write
        n: conversations to write
        seed: the world they are drawn from
        kind: sft (rule following) or general
    """
    from .corpus import general_corpus, sft_corpus, write_jsonl
    from .world import World

    build = {"sft": sft_corpus, "general": general_corpus}[kind]
    print(f"{write_jsonl(build(World(seed), n), out)} conversations -> {out}")


def evaluate(
    model: str | None = None,
    adapter: str | None = None,
    seed: int = 0,
    quick: bool = False,
    out: str | None = None,
) -> None:
    """Evaluate a model (default: the shipped backbone), optionally with an adapter, on RuleWorld.

    Args:
        model: a backbone directory or name (default: ruleworld, the shipped one)
        adapter: a trained adapter directory (any method)
        seed: the world the suites are drawn from
        quick: a CI-sized evaluation
        out: also write the results as JSON to this file
    """
    import torch

    from ...adapters.loading import load_model
    from .evaluate import QUICK, EvalConfig
    from .evaluate import evaluate as _evaluate
    from .train import DEVICE, DTYPE
    from .world import World

    torch.set_num_threads(min(torch.get_num_threads(), 2))
    net, tok = load_model(model or "ruleworld", adapter, DTYPE, DEVICE)
    results = _evaluate(net, tok, World(seed), EvalConfig(**(QUICK if quick else {})))
    text = json.dumps(results, indent=2)
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")
