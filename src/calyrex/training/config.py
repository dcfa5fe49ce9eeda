"""The training run's options as one typed dataclass; YAML files mirror it field for field."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters.methods import METHODS, check_method
from ..backbones.precision import PRECISIONS
from ..core.placement import PRESETS

OBJECTIVES = ("sft", "dpo")
REFERENCES = ("start", "base")  # DPO's reference model (training.dpo)
ON_TRUNCATE = ("drop", "error")
# TRL's DPO losses offered here, each checked at the reference point (tests/test_dpo.py); TRL's
# others need options calyrex does not pass (robust, exo_pair: label smoothing) or are untested
DPO_LOSSES = ("sigmoid", "sigmoid_norm", "ipo", "hinge", "apo_zero", "apo_down", "sft")


@dataclass
class TrainConfig:
    """One training run; each field is a ``calyrex train`` flag (``--max-steps`` ↔ ``max_steps``)
    and a key of its ``--config`` YAML file, and the string under a field is that flag's help."""

    model: str
    """Base model: a name calyrex knows (smollm2, ruleworld), a local directory or a hub id."""
    data: str | list[str]
    """Training data, PATH_OR_HUB_ID[:SPLIT][#N] each (#N keeps the first N rows): JSON/JSONL
    files or `datasets` sources; several (or comma-separated) form a mixture."""
    out: str
    """Output directory: checkpoints, metrics.jsonl, summary.json and the adapter in OUT/adapter."""
    method: str = field(default="calyrex", metadata={"choices": METHODS})
    """Adapter to train: CAL blocks, or a baseline matched to their parameter count."""
    objective: str = field(default="sft", metadata={"choices": OBJECTIVES})
    """sft: chat conversations, next-token loss on the replies; dpo: preference pairs (TRL's
    conversational format), DPO against the model as it starts (--reference; training.dpo)."""
    eval_data: str | list[str] | None = None
    """Validation data, in --data's forms: its loss (DPO: also the reward margin and accuracy)
    is logged to OUT/metrics.jsonl at the start, every --eval-steps and at the end, and
    OUT/adapter is the adapter of the lowest validation loss (OUT/best.json says which step)."""
    eval_steps: int = 50
    """Evaluate on --eval-data every this many steps."""
    eval_on_start: bool = True
    """Also evaluate before the first step (where the validation curve starts)."""
    patience: int | None = None
    """Stop after this many evaluations without a lower validation loss (needs --eval-data)."""
    beta: float = 0.1
    """DPO's beta: how far the policy may move from the reference (--objective dpo)."""
    loss_type: list[str] = field(
        default_factory=lambda: ["sigmoid"], metadata={"choices": DPO_LOSSES}
    )
    """DPO's loss, TRL's loss_type (--objective dpo): sigmoid (the DPO paper), sigmoid_norm, ipo,
    hinge, apo_zero, apo_down; several are summed with --loss-weights, and sft adds the
    preferred replies' next-token loss (RPO: --loss-type sigmoid sft). The validation loss that
    picks the kept adapter is the same sum."""
    loss_weights: list[float] | None = None
    """One weight per --loss-type (default: 1 each)."""
    init_adapter: str | None = None
    """Start from this saved adapter (SFT → DPO); it must be of the same --method."""
    reference: str = field(default="start", metadata={"choices": REFERENCES})
    """DPO's reference model: start = the model as training starts (with --init-adapter the SFT
    model, as in the DPO paper; else the base); base = the base with the adapters off, always."""
    placement: str = field(default="late8th", metadata={"choices": PRESETS})
    """Placement preset: after which decoder layers the blocks go (unless --layers is given)."""
    layers: list[int] | None = None
    """Explicit decoder-layer indices (0-based) after which the blocks go; overrides --placement."""
    block: dict[str, Any] | None = None
    """More CalyrexConfig fields for the calyrex blocks, as a JSON object (e.g.
    {"init_from_host": true}); the baselines are matched to the blocks they describe."""
    max_steps: int = -1
    """Optimizer steps to train; -1: as many as --epochs take."""
    epochs: float = 1.0
    """Passes over the data (fractions allowed); used when --max-steps is -1."""
    lr: float = 1e-4
    """Peak learning rate of the adapter parameters (AdamW), reached after the warm-up."""
    batch_size: int = 8
    """Conversations (or preference pairs) per device per step."""
    grad_accum: int = 1
    """Batches accumulated into one optimizer step."""
    max_length: int = 1024
    """Most tokens of one encoded conversation (or pair); longer ones are cut, see --on-truncate."""
    precision: str = field(default="auto", metadata={"choices": PRECISIONS})
    """auto: bf16 where this machine is fast at it, else fp32 (calyrex.backbones.precision); fp16 needs
    CUDA. On CPU, bf16/fp16 are autocast over fp32 weights."""
    seed: int = 0
    """Seed of the adapter's initialisation, the data order and the system-prompt draws."""
    save_steps: int = 500
    """Save a checkpoint (OUT/checkpoint-STEP) every this many steps."""
    save_total_limit: int = 2
    """Keep at most this many checkpoints; older ones are deleted."""
    logging_steps: int = 10
    """Append the loss and learning rate to OUT/metrics.jsonl every this many steps."""
    warmup_ratio: float = 0.03
    """Learning-rate warm-up: this fraction of the steps (a value >= 1: this many steps)."""
    weight_decay: float = 0.0
    """AdamW's weight decay."""
    scheduler: str = "cosine"
    """Learning-rate schedule after the warm-up: a transformers lr_scheduler_type (cosine,
    linear, constant, ...)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, slower steps."""
    group_by_length: bool = False
    """Batches of similar lengths (transformers' LengthGroupedSampler): less padding, faster
    steps."""
    fsdp: bool = False
    """FSDP2 (fully_shard per decoder layer) under torchrun / accelerate; needs a GPU."""
    resume: bool = False
    """Continue from the last checkpoint in OUT, if there is one."""
    tensorboard: bool = False
    """Also log to TensorBoard."""
    system_pool: list[str] | None = field(default=None, metadata={"nargs": "*"})
    """System prompts drawn (seeded) for conversations without one; unset: the built-in pool;
    the flag with no prompts (YAML: []): none added."""
    on_truncate: str = field(default="drop", metadata={"choices": ON_TRUNCATE})
    """A conversation whose system prompt --max-length would cut: drop it (counted in the
    summary) or stop with an error."""
    skip_invalid: bool = False
    """Skip (and count) rows that are not valid conversations instead of failing on the first."""
    revision: str | None = None
    """Hub revision (branch, tag or commit) of --model."""
    trust_remote_code: bool = False
    """Run the model's own code from the hub (transformers' trust_remote_code)."""
    progress: bool = True
    """A progress bar with the running loss."""

    def validate(self) -> None:
        """Fail before any compute on options that cannot work."""
        check_method(self.method)
        if self.layers is None and self.placement not in PRESETS:
            raise ValueError(
                f"unknown placement preset {self.placement!r}; choose one of {sorted(PRESETS)}"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {self.precision!r}")
        if self.on_truncate not in ON_TRUNCATE:
            raise ValueError(f"on_truncate must be 'drop' or 'error', not {self.on_truncate!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, not {self.objective!r}")
        if self.reference not in REFERENCES:
            raise ValueError(f"reference must be one of {REFERENCES}, not {self.reference!r}")
        if self.beta <= 0:
            raise ValueError(f"beta must be positive, not {self.beta}")
        self._check_losses()
        if self.objective == "dpo" and self.fsdp:
            raise ValueError("objective 'dpo' does not support --fsdp yet; train with DDP")
        if self.patience is not None and (self.patience < 1 or not self.eval_data):
            raise ValueError("--patience needs --eval-data and a value of 1 or more")
        if self.eval_steps < 1:
            raise ValueError(f"eval_steps must be 1 or more, not {self.eval_steps}")
        if self.max_steps <= 0 and self.epochs <= 0:
            raise ValueError("give --max-steps or a positive --epochs")

    def __post_init__(self) -> None:
        if isinstance(self.loss_type, str):  # YAML's `loss_type: ipo`, as TRL takes it
            self.loss_type = [self.loss_type]

    def _check_losses(self) -> None:
        if self.loss_type != ["sigmoid"] or self.loss_weights is not None:
            if self.objective != "dpo":
                raise ValueError("--loss-type and --loss-weights are DPO's: add --objective dpo")
        unknown = [t for t in self.loss_type if t not in DPO_LOSSES]
        if unknown or not self.loss_type or len(set(self.loss_type)) < len(self.loss_type):
            raise ValueError(
                f"loss_type {self.loss_type}: give one or more distinct DPO losses of {DPO_LOSSES}"
            )
        if self.loss_weights is not None and len(self.loss_weights) != len(self.loss_type):
            raise ValueError(
                f"{len(self.loss_weights)} loss weights for {len(self.loss_type)} loss types "
                f"{self.loss_type}: give one weight per loss type"
            )

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
