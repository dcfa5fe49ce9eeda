"""Forward passes that read (and patch) the residual stream at the response positions.

The one file of the analysis that touches the model: decoder layers are called opaquely and
read through forward hooks (``calyrex.core.hf``), attention weights come from HF's own
``output_attentions`` (eager attention), nothing of HF's attention is re-derived.

Legend: L decoder layers, T sequence, n response positions, D hidden, H heads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..adapters.contract import Adapted
from ..core import hf
from ..span.chat import IGNORE_INDEX, encode_one
from .data import RuleExample


@dataclass
class Encoded:
    """One run of a conversation: ``positions`` are the tokens whose outputs predict the response."""

    input_ids: torch.Tensor  # (1, T)
    system_mask: torch.Tensor  # (1, T) bool
    positions: torch.Tensor  # (n,) the token before each response token
    targets: torch.Tensor  # (n,) the response tokens (and the end-of-turn token after them)


def encode(tokenizer: Any, conversation: list[dict[str, str]], device: torch.device) -> Encoded:
    row = encode_one(tokenizer, conversation)
    labels = torch.tensor(row["labels"])
    targets = torch.nonzero(labels != IGNORE_INDEX).flatten()  # (n,)
    if targets.numel() == 0 or int(targets[0]) == 0:
        raise ValueError("a rule conversation must end with a non-empty assistant response")
    return Encoded(
        torch.tensor([row["input_ids"]], device=device),
        torch.tensor([row["system_mask"]], device=device).bool(),
        (targets - 1).to(device),
        labels[targets].to(device),
    )


def encode_pair(tokenizer: Any, ex: RuleExample, device: torch.device) -> tuple[Encoded, Encoded]:
    """(rule run, neutral run); their response tokens are the same, position for position."""
    rule = encode(tokenizer, ex.conversation(neutral=False), device)
    neutral = encode(tokenizer, ex.conversation(neutral=True), device)
    if not torch.equal(rule.targets, neutral.targets):
        raise ValueError(f"rule {ex.rule_id!r}: the response tokenises differently in the two runs")
    if not rule.system_mask.any():
        raise ValueError(
            f"rule {ex.rule_id!r}: no system prompt tokens (empty, or dropped by the template)"
        )
    return rule, neutral


def backbone(model: nn.Module) -> nn.Module:
    """The HF causal LM under an adapted model's adapter (any method), or the model itself."""
    return model.get_base_model() if isinstance(model, Adapted) else model


def layers_of(model: nn.Module) -> nn.ModuleList:
    return hf.decoder_layers(backbone(model))


@contextmanager
def hooked(model: nn.Module, make_hook: Any) -> Iterator[None]:
    """Forward hooks ``make_hook(i)`` on every decoder layer (after any calyrex block hook)."""
    handles = [
        layer.register_forward_hook(make_hook(i)) for i, layer in enumerate(layers_of(model))
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _call(model: nn.Module, run: Encoded, batch: int = 1, **kwargs: Any) -> Any:
    """``model`` (it takes ``system_mask``: ``accept_system_mask``) on ``batch`` copies of ``run``."""
    ids = run.input_ids.expand(batch, -1)  # (batch, T)
    span = run.system_mask.expand(batch, -1)  # a calyrex model reads it, others ignore it
    return model(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        system_mask=span,
        use_cache=False,
        **kwargs,
    )


def token_logprobs(logits: torch.Tensor, run: Encoded) -> torch.Tensor:
    """Log-probability of each response token: ``logits`` (B, T, V) → (B, n)."""
    logp = torch.log_softmax(logits[:, run.positions].float(), dim=-1)  # (B, n, V)
    return logp.gather(-1, run.targets.expand(logits.shape[0], -1)[..., None]).squeeze(-1)


@dataclass
class Captured:
    hidden: (
        torch.Tensor
    )  # (L, n, D) float32, the residual after each layer at the response positions
    logprobs: torch.Tensor  # (n,)
    system_attention: torch.Tensor | None  # (L,) share of attention mass on the system span


@torch.no_grad()
def capture(model: nn.Module, run: Encoded, attentions: bool = False) -> Captured:
    """One forward pass keeping only per-layer residuals at the response positions."""
    hidden: dict[int, torch.Tensor] = {}

    def make_hook(i: int):  # noqa: ANN202
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            hidden[i] = hf.layer_hidden(output)[0, run.positions].float()  # (n, D)

        return hook

    with hooked(model, make_hook):
        out = _call(model, run, output_attentions=attentions)
    share = None
    if attentions:
        if out.attentions is None or any(a is None for a in out.attentions):
            raise ValueError(
                "the model returned no attention weights; load it with eager attention"
            )
        share = torch.stack([system_share(a, run) for a in out.attentions])
    stacked = torch.stack([hidden[i] for i in range(len(hidden))])  # (L, n, D)
    return Captured(stacked, token_logprobs(out.logits, run)[0], share)


def system_share(attn: torch.Tensor, run: Encoded) -> torch.Tensor:
    """Mean share of attention mass response positions put on system tokens: (1, H, T, T) → ()."""
    rows = attn[0][:, run.positions].float()  # (H, n, T)
    return rows[..., run.system_mask[0]].sum(-1).mean()


def uniform_share(run: Encoded) -> float:
    """The share a uniform causal attention would give the system span (the reference level)."""
    seen = torch.cumsum(run.system_mask[0].float(), 0)[run.positions]  # (n,)
    return float((seen / (run.positions + 1).float()).mean())


@torch.no_grad()
def patched_logprobs(
    model: nn.Module, run: Encoded, donor: torch.Tensor, layers: list[int]
) -> torch.Tensor:
    """Response log-probs with row ``r``'s residual after ``layers[r]`` replaced by ``donor``.

    ``donor`` (L, n, D) is the other run's residual at its own response positions, which hold
    the same tokens. Returns (len(layers), n): one patched run per layer, batched.
    """
    rows = {layer: r for r, layer in enumerate(layers)}

    def make_hook(i: int):  # noqa: ANN202
        def hook(module: nn.Module, args: tuple, output: Any) -> Any:
            if i not in rows:
                return None
            h = hf.layer_hidden(output).clone()  # (B, T, D)
            h[rows[i], run.positions] = donor[i].to(h.dtype)
            return hf.with_layer_hidden(output, h)

        return hook

    with hooked(model, make_hook):
        out = _call(model, run, batch=len(layers))
    return token_logprobs(out.logits, run)  # (len(layers), n)


@contextmanager
def eager_attention(model: nn.Module) -> Iterator[None]:
    """Switch the backbone to eager attention (the only one that returns weights), then back."""
    base = backbone(model)
    before = getattr(base.config, "_attn_implementation", None)
    if before not in (None, "eager"):
        base.set_attn_implementation("eager")
    try:
        yield
    finally:
        if before not in (None, "eager"):
            base.set_attn_implementation(before)
