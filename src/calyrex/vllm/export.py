"""``calyrex export-vllm``: a model directory vLLM starts from (no vLLM import here).

The directory holds the base model's weights (hard links where the filesystem allows, else
copies), its tokenizer, ``calyrex_adapter.safetensors`` (the adapter tensors, checked against
the base model as ``load_adapter`` does) and a ``config.json`` whose architecture is the
calyrex variant and whose ``calyrex`` entry carries the block configuration and the token-level
span markers of the tokenizer's chat template. It is built in a temporary directory and renamed
into place, so an interrupted export leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from ..backbones.resolve import resolve_model
from ..cli.fields import options_from
from ..core.adapter_io import AdapterError, check_base, read_config, read_weights, resolve_dir
from ..core.config import CalyrexConfig
from ..core.version import __version__
from ..span.markers import span_markers_reason
from . import ARCHITECTURES

ADAPTER_FILE = "calyrex_adapter.safetensors"
INDEX = "model.safetensors.index.json"


def _local(model: str) -> Path:
    path = resolve_model(model)
    if Path(path).is_dir():
        return Path(path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(path, allow_patterns=["*.json", "*.safetensors", "*.model"]))


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _architecture(config: dict[str, Any]) -> str:
    archs = config.get("architectures") or []
    if len(archs) != 1 or archs[0] not in ARCHITECTURES:
        raise ValueError(
            f"calyrex.vllm serves {sorted(ARCHITECTURES)}; this model is {archs or 'unknown'}"
        )
    return ARCHITECTURES[archs[0]]


def export_vllm(model: str, adapter: str, out: str) -> Path:
    """Write a vLLM model directory for ``model`` (``ruleworld``, a directory or a hub id) with
    the CALYREX ``adapter`` (a directory or a hub id) to ``out`` (must not exist yet)."""
    from ..adapters.loading import load_model

    target = Path(out)
    if target.exists():
        raise ValueError(f"{target} already exists; choose a new --out directory")
    source = _local(model)
    adapter_dir = resolve_dir(adapter)
    record = read_config(adapter_dir)
    if record["method"] != "calyrex":
        raise AdapterError(
            f"{adapter_dir} is a {record['method']!r} adapter; calyrex.vllm serves CALYREX "
            "adapters only"
        )
    variant = CalyrexConfig.from_dict(record["config"]).variant()
    if variant:
        raise AdapterError(
            f"{adapter_dir} is a CALYREX variant ({', '.join(variant)}); calyrex.vllm serves the "
            "paper's block (attention + FFN, host attention untouched) only"
        )
    config = json.loads((source / "config.json").read_text())
    arch = _architecture(config)
    base, tok = load_model(str(source), dtype="float32", device="cpu")
    markers, reason = span_markers_reason(tok)
    if markers is None:
        raise ValueError(
            f"vLLM gets the system span from token ids, and this tokenizer's chat template has no "
            f"token-level span rule: {reason}"
        )
    check_base(record, base, adapter_dir)
    del base
    tensors = read_weights(adapter_dir, record)
    weights = sorted(source.glob("*.safetensors"))
    if not weights:
        raise ValueError(f"{source} has no *.safetensors weights (vLLM loads safetensors only)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        for file in weights:
            _link_or_copy(file, tmp / file.name)
        save_file(
            {k: v.contiguous() for k, v in tensors.items()},
            str(tmp / ADAPTER_FILE),
            metadata={"format": "pt"},
        )
        if (source / INDEX).exists():  # vLLM reads only the files the index names
            index = json.loads((source / INDEX).read_text())
            index["weight_map"].update({k: ADAPTER_FILE for k in tensors})
            (tmp / INDEX).write_text(json.dumps(index, indent=2))
        if (source / "generation_config.json").exists():
            shutil.copy2(source / "generation_config.json", tmp / "generation_config.json")
        tok.save_pretrained(tmp)
        config["architectures"] = [arch]
        config["calyrex"] = {
            "calyrex_version": __version__,
            "config": record["config"],
            "span_markers": markers.to_dict(),
            "adapter": {"source": str(adapter), "weights_sha256": record.get("weights_sha256")},
            "base_model": str(model),
        }
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return target


@dataclass
class ExportOptions:
    """``calyrex export-vllm``'s options."""

    model: str
    """The base model: a hub id, a model directory or a registered name."""
    adapter: str
    """The trained CALYREX adapter directory to serve with it."""
    out: str
    """The directory vLLM is pointed at (--model OUT)."""


@options_from(ExportOptions)
def export_vllm_command(**options: Any) -> None:
    """Write a directory vLLM serves: base weights, tokenizer, CALYREX adapter, calyrex config.

    Then: python -m vllm.entrypoints.openai.api_server --model OUT --tokenizer-mode calyrex
    """
    opts = ExportOptions(**options)
    path = export_vllm(opts.model, opts.adapter, opts.out)
    print(f"wrote {path}; serve it with:")
    print(f"  python -m vllm.entrypoints.openai.api_server --model {path} --tokenizer-mode calyrex")
