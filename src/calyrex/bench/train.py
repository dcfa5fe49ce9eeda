"""Training step time and activation memory: CALYREX vs parameter-matched LoRA and ParallelMLP.

One backbone serves every method in turn (adapted, measured, then restored), so weights, batch,
sequence length and optimiser are the same for all. Every method computes logits only at the
labelled positions (``logits_to_keep``): the 150k-vocabulary LM head is the same work for each.

Activation memory: peak during forward + backward minus what was held before; gradients and
AdamW state already exist then (a warm-up step allocated them and ``zero_grad`` keeps them),
so what remains is what the step stores and its temporaries.

Legend: B batch, T tokens, P labelled positions, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import calyrex

from . import flops
from .data import token_batch
from .measure import median_time, peak_bytes

METHODS = ("calyrex", "parallel_mlp", "lora")


@dataclass
class TrainCase:
    batch: int
    tokens: int
    system: int
    labelled: int
    steps: int
    warmup: int


def _adapter_flops(model: nn.Module, method: str, g: flops.Geometry, case: TrainCase) -> dict:
    cfg = getattr(model, "adapter_config", None)
    trainable = calyrex.count_trainable(model)
    if method == "lora":
        return {"first": 0, "fwd": 2 * case.tokens * trainable}
    layers = cfg.layers
    if method == "calyrex":
        per = flops.cal_forward(g, cfg, case.tokens, case.system)
    else:
        per = 2 * 3 * case.tokens * g.hidden * cfg.intermediate_size
    return {"first": min(layers), "fwd": len(layers) * per}


def _step_fn(model: nn.Module, method: str, case: TrainCase, vocab: int, device: torch.device):  # noqa: ANN202
    ids, system_mask = token_batch(case.batch, case.tokens, case.system, vocab, device)
    targets = ids[:, -case.labelled :]  # (B, P) the assistant reply at the end of each row
    # logits exactly where a label is predicted: positions T-P-1 … T-2 (no slice of the logits,
    # whose backward would zero-fill a (B, P, V) buffer)
    keep = torch.arange(case.tokens - case.labelled - 1, case.tokens - 1, device=device)
    extra = {"system_mask": system_mask}  # every adapted model takes it (LoRA ignores it)
    params = [p for p in model.parameters() if p.requires_grad]
    # fused AdamW: transformers.Trainer's default optimiser (adamw_torch_fused)
    optimizer = torch.optim.AdamW(params, lr=1e-5, fused=True)

    def forward_backward() -> None:
        logits = model(input_ids=ids, logits_to_keep=keep, **extra).logits.float()  # (B, P, V)
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).backward()

    def step() -> None:
        forward_backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)  # keep gradient buffers: not activations

    return step, forward_backward


def measure_method(
    backbone: nn.Module,
    method: str,
    cal: calyrex.CalyrexConfig,
    case: TrainCase,
    device: torch.device,
) -> dict[str, Any]:
    """Seconds per step, activation bytes, trainable parameters and FLOPs of one method."""
    g = flops.Geometry.of(backbone.config)
    model = calyrex.adapt(backbone, method, cal, seed=0)
    try:
        model.train()
        step, forward_backward = _step_fn(model, method, case, g.vocab, device)
        seconds = median_time(step, device, case.steps, case.warmup)
        activation = peak_bytes(forward_backward, device)
        adapter = _adapter_flops(model, method, g, case)
        return {
            "step_s": seconds,
            "tokens_per_s": case.batch * case.tokens / seconds,
            "activation_bytes": activation,
            "trainable": calyrex.count_trainable(model),
            "flops": case.batch * flops.train_step(g, method, adapter, case.tokens, case.labelled),
        }
    finally:
        model.eval()
        model.unload()  # the backbone back without the adapter, for the next method


def run(
    backbone: nn.Module, cal: calyrex.CalyrexConfig, case: TrainCase, device: torch.device
) -> dict:
    methods = {m: measure_method(backbone, m, cal, case, device) for m in METHODS}
    lora = methods["lora"]
    out: dict[str, Any] = {"case": vars(case), "methods": methods}
    for m in ("calyrex", "parallel_mlp"):
        out[f"{m}_time_ratio_vs_lora"] = methods[m]["step_s"] / lora["step_s"]
        out[f"{m}_activation_memory_ratio_vs_lora"] = (
            methods[m]["activation_bytes"] / lora["activation_bytes"]
        )
        out[f"{m}_flop_ratio_vs_lora"] = methods[m]["flops"] / lora["flops"]
    return out
