"""Adapter I/O: files (``adapter_config.json`` + ``adapter_model.safetensors``, adapter weights
only) and the tensors a model's adapter state is made of.

This module reads, verifies and writes files in calyrex's format (CALYREX, ParallelMLP) and
reads PEFT's (the LoRA baseline); it maps a calyrex model's blocks to and from file tensors
(``cal_blocks.<layer>.<parameter>``) and refuses a state whose keys do not match. Building a
model from files is ``calyrex.adapters.loading``.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from . import hf
from .names import BLOCKS_PREFIX

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


def write_tensors(directory: Path, state: Mapping[str, Any]) -> None:
    """``directory/adapter_model.safetensors``, atomically (safetensors: never a pickle)."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in state.items()}
    atomic_write(
        directory / WEIGHTS_NAME, lambda p: save_file(tensors, p, metadata={"format": "pt"})
    )


def write_adapter(
    directory: str | os.PathLike, state: dict[str, Any], record: dict[str, Any]
) -> Path:
    """Write adapter tensors and their ``record`` (method, config, base identity) to ``directory``."""
    out = Path(directory)
    write_tensors(out, state)
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
        raise AdapterError(f"{file} is missing (only safetensors weights are read)")
    if config.get("weights_sha256") and file_sha256(file) != config["weights_sha256"]:
        raise AdapterError(
            f"{file} is corrupted or truncated: its sha256 differs from the one recorded at save"
        )
    try:
        return load_file(file)
    except (SafetensorError, OSError, ValueError) as err:
        raise AdapterError(f"{file} is corrupted or truncated: {err}") from err


def read_adapter(directory: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(config, tensors) of the adapter in ``directory``, either format: calyrex's (format and
    sha256 checked) or PEFT's (the LoRA baseline: ``{"method": "lora", "config": PEFT's
    config}``, tensors under PEFT's file keys)."""
    if is_peft_adapter(directory):
        config = json.loads((directory / CONFIG_NAME).read_text())
        return {"method": "lora", "config": config}, read_weights(directory, {})
    config = read_config(directory)
    return config, read_weights(directory, config)


def check_state(mine: Mapping[str, torch.Tensor], given: Mapping[str, Any], what: str) -> None:
    """Refuse an adapter state ``given`` whose tensor names or shapes are not exactly the
    model's (``mine``), naming both sides: a mismatched dict is never loaded in part."""
    if set(given) != set(mine):
        raise AdapterError(
            f"{what} does not match this model's adapter: missing "
            f"{sorted(set(mine) - set(given))[:4]}, unexpected {sorted(set(given) - set(mine))[:4]}"
        )
    wrong = [k for k, t in mine.items() if tuple(given[k].shape) != tuple(t.shape)]
    if wrong:
        k = wrong[0]
        raise AdapterError(
            f"{what} has tensors of the wrong shape: {k} is {tuple(given[k].shape)}, this "
            f"model's is {tuple(mine[k].shape)} ({len(wrong)} in all)"
        )


# -- a calyrex model's blocks ↔ file tensors ----------------------------------------------------
# Under FSDP2 the block parameters are sharded DTensors: reading gathers each one whole (a
# collective: every rank calls it, one writes), loading shards each file tensor as the parameter
# it replaces is sharded.
def whole(tensor: torch.Tensor) -> torch.Tensor:
    """A whole tensor: a sharded DTensor (FSDP2) gathered, anything else as it is."""
    full = getattr(tensor, "full_tensor", None)
    return full() if full is not None else tensor


def sharded_like(current: torch.Tensor | None, value: torch.Tensor) -> torch.Tensor:
    """``value`` sharded as ``current`` is when that is a DTensor (FSDP2); every rank calls this."""
    mesh = getattr(current, "device_mesh", None)
    if mesh is None:
        return value
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(value.to(current.dtype), mesh, current.placements)


def block_tensors(blocks: Mapping[str, nn.Module]) -> dict[str, torch.Tensor]:
    """Every block's state under ``cal_blocks.<layer>.<name>``, each tensor whole."""
    return {
        f"{BLOCKS_PREFIX}{i}.{name}": whole(tensor)
        for i, block in blocks.items()
        for name, tensor in block.state_dict().items()
    }


def load_block_tensors(blocks: Mapping[str, nn.Module], state: Mapping[str, torch.Tensor]) -> None:
    """Inverse of :func:`block_tensors`: the keys must be exactly its keys (:class:`AdapterError`
    otherwise, and for a tensor of the wrong shape)."""
    mine = {
        f"{BLOCKS_PREFIX}{i}.{n}": t for i, b in blocks.items() for n, t in b.state_dict().items()
    }
    check_state(mine, state, "the adapter state")  # before any tensor is copied
    for i, block in blocks.items():
        prefix = f"{BLOCKS_PREFIX}{i}."
        block.load_state_dict(
            {
                k[len(prefix) :]: sharded_like(mine[k], v)
                for k, v in state.items()
                if k.startswith(prefix)
            }
        )
