"""``calyrex analyze``: load a model (and adapter), run the analysis, write JSON and a figure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..backbones.precision import Dtype
from ..backbones.resolve import resolve_model
from ..cli.fields import options_from, split_options
from .data import load_examples
from .recommend import summary
from .run import AnalysisConfig, analyze_model


def precision(dtype: str, device: str) -> str:
    """The analysis' ``auto``: bf16 on a GPU, fp32 on the CPU (whatever its bf16 speed)."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if device.startswith("cuda") else "float32"


def default_data(model: str) -> str:
    """RuleWorld's own rule conversations for its backbone (recognised by ``ruleworld.json``)."""
    record = Path(model) / "ruleworld.json"
    if record.is_file():
        return f"ruleworld:{json.loads(record.read_text()).get('seed', 0)}"
    return "builtin"


def write_report(result: dict[str, Any], out: str | Path, title: str = "") -> tuple[Path, Path]:
    """``out/analysis.json`` and ``out/analysis.png``."""
    from .plot import plot_analysis

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "analysis.json"
    json_path.write_text(json.dumps(result, indent=2))
    return json_path, plot_analysis(result, out / "analysis.png", title)


@dataclass
class AnalyzeOptions:
    """``calyrex analyze``'s options besides the analysis' own (:class:`AnalysisConfig`)."""

    model: str
    """A hub id, a model directory or a registered name (smollm2, ruleworld)."""
    out: str
    """The directory for analysis.json and analysis.png."""
    adapter: str | None = None
    """A trained adapter directory to analyse with the model (any method)."""
    data: str | None = None
    """builtin, ruleworld[:SEED], a JSONL file or a datasets source of rule conversations
    (default: RuleWorld's for its backbone, else builtin)."""
    device: str = "auto"
    """auto (CUDA when present), cpu or cuda[:N]."""
    dtype: Dtype = "auto"
    """auto (bf16 on a GPU, fp32 on the CPU) or a torch dtype name."""


@options_from(AnalyzeOptions, AnalysisConfig)
def analyze(model: str, out: str, **options: Any) -> dict[str, Any]:
    """Locate where a model keeps its system-prompt rules, layer by layer, and recommend a placement.

    MODEL is a hub id, a directory, or "ruleworld" (the packaged RuleWorld backbone); ADAPTER a
    trained calyrex (or PEFT) adapter; DATA "builtin", "ruleworld[:SEED]", a JSONL file or a
    datasets source of rule conversations (rule_id, system, neutral_system, user, response) —
    by default RuleWorld's for its backbone, else the built-in set. Writes OUT/analysis.json
    and OUT/analysis.png.

    Args:
        model: :attr:`AnalyzeOptions.model`.
        out: :attr:`AnalyzeOptions.out`.
        options: the other :class:`AnalyzeOptions` and :class:`AnalysisConfig` fields.
    """
    from ..adapters.loading import load_model

    mine, analysis = split_options(options, AnalyzeOptions, AnalysisConfig)
    opts, cfg = AnalyzeOptions(model, out, **mine), AnalysisConfig(**analysis)
    model = resolve_model(opts.model)
    data = opts.data or default_data(model)
    examples = load_examples(data)
    device = opts.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    lm, tok = load_model(
        model, opts.adapter, precision(opts.dtype, device), device, attn_implementation="eager"
    )
    result = {
        "model": model,
        "adapter": opts.adapter,
        "data": data or "builtin",
        **analyze_model(lm, tok, examples, cfg),
    }
    json_path, png_path = write_report(result, out, title=Path(model).name)
    print(summary(result))
    print(f"wrote {json_path} and {png_path}")
    return result
