"""Adapter files: ``adapter_config.json`` + ``adapter_model.safetensors`` (adapter weights only).

This module reads, verifies and writes files; building a model from them is ``calyrex.adapters.loading``.
Written atomically (temporary file, fsync, rename; weights before the config that vouches for
them). Loaded with safetensors only — nothing is ever unpickled — and checked against the base
model: architecture fingerprint, weight signature, the weights file's sha256 and its exact keys.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from . import hf

CONFIG_NAME = "adapter_config.json"
WEIGHTS_NAME = "adapter_model.safetensors"
FORMAT = "calyrex-adapter/1"


class AdapterError(ValueError):
    """An adapter that cannot be loaded; the message says which check failed."""


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def atomic_write(path: Path, write: Any) -> None:
    """``write(tmp_path)`` then fsync and rename over ``path``: readers never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_adapter(
    directory: str | os.PathLike, state: dict[str, Any], record: dict[str, Any]
) -> Path:
    """Write adapter tensors and their ``record`` (method, config, base identity) to ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in state.items()}
    atomic_write(out / WEIGHTS_NAME, lambda p: save_file(tensors, p, metadata={"format": "pt"}))
    config = {"format": FORMAT, **record, "weights_sha256": file_sha256(out / WEIGHTS_NAME)}
    text = json.dumps(config, indent=2, sort_keys=True)
    atomic_write(out / CONFIG_NAME, lambda p: Path(p).write_text(text))
    return out


def resolve_dir(path_or_id: str | os.PathLike, revision: str | None = None) -> Path:
    """A local adapter directory, or a hub repo downloaded (config and weights only)."""
    path = Path(path_or_id)
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(
                str(path_or_id), revision=revision, allow_patterns=[CONFIG_NAME, WEIGHTS_NAME]
            )
        )
    except Exception as err:  # network, auth, bad id: report what was tried
        raise AdapterError(
            f"no adapter at {str(path_or_id)!r}: not a local directory, and the hub download failed ({err})"
        ) from err


def is_peft_adapter(directory: Path) -> bool:
    """A PEFT adapter (the LoRA baseline) rather than a calyrex-format one."""
    try:
        return "peft_type" in json.loads((directory / CONFIG_NAME).read_text())
    except (OSError, ValueError):
        return False


def read_config(directory: Path) -> dict[str, Any]:
    file = directory / CONFIG_NAME
    if not file.is_file():
        raise AdapterError(f"{file} is missing: not a calyrex adapter directory")
    try:
        config = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise AdapterError(f"cannot read adapter config {file}: not valid JSON ({err})") from err
    missing = [k for k in ("format", "method", "config", "base_model") if k not in config]
    if missing or config.get("format") != FORMAT:
        raise AdapterError(
            f"cannot read adapter config {file}: format {config.get('format')!r}, missing fields {missing}"
        )
    return config


def check_base(config: dict[str, Any], model: nn.Module, directory: Path) -> None:
    """Refuse an adapter made for another base model, naming what differs."""
    expected = config["base_model"]
    actual = hf.fingerprint(model)
    diff = {
        k: (expected["fingerprint"].get(k), actual.get(k))
        for k in actual
        if expected["fingerprint"].get(k) != actual.get(k)
    }
    name = expected.get("name_or_path")
    if diff:
        detail = ", ".join(f"{k}: adapter {a!r} vs model {b!r}" for k, (a, b) in diff.items())
        raise AdapterError(
            f"adapter {directory} was made for another base model ({name!r}): {detail}"
        )
    want, have = expected.get("weight_signature") or [], hf.weight_signature(model)
    if len(want) != len(have) or any(
        not math.isclose(a, b, rel_tol=2e-2, abs_tol=1e-4) for a, b in zip(want, have, strict=False)
    ):
        raise AdapterError(
            f"adapter {directory} was made for another base model ({name!r}): same architecture but "
            "different weights (embedding / final norm signature mismatch)"
        )
    if "weight_samples" not in expected:
        warnings.warn(
            f"adapter {directory} records no per-layer weight samples (saved by calyrex "
            f"{config.get('calyrex_version', '< 0.2')}): only the embeddings and the final norm "
            "were checked against the base model, its decoder layers could not be",
            stacklevel=3,
        )
        return
    _check_samples(expected, model, directory, name)


# relative rounding of each storage dtype: a model loaded in another dtype than the one the
# adapter was saved with matches within the coarser of the two
_DTYPE_EPS = {"float32": 0.0, "float64": 0.0, "bfloat16": 2.0**-8, "float16": 2.0**-11}


def _check_samples(expected: dict[str, Any], model: nn.Module, directory: Path, name: Any) -> None:
    want, have = expected["weight_samples"], hf.weight_samples(model)
    missing = sorted(set(want) ^ set(have))
    if missing:
        raise AdapterError(
            f"adapter {directory} was made for another base model ({name!r}): its weights have "
            f"other tensors ({missing[:3]} …)"
        )
    eps = max(
        _DTYPE_EPS.get(expected.get("weights_dtype", "float32"), 2.0**-8),
        _DTYPE_EPS.get(hf.weights_dtype(model), 2.0**-8),
    )
    for tensor, values in want.items():
        if any(
            not math.isclose(a, b, rel_tol=eps, abs_tol=1e-7 if eps else 0.0)
            for a, b in zip(values, have[tensor], strict=True)
        ):
            raise AdapterError(
                f"adapter {directory} was made for another base model ({name!r}): same "
                f"architecture but different weights in {tensor}"
            )


def read_weights(directory: Path, config: dict[str, Any]) -> dict[str, Any]:
    file = directory / WEIGHTS_NAME
    if not file.is_file():
        raise AdapterError(f"{file} is missing")
    if config.get("weights_sha256") and file_sha256(file) != config["weights_sha256"]:
        raise AdapterError(
            f"{file} is corrupted or truncated: its sha256 differs from the one recorded at save"
        )
    try:
        return load_file(file)
    except (SafetensorError, OSError, ValueError) as err:
        raise AdapterError(f"{file} is corrupted or truncated: {err}") from err
