"""What a benchmark run measures: one typed config, filled from a preset where left unset.

Presets: ``full`` is the issue's setting (GPU default), ``cpu`` fits a 2-core CPU in minutes
(the default without CUDA), ``quick`` is a tiny shape that runs end to end in seconds (CI).
``model`` measures a real model (a name ``calyrex.backbones.resolve`` knows, a directory, a hub id) in
place of the preset's random-weight ``shape``. ``dtype`` ``auto`` (the default without CUDA) is
what ``calyrex.backbones.precision`` finds fast on this machine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from calyrex.backbones.precision import ALIASES, PRECISIONS, Choice
from calyrex.backbones.precision import resolve as resolve_precision
from calyrex.core.placement import PRESETS as PLACEMENTS

from .shapes import SHAPES

SECTIONS = ("train", "inference", "scaling", "shared", "serve")
DEFAULT_SECTIONS = SECTIONS[:4]  # serve needs the calyrex[serve] extra: asked for by name
DOUBLINGS = [1024, 2048, 4096, 8192, 16384]

PRESETS: dict[str, dict[str, Any]] = {
    "full": dict(
        shape="qwen2.5-0.5b",
        train_batch=4, train_tokens=2048, train_system=500, train_labelled=512, train_steps=10,
        train_warmup=3, system_tokens=500, conversation_tokens=2000, decode_steps=64, repeats=5,
        scaling_lengths=DOUBLINGS, scaling_span=500, decode_contexts=DOUBLINGS,
        shared_batch=32, shared_system=500, shared_conversation=2000,
        serve_model="ruleworld", serve_system=500, serve_tokens=64, serve_streams=[1, 4, 16],
        serve_requests=4, serve_rounds=3, serve_time_limit=900.0,
    ),
    "cpu": dict(
        shape="qwen2.5-0.5b",
        train_batch=1, train_tokens=512, train_system=128, train_labelled=128, train_steps=3,
        train_warmup=1, system_tokens=250, conversation_tokens=1000, decode_steps=8, repeats=2,
        scaling_lengths=DOUBLINGS, scaling_span=500, decode_contexts=[512, 1024, 2048, 4096, 8192],
        shared_batch=32, shared_system=128, shared_conversation=16,
        serve_model="ruleworld", serve_system=500, serve_tokens=32, serve_streams=[1, 4, 16],
        serve_requests=2, serve_rounds=3, serve_time_limit=900.0,
    ),
    "quick": dict(
        shape="tiny",
        train_batch=2, train_tokens=64, train_system=16, train_labelled=16, train_steps=2,
        train_warmup=1, system_tokens=16, conversation_tokens=48, decode_steps=4, repeats=1,
        scaling_lengths=[64, 128, 256], scaling_span=16, decode_contexts=[64, 128, 256],
        shared_batch=4, shared_system=16, shared_conversation=8,
        serve_model="tiny", serve_system=48, serve_tokens=4, serve_streams=[1, 2, 4],
        serve_requests=1, serve_rounds=1, serve_time_limit=120.0,
    ),
}  # fmt: skip


@dataclass
class BenchConfig:
    """One benchmark run; each field is a ``calyrex bench`` flag (``--train-batch`` ↔
    ``train_batch``), and the string under a field is that flag's help. A size left unset
    (None) comes from the preset."""

    preset: str | None = field(default=None, metadata={"choices": PRESETS})
    """Sizes for every size left unset: full (the issue's), cpu (minutes on 2 cores) or quick
    (tiny, seconds); unset: full on CUDA, cpu otherwise."""
    shape: str | None = field(default=None, metadata={"choices": SHAPES})
    """Backbone of a real model's shape with random weights; unset: the preset's."""
    model: str | None = None
    """A real model in place of --shape (not both): smollm2, ruleworld, a directory, a hub id."""
    sections: list[str] = field(
        default_factory=lambda: list(DEFAULT_SECTIONS), metadata={"choices": SECTIONS}
    )
    """What to measure; serve (calyrex serve on loopback, the calyrex[serve] extra) only when
    named."""
    device: str | None = None
    """Device to measure on (cpu, cuda, cuda:1, ...); unset: cuda when available."""
    dtype: str | None = field(default=None, metadata={"choices": (*PRECISIONS, *ALIASES)})
    """Precision measured in; auto: bf16 where this machine is fast at it, else fp32
    (calyrex.backbones.precision); unset: bfloat16 on CUDA, auto on CPU."""
    placement: str = field(default="late8th", metadata={"choices": PLACEMENTS})
    """Placement preset of the CAL blocks (ParallelMLP is placed to match)."""
    seed: int = 0
    """Seed of the random weights and inputs."""
    train_batch: int | None = None
    """Training step: rows per batch."""
    train_tokens: int | None = None
    """Training step: tokens per row."""
    train_system: int | None = None
    """Training step: system-prompt tokens per row."""
    train_labelled: int | None = None
    """Training step: labelled reply tokens at the end of each row (the only positions given
    logits)."""
    train_steps: int | None = None
    """Training step: timed steps per method (median reported)."""
    train_warmup: int | None = None
    """Training step: untimed warm-up steps per method."""
    system_tokens: int | None = None
    """Inference: system-prompt tokens."""
    conversation_tokens: int | None = None
    """Inference: conversation tokens after the system prompt."""
    decode_steps: int | None = None
    """Inference: tokens decoded per timed decode."""
    repeats: int | None = None
    """Timed repeats of each inference, scaling and shared-prompt figure (median reported)."""
    scaling_lengths: list[int] | None = None
    """Scaling: sequence lengths at which one CAL block and one host layer are timed."""
    scaling_span: int | None = None
    """Scaling: system-span tokens at every length."""
    decode_contexts: list[int] | None = None
    """Inference: context lengths at which the decode step is timed."""
    shared_batch: int | None = None
    """Shared prompt: conversations under one system prompt."""
    shared_system: int | None = None
    """Shared prompt: system-prompt tokens."""
    shared_conversation: int | None = None
    """Shared prompt: conversation tokens per row."""
    serve_model: str | None = None
    """Serve: the model served (ruleworld, tiny, or any name calyrex.adapters.loading knows)."""
    serve_system: int | None = None
    """Serve: system-prompt tokens of the time-to-first-token figure."""
    serve_tokens: int | None = None
    """Serve: completion tokens per request."""
    serve_streams: list[int] | None = None
    """Serve: concurrent streams of each throughput point."""
    serve_requests: int | None = None
    """Serve: requests per stream per point."""
    serve_rounds: int | None = None
    """Serve: runs of each point, the base and CALYREX servers taking turns (median reported)."""
    serve_time_limit: float | None = None
    """Serve: seconds after which points not yet started are skipped."""

    def resolve(self) -> BenchConfig:
        """A copy with the device, dtype and every unset size taken from the preset."""
        if self.model and self.shape:
            raise ValueError(
                f"--model {self.model} and --shape {self.shape}: give one backbone, not both"
            )
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        preset = self.preset or ("full" if device.startswith("cuda") else "cpu")
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
        unknown = set(self.sections) - set(SECTIONS)
        if unknown:
            raise ValueError(f"unknown sections {sorted(unknown)}; choose from {list(SECTIONS)}")
        filled = {k: v for k, v in PRESETS[preset].items() if getattr(self, k) is None}
        if self.model:
            filled.pop("shape")  # the model is the backbone
        dtype = self.dtype or ("bfloat16" if device.startswith("cuda") else "auto")
        resolve_precision(dtype, device)  # an unknown dtype fails here, before any model loads
        return dataclasses.replace(self, preset=preset, device=device, dtype=dtype, **filled)

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device or "cpu")

    @property
    def precision(self) -> Choice:
        """The dtype measured in and why (``auto`` measured once per process)."""
        return resolve_precision(self.dtype or "fp32", self.device or "cpu")

    @property
    def torch_dtype(self) -> torch.dtype:
        return self.precision.dtype
