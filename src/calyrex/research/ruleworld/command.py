"""The ``calyrex ruleworld-*`` subcommands: thin wrappers over the RuleWorld library."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ...cli.fields import options_from
from .pretrain import pretrain as _pretrain


@dataclass
class PretrainOptions:
    """``calyrex ruleworld-pretrain``'s options."""

    seed: int = 0
    """The world and the initialisation."""
    out: str | None = None
    """The directory to write (default: the packaged asset directory)."""
    quick: bool = False
    """A narrow backbone for a few steps (CI)."""
    steps: int | None = None
    """Training steps (default: the recipe's)."""


@options_from(PretrainOptions)
def pretrain(**options: Any) -> None:
    """Pretrain RuleWorld's backbone from scratch (default: into the packaged asset directory).

    About 10 minutes on 2 idle CPU cores; --quick trains a narrow one for a few steps (CI).
    """
    _pretrain(**asdict(PretrainOptions(**options)))


@dataclass
class CorpusOptions:
    """``calyrex ruleworld-corpus``'s options."""

    out: str
    """The JSONL file to write."""
    n: int = 5000
    """Conversations to write."""
    seed: int = 0
    """The world they are drawn from."""
    kind: Literal["sft", "general"] = "sft"
    """sft (rule following) or general."""


@options_from(CorpusOptions)
def corpus(**options: Any) -> None:
    """Write N conversations as OpenAI-messages JSONL: KIND "sft" (rule following) or "general"."""
    from .corpus import general_corpus, sft_corpus, write_jsonl
    from .world import World

    opts = CorpusOptions(**options)
    build = {"sft": sft_corpus, "general": general_corpus}[opts.kind]
    print(f"{write_jsonl(build(World(opts.seed), opts.n), opts.out)} conversations -> {opts.out}")


@dataclass
class EvaluateOptions:
    """``calyrex ruleworld-eval``'s options."""

    model: str | None = None
    """A backbone directory or name (default: ruleworld, the shipped one)."""
    adapter: str | None = None
    """A trained adapter directory (any method)."""
    seed: int = 0
    """The world the suites are drawn from."""
    quick: bool = False
    """A CI-sized evaluation."""
    out: str | None = None
    """Also write the results as JSON to this file."""


@options_from(EvaluateOptions)
def evaluate(**options: Any) -> None:
    """Evaluate a model (default: the shipped backbone), optionally with an adapter, on RuleWorld."""
    import torch

    from ...adapters.loading import load_model
    from .evaluate import QUICK, EvalConfig
    from .evaluate import evaluate as _evaluate
    from .train import DEVICE, DTYPE
    from .world import World

    opts = EvaluateOptions(**options)
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    net, tok = load_model(opts.model or "ruleworld", opts.adapter, DTYPE, DEVICE)
    results = _evaluate(net, tok, World(opts.seed), EvalConfig(**(QUICK if opts.quick else {})))
    text = json.dumps(results, indent=2)
    print(text)
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_text(text + "\n")
