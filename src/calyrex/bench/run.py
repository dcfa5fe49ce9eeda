"""Run the configured sections on one backbone and collect every figure in one dict."""

from __future__ import annotations

import time
from typing import Any

import torch

import calyrex

from . import inference, scaling, serve, shared, train
from .backbone import backbone as load_backbone
from .config import BenchConfig
from .measure import machine


def _summary(results: dict[str, Any]) -> dict[str, float]:
    """The headline ratios, at the top level of the JSON."""
    out: dict[str, float] = {}
    if "train" in results:
        t = results["train"]
        out["train_time_ratio_vs_lora"] = t["calyrex_time_ratio_vs_lora"]
        out["train_activation_memory_ratio_vs_lora"] = t["calyrex_activation_memory_ratio_vs_lora"]
        out["train_flop_ratio_vs_lora"] = t["calyrex_flop_ratio_vs_lora"]
    if "inference" in results:
        i = results["inference"]
        for key in ("prefill_ratio_vs_base", "decode_ratio_vs_base", "flop_ratio_vs_base"):
            out[key] = i[key]
        out["decode_flop_ratio_vs_base"] = i["decode_flop_ratio_vs_base"]
    if "serve" in results:
        out.update(serve.summary(results["serve"]))
    return out


def run_bench(config: BenchConfig, log: Any = print) -> dict[str, Any]:
    """Every figure of the configured sections, with machine, versions, backbone and settings."""
    cfg = config.resolve()
    device, dtype, choice = cfg.torch_device, cfg.torch_dtype, cfg.precision
    torch.manual_seed(cfg.seed)
    cal = calyrex.CalyrexConfig(placement=cfg.placement)
    results: dict[str, Any] = {"machine": machine(device, dtype), "settings": vars(cfg)}
    results["machine"]["precision"] = {
        "asked": cfg.dtype,
        "chosen": choice.precision,
        "reason": choice.reason,
    }
    backbone = None
    if set(cfg.sections) - {"serve"}:  # serve loads its own model and tokenizer
        backbone, kind, record = load_backbone(cfg)  # kind: "shape" (random weights) or "model"
        results[kind] = record
        results["cal_layers"] = cal.resolve(backbone.config).layers
    steps = {
        "train": lambda: train.run(
            backbone,
            cal,
            train.TrainCase(
                cfg.train_batch, cfg.train_tokens, cfg.train_system, cfg.train_labelled,
                cfg.train_steps, cfg.train_warmup,
            ),
            device,
        ),
        "inference": lambda: {
            **inference.prefill_decode(backbone, cal, _inference_case(cfg), device),
            "decode_vs_context": inference.decode_vs_context(
                backbone, cal, _inference_case(cfg), device
            ),
        },
        "scaling": lambda: {
            "block_vs_length": scaling.block_vs_length(
                backbone, cal, cfg.scaling_lengths, cfg.scaling_span, cfg.repeats, device
            )
        },
        "shared": lambda: shared.run(
            backbone,
            cal,
            shared.SharedCase(
                cfg.shared_batch, cfg.shared_system, cfg.shared_conversation, cfg.repeats
            ),
            device,
        ),
        "serve": lambda: serve.run(
            serve.ServeCase(
                cfg.serve_model, cfg.serve_system, cfg.serve_tokens, cfg.serve_streams,
                cfg.serve_requests, cfg.serve_time_limit, cfg.serve_rounds,
            ),
            cfg.placement, device, dtype,
        ),
    }  # fmt: skip
    for name in cfg.sections:
        start = time.perf_counter()
        log(f"[calyrex bench] {name} …")
        results[name] = steps[name]()
        results[name]["wall_s"] = time.perf_counter() - start
    return {**_summary(results), **results}


def _inference_case(cfg: BenchConfig) -> inference.InferenceCase:
    return inference.InferenceCase(
        cfg.system_tokens, cfg.conversation_tokens, cfg.decode_steps, cfg.repeats,
        cfg.decode_contexts,
    )  # fmt: skip
