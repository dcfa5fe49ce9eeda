"""GPU-hours per stage for the dry-run: FLOPs from the model's shape (``calyrex.bench.flops``)
divided by a rate that is either assumed (peak × MFU, from the YAML's ``estimate:``) or
measured (a ``calyrex bench --json`` file: its achieved FLOP/s per method in training, its
prefill and batch-1 decode rates in inference). Which one is used is printed beside the table.

Benchmark sizes below are the published item counts (approximate where a benchmark is built
here) and assumed mean prompt / reply lengths; they make the estimate, not the results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...bench import flops
from ...core.config import CalyrexConfig

# suite → (items, mean prompt tokens, mean generated tokens; 0 = log-likelihood only)
SUITE_COST: dict[str, tuple[int, int, int]] = {
    "ifeval": (541, 100, 300),
    "sysbench": (2500, 800, 300),  # 500 sessions × ~5 turns, each on its own history
    "msj": (256, 4800, 100),  # 32 targets × 8 shot counts; ~150 tokens per shot, mean 32 shots
    "long_ifeval": (3246, 10850, 300),  # 541 prompts × 6 lengths (1k–32k, mean 10.6k)
    "tensortrust": (2688, 300, 100),  # (775 hijacking + 569 extraction) × attack/access
    "glaive_fc": (1000, 500, 100),
    "mmlu": (56168, 150, 0),  # 14,042 questions × 4 choices
    "gsm8k": (1319, 900, 256),
    "squadv2": (11873, 250, 32),
}


@dataclass
class Rates:
    """FLOP/s used for training (per method), prefill and decode, and where they come from."""

    train: dict[str, float]
    prefill: float
    decode: float
    basis: str
    unit: str = "GPU-hours"


def geometry(cfg: Any, model: str) -> tuple[flops.Geometry, Any] | None:
    """(Geometry, HF config) from the YAML's ``geometry:`` or a local ``config.json``."""
    from transformers import AutoConfig

    if cfg.geometry:
        hf = AutoConfig.for_model(
            cfg.geometry.get("model_type", "llama"),
            **{k: v for k, v in cfg.geometry.items() if k != "model_type"},
        )
    elif (Path(model) / "config.json").is_file():
        hf = AutoConfig.from_pretrained(model)
    else:
        return None
    return flops.Geometry.of(hf), hf


def rates(spec: Any, bench: str | None) -> Rates:
    file = bench or spec.bench
    if not file:
        peak = spec.peak_tflops * 1e12
        train = {m: peak * spec.train_mfu for m in ("calyrex", "lora", "parallel_mlp")}
        basis = (
            f"assumed: {spec.gpu} at {spec.peak_tflops:g} TFLOP/s peak, MFU {spec.train_mfu:g} "
            f"in training and {spec.eval_mfu:g} in generation (not measured)"
        )
        return Rates(train, peak * spec.eval_mfu, peak * spec.eval_mfu, basis)
    data = json.loads(Path(file).read_text())
    g = flops.Geometry.of(_shape_config(data["shape"]))
    train = {m: r["flops"] / r["step_s"] for m, r in data["train"]["methods"].items()}
    inf = data["inference"]
    prefill = flops.base_forward(g, inf["tokens"]) / (
        inf["tokens"] / inf["prefill_tokens_per_s"]["base"]
    )
    decode = flops.base_forward(g, 1, past=inf["tokens"]) * inf["decode_tokens_per_s"]["base"]
    machine = data["machine"]
    basis = (
        f"measured: `calyrex bench` on {machine['device']} ({machine.get('cpu') or machine.get('gpu', '')}, "
        f"{machine['dtype']}) from {file}; decode at batch 1, so generation is pessimistic"
    )
    return Rates(train, prefill, decode, basis, f"{machine['device']}-hours (measured device)")


def _shape_config(shape: dict[str, Any]) -> Any:
    from transformers import AutoConfig

    return AutoConfig.for_model("qwen2", **{k: v for k, v in shape.items() if k != "name"})


def cal_params(hf: Any, placement: str | list[int]) -> tuple[list[int], Any, int]:
    """(layers, resolved CAL config, trainable parameters) of CALYREX at ``placement``."""
    layers = placement if isinstance(placement, list) else None
    rc = CalyrexConfig(placement="late8th" if layers else placement, layers=layers).resolve(hf)
    d = hf.hidden_size
    per = d * rc.num_heads * rc.head_dim * 2 + 2 * d * rc.num_kv_heads * rc.head_dim
    per += 3 * d * rc.intermediate_size + 2 * d
    return rc.layers, rc, per * len(rc.layers)


def train_flops(
    g: flops.Geometry, hf: Any, method: str, tc: Any, est: Any, sequences: int
) -> float:
    """FLOPs of one training run: ``sequences`` of ``tokens_per_conversation`` tokens each."""
    tokens = min(est.tokens_per_conversation, tc.max_length)
    layers, rc, budget = cal_params(hf, tc.layers or tc.placement)
    if method == "calyrex":
        adapter = {
            "first": min(layers),
            "fwd": len(layers) * flops.cal_forward(g, rc, tokens, est.system_tokens),
        }
    else:
        adapter = {"first": 0 if method == "lora" else min(layers), "fwd": 2 * tokens * budget}
    return sequences * flops.train_step(g, method, adapter, tokens, tokens)


def eval_seconds(g: flops.Geometry, suites: list[str], r: Rates, max_new: int) -> float:
    """Seconds to evaluate one model on ``suites`` (prefill + decode, base-model FLOPs)."""
    total = 0.0
    for name in suites:
        items, prompt, new = SUITE_COST.get(name, (0, 0, 0))
        new = min(new, max_new)
        total += items * flops.base_forward(g, prompt) / r.prefill
        total += items * new * flops.base_forward(g, 1, past=prompt + new // 2) / r.decode
    return total


def analyze_seconds(g: flops.Geometry, examples: int, r: Rates) -> float:
    """Rule and neutral runs plus one patched run per layer, ~300 tokens each, per example."""
    return examples * (g.layers + 2) * flops.base_forward(g, 300) / r.prefill
