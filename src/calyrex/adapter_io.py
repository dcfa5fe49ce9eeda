"""Adapter files: ``adapter_config.json`` + ``adapter_model.safetensors`` (adapter weights only).

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
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from . import __version__, hf

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


def save_adapter(model: nn.Module, directory: str | os.PathLike) -> Path:
    """Write the adapter of a :class:`~calyrex.model.CalyrexModel` to ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.adapter_state_dict().items()}
    atomic_write(out / WEIGHTS_NAME, lambda p: save_file(state, p, metadata={"format": "pt"}))
    config = {
        "format": FORMAT,
        "calyrex_version": __version__,
        "method": model.method,
        "config": model.adapter_config.to_dict(),
        "base_model": hf.base_identity(model.base),
        "span_markers": model.markers.to_dict() if model.markers else None,
        "weights_sha256": file_sha256(out / WEIGHTS_NAME),
    }
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
            "different weights (weight signature mismatch)"
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


def load_adapter(
    model: nn.Module,
    path_or_id: str | os.PathLike,
    revision: str | None = None,
    tokenizer: Any = None,
) -> nn.Module:
    """Wrap ``model`` with the adapter saved at ``path_or_id`` (a directory or a hub id).

    CALYREX and ParallelMLP adapters are checked and loaded here; a PEFT (LoRA) adapter is
    handed to PEFT's own loader.
    """
    from .markers import SpanMarkers, span_markers
    from .methods import build

    directory = resolve_dir(path_or_id, revision)
    if is_peft_adapter(directory):
        from peft import PeftModel

        return PeftModel.from_pretrained(model, str(directory))
    config = read_config(directory)
    check_base(config, model, directory)
    state = read_weights(directory, config)
    wrapped = build(config["method"], model, config["config"])
    expected = set(wrapped.adapter_state_dict())
    if set(state) != expected:
        wrapped.remove()
        raise AdapterError(
            f"{directory / WEIGHTS_NAME} does not match its config: missing {sorted(expected - set(state))[:4]}, "
            f"unexpected {sorted(set(state) - expected)[:4]}"
        )
    try:
        wrapped.load_state_dict(state, strict=False)
    except RuntimeError as err:
        wrapped.remove()
        raise AdapterError(
            f"{directory / WEIGHTS_NAME} has tensors of the wrong shape: {err}"
        ) from err
    if tokenizer is not None:
        wrapped.markers = span_markers(tokenizer)
    elif config.get("span_markers"):
        wrapped.markers = SpanMarkers.from_dict(config["span_markers"])
    return wrapped
