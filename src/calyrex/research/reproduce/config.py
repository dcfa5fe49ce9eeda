"""One backbone's reproduction as typed dataclasses; the per-backbone YAML mirrors them.

The training options of each method are not repeated here: ``train`` points to the
``calyrex train --config`` YAML of each method (paths relative to this YAML), so the six
per-method files in ``configs/paper/`` stay the single place that says how a method trains.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.placement import PRESETS

METHODS: tuple[str, ...] = ("lora", "parallel_mlp", "calyrex")  # the paper's row order after base


@dataclass
class EvalSpec:
    """What ``calyrex eval`` gets for every model (base and the three adapters)."""

    suites: str = "paper"
    data: dict[str, str] = field(default_factory=dict)  # suite → file, directory or hf:ID
    judge: str | None = None  # http(s)://HOST/v1 (with judge_model) or hf:MODEL
    judge_model: str | None = None
    system_prompt: str | None = None
    max_new_tokens: int = 1024
    batch_size: int = 8
    limit: int | None = None
    dtype: str = "auto"
    not_run: dict[str, str] = field(default_factory=dict)  # suite → why it is left out


@dataclass
class AnalyzeSpec:
    data: str | None = None  # "builtin", "ruleworld[:SEED]", a JSONL file (None: the default)
    max_examples: int | None = None


@dataclass
class AblateSpec:
    """``calyrex ablate --model`` on the backbone: one CALYREX adapter per preset."""

    presets: list[str] = field(default_factory=lambda: list(PRESETS))
    suites: str = "ifeval"
    data: dict[str, str] = field(default_factory=dict)  # default: the eval data of these suites
    steps: int | None = None  # None: the calyrex training YAML's own steps / epochs
    limit: int | None = None
    max_new_tokens: int = 512
    batch_size: int = 8


@dataclass
class ReportSpec:
    long_ifeval_lengths: list[str] = field(default_factory=lambda: ["8k", "16k"])
    # CALYREX − baseline as the paper reports it, in points: {baseline: {column: value}}
    paper: dict[str, dict[str, float]] = field(default_factory=dict)
    bootstrap: int = 1000  # resamples for the intervals
    seed: int = 0


@dataclass
class EstimateSpec:
    """The dry-run's cost model. Every number here is an assumption, printed as such."""

    gpu: str = "H100 SXM"
    peak_tflops: float = 989.0  # dense bf16 of the GPU named above
    train_mfu: float = 0.35  # share of peak a Trainer step reaches (assumed)
    eval_mfu: float = 0.05  # share of peak batched HF generate() reaches (assumed, decode-bound)
    tokens_per_conversation: int = 1000  # mean tokens of one SFT conversation (assumed)
    system_tokens: int = 200  # mean system-prompt span (assumed)
    bench: str | None = None  # a `calyrex bench --json` file: its measured rates replace the above


@dataclass
class ReproduceConfig:
    name: str
    train: dict[str, str]  # method → its `calyrex train --config` YAML (absolute after loading)
    eval: EvalSpec = field(default_factory=EvalSpec)
    analyze: AnalyzeSpec = field(default_factory=AnalyzeSpec)
    ablate: AblateSpec = field(default_factory=AblateSpec)
    report: ReportSpec = field(default_factory=ReportSpec)
    estimate: EstimateSpec = field(default_factory=EstimateSpec)
    launch: str = "ddp"  # accelerate config (configs/accelerate/NAME.yaml) when >1 GPU is visible
    geometry: dict[str, int] = field(default_factory=dict)  # the model's config.json shape, offline
    source: str | None = None  # the YAML it came from

    def train_config(self, method: str, out: str | Path, **overrides: Any) -> Any:
        """The method's :class:`TrainConfig`, writing to ``out`` and resuming what is there."""
        from ...training import TrainConfig

        if method not in self.train:
            raise ValueError(f"{self.source}: no training YAML for method {method!r}")
        return TrainConfig.from_yaml(self.train[method], out=str(out), resume=True, **overrides)

    @property
    def model(self) -> str:
        """The backbone every method trains on (the training YAMLs must agree)."""
        models = {self.train_config(m, "-").model for m in self.train}
        if len(models) != 1:
            raise ValueError(f"{self.source}: the training YAMLs name different models {models}")
        return models.pop()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


SECTIONS = {
    "eval": EvalSpec,
    "analyze": AnalyzeSpec,
    "ablate": AblateSpec,
    "report": ReportSpec,
    "estimate": EstimateSpec,
}


def _section(cls: type, data: dict[str, Any], where: str) -> Any:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{where}: unknown options {sorted(unknown)}")
    return cls(**data)


def load_config(path: str | Path) -> ReproduceConfig:
    """A per-backbone YAML (``configs/paper/qwen2.5-1.5b.yaml``); unknown keys are errors."""
    import yaml

    path = Path(path)
    data = yaml.safe_load(path.read_text()) or {}
    sections = {
        k: _section(cls, data.pop(k, None) or {}, f"{path}:{k}") for k, cls in SECTIONS.items()
    }
    train = {
        m: str((path.parent / p).resolve()) for m, p in (data.pop("train", None) or {}).items()
    }
    missing = [m for m in METHODS if m not in train]
    if missing:
        raise ValueError(f"{path}: train: needs a YAML for every method; missing {missing}")
    for file in train.values():
        if not Path(file).is_file():
            raise FileNotFoundError(f"{path}: training YAML {file} does not exist")
    return _section(
        ReproduceConfig, {"train": train, **sections, **data, "source": str(path)}, str(path)
    )
