"""The analysis loop: stream rule conversations, fold per-layer summaries, recommend a placement.

Per example: a rule run (residuals, attention weights, response log-likelihood), a neutral run
(residuals, log-likelihood) and the patched rule runs, one per layer, batched ``patch_chunk`` at
a time. What is kept across examples is O(L) numbers per measure plus one pooled (L, D) vector
per example for the probe.

Legend: N examples, L layers, n response positions, D hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from ..adapters.methods import accept_system_mask, is_calyrex
from .blocks import BlockMeter
from .capture import (
    capture,
    eager_attention,
    encode_pair,
    layers_of,
    patched_logprobs,
    uniform_share,
)
from .data import RuleExample
from .probe import probe_accuracy
from .recommend import recommend
from .stats import RunningStat


@dataclass
class AnalysisConfig:
    """How the analysis runs (``calyrex analyze`` takes one flag per field)."""

    max_examples: int | None = None
    """Analyse at most this many conversations, the first ones (the built-in set interleaves
    its rules); default: all."""
    test_fraction: float = 0.25
    """The share of each rule's conversations held out to score the rule probe."""
    probe_l2: float = 1e-2
    """The L2 penalty of the rule probe (a linear classifier per layer)."""
    patch_chunk: int = 8
    """Layers patched per forward pass (memory against speed: chunk × T × D per layer)."""
    seed: int = 0
    """The probe's train/test split."""
    progress: bool = True
    """Show a progress bar."""


class Accumulator:
    """Everything kept across examples."""

    def __init__(self) -> None:
        self.effect, self.attention, self.drop = RunningStat(), RunningStat(), RunningStat()
        self.excess, self.uniform, self.loglik = RunningStat(), RunningStat(), RunningStat()
        self.features: list[torch.Tensor] = []  # N × (L, D): the probe's inputs
        self.labels: list[str] = []


@torch.no_grad()
def _one(
    model: nn.Module, tok: Any, ex: RuleExample, acc: Accumulator, cfg: AnalysisConfig, meter: Any
) -> None:
    device = next(model.parameters()).device
    rule, neutral = encode_pair(tok, ex, device)
    with meter.watch(rule) if meter else nullcontext():
        r = capture(model, rule, attentions=True)
    n = capture(model, neutral)
    diff = r.hidden - n.hidden  # (L, n, D): what the rule put into the residual
    acc.effect.add((diff.norm(dim=-1) / r.hidden.norm(dim=-1).clamp_min(1e-12)).mean(-1))
    acc.attention.add(r.system_attention)
    uniform = uniform_share(rule)
    acc.uniform.add(torch.tensor([uniform]))
    acc.excess.add(r.system_attention - uniform)
    acc.features.append(diff.mean(1).cpu())  # (L, D), pooled over the response
    acc.labels.append(ex.rule_id)
    num_layers = r.hidden.shape[0]
    patched = torch.cat(
        [
            patched_logprobs(
                model, rule, n.hidden, list(range(s, min(s + cfg.patch_chunk, num_layers)))
            )
            for s in range(0, num_layers, cfg.patch_chunk)
        ]
    )  # (L, n)
    acc.drop.add(r.logprobs.mean() - patched.mean(-1))  # nats per response token
    acc.loglik.add(torch.stack([r.logprobs.mean(), n.logprobs.mean()]))


def analyze_model(
    model: nn.Module,
    tokenizer: Any,
    examples: Sequence[RuleExample],
    config: AnalysisConfig | None = None,
) -> dict[str, Any]:
    """Run the five measures on ``model`` (an HF causal LM or a calyrex model) and recommend.

    Returns the content of ``analysis.json``: per-layer ``curves``, the ``blocks`` of a calyrex
    model (else ``None``), ``recommended_placement`` / ``recommended_layers`` and their evidence.
    """
    from tqdm.auto import tqdm

    cfg = config or AnalysisConfig()
    examples = list(examples)[: cfg.max_examples]
    if len({e.rule_id for e in examples}) < 2:
        raise ValueError("the analysis needs conversations with at least two different rules")
    acc = Accumulator()
    model = accept_system_mask(model)  # one batch for every model: system_mask included
    meter = BlockMeter(model) if is_calyrex(model) else None
    was_training = model.training
    model.eval()
    try:
        with eager_attention(model):
            for ex in tqdm(examples, desc="analyze", disable=not cfg.progress):
                _one(model, tokenizer, ex, acc, cfg, meter)
    finally:
        model.train(was_training)
    curves = _curves(acc, cfg)
    num_layers = len(layers_of(model))
    rec = recommend(curves, num_layers, len(examples))
    curves["score"] = rec.pop("score")
    return {
        "num_layers": num_layers,
        "num_examples": len(examples),
        "rules": sorted(set(acc.labels)),
        "config": asdict(cfg),
        "curves": curves,
        "loglik_per_token": {
            "rule": round(float(acc.loglik.mean[0]), 6),
            "neutral": round(float(acc.loglik.mean[1]), 6),
        },
        "blocks": meter.to_dict() if meter else None,
        **rec,
    }


def _curves(acc: Accumulator, cfg: AnalysisConfig) -> dict[str, Any]:
    rules = sorted(set(acc.labels))
    labels = [rules.index(r) for r in acc.labels]
    accuracy, chance, n_test = probe_accuracy(
        torch.stack(acc.features), labels, cfg.test_fraction, cfg.seed, cfg.probe_l2
    )
    drop = acc.drop.to_dict()
    total = float(acc.loglik.mean[0] - acc.loglik.mean[1])  # what swapping the whole prompt costs
    return {
        "system_prompt_effect": acc.effect.to_dict(),
        "rule_probe_accuracy": accuracy,
        "rule_probe_chance": chance,
        "rule_probe_test_size": n_test,
        "system_attention": acc.attention.to_dict(),
        "system_attention_uniform": round(float(acc.uniform.mean[0]), 6),
        "system_attention_excess": acc.excess.to_dict(),  # share minus the uniform share
        "patching_drop": drop,
        "patching_fraction": [
            round(d / total, 6) if abs(total) > 1e-9 else None for d in drop["mean"]
        ],
    }
