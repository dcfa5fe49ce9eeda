"""The training run's options as one typed dataclass; YAML files mirror it field for field."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OBJECTIVES = ("sft", "dpo")


@dataclass
class TrainConfig:
    model: str
    data: str | list[str]
    out: str
    method: str = "calyrex"
    # "sft": chat conversations, next-token loss on the replies; "dpo": preference pairs
    # (TRL's conversational format), DPO against the model with its adapters off (training.dpo)
    objective: str = "sft"
    beta: float = 0.1  # DPO's β: how far the policy may move from the reference
    init_adapter: str | None = None  # start from this saved adapter (SFT → DPO), same method
    placement: str = "late8th"
    layers: list[int] | None = None
    # more CalyrexConfig fields for the calyrex blocks (init_from_host, intermediate_size, ...);
    # the baselines are matched to the blocks they describe
    block: dict[str, Any] | None = None
    max_steps: int = -1
    epochs: float = 1.0
    lr: float = 1e-4
    batch_size: int = 8
    grad_accum: int = 1
    max_length: int = 1024
    precision: str = "auto"  # bf16 where this machine is fast at it, else fp32 (calyrex.precision)
    seed: int = 0
    save_steps: int = 500
    save_total_limit: int = 2
    logging_steps: int = 10
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    scheduler: str = "cosine"
    gradient_checkpointing: bool = False
    # batches of similar lengths (transformers' LengthGroupedSampler): less padding, faster steps
    group_by_length: bool = False
    fsdp: bool = False  # FSDP2 (fully_shard per decoder layer) under torchrun / accelerate
    resume: bool = False
    tensorboard: bool = False
    system_pool: list[str] | None = None  # None: the built-in pool; [] disables it
    on_truncate: str = "drop"  # or "error"
    skip_invalid: bool = False
    revision: str | None = None
    trust_remote_code: bool = False
    progress: bool = True

    def validate(self) -> None:
        """Fail before any compute on options that cannot work."""
        from ..methods import check_method
        from ..placement import PRESETS
        from ..precision import PRECISIONS

        check_method(self.method)
        if self.layers is None and self.placement not in PRESETS:
            raise ValueError(
                f"unknown placement preset {self.placement!r}; choose one of {sorted(PRESETS)}"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {self.precision!r}")
        if self.on_truncate not in ("drop", "error"):
            raise ValueError(f"on_truncate must be 'drop' or 'error', not {self.on_truncate!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, not {self.objective!r}")
        if self.beta <= 0:
            raise ValueError(f"beta must be positive, not {self.beta}")
        if self.objective == "dpo" and self.fsdp:
            raise ValueError("objective 'dpo' does not support --fsdp yet; train with DDP")
        if self.max_steps <= 0 and self.epochs <= 0:
            raise ValueError("give --max-steps or a positive --epochs")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> TrainConfig:
        """Options from a YAML file (keys as the CLI's, with underscores), then ``overrides``."""
        import yaml

        data = yaml.safe_load(Path(path).read_text()) or {}
        data = {k.replace("-", "_"): v for k, v in data.items()}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"{path}: unknown options {sorted(unknown)}")
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)
