"""What a benchmark run measures: one typed config, filled from a preset where left unset.

Presets: ``full`` is the issue's setting (GPU default), ``cpu`` fits a 2-core CPU in minutes
(the default without CUDA), ``quick`` is a tiny shape that runs end to end in seconds (CI).
``model`` measures a real model (a name ``calyrex.resolve`` knows, a directory, a hub id) in
place of the preset's random-weight ``shape``. ``dtype`` ``auto`` (the default without CUDA) is
what ``calyrex.precision`` finds fast on this machine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from calyrex.precision import Choice
from calyrex.precision import resolve as resolve_precision

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
    preset: str | None = None  # None: "full" on CUDA, "cpu" otherwise
    shape: str | None = None
    model: str | None = None  # a real model in place of ``shape`` (not both)
    sections: list[str] = field(default_factory=lambda: list(DEFAULT_SECTIONS))
    device: str | None = None  # None: cuda when available
    dtype: str | None = None  # None: bfloat16 on CUDA, auto on CPU (``calyrex.precision``)
    placement: str = "late8th"
    seed: int = 0
    train_batch: int | None = None
    train_tokens: int | None = None
    train_system: int | None = None
    train_labelled: int | None = None
    train_steps: int | None = None
    train_warmup: int | None = None
    system_tokens: int | None = None
    conversation_tokens: int | None = None
    decode_steps: int | None = None
    repeats: int | None = None
    scaling_lengths: list[int] | None = None
    scaling_span: int | None = None
    decode_contexts: list[int] | None = None
    shared_batch: int | None = None
    shared_system: int | None = None
    shared_conversation: int | None = None
    serve_model: str | None = None
    serve_system: int | None = None
    serve_tokens: int | None = None
    serve_streams: list[int] | None = None
    serve_requests: int | None = None
    serve_rounds: int | None = None
    serve_time_limit: float | None = None

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
