"""A calyrex model's adapter tensors under their file names: ``cal_blocks.<layer>.<parameter>``.

What :meth:`~calyrex.core.model.CalyrexModel.adapter_state_dict` gives and
``load_adapter_state_dict`` takes back, over the model's ``cal_blocks`` (layer index → block);
the files themselves are ``calyrex.core.adapter_io``'s. Under FSDP2 the block parameters are
sharded DTensors: reading gathers each one whole (a collective: every rank calls it, one
writes), loading shards each file tensor as the parameter it replaces is sharded.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn


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


def adapter_tensors(blocks: Mapping[str, nn.Module]) -> dict[str, torch.Tensor]:
    """Every block's state under ``cal_blocks.<layer>.<name>``, each tensor whole."""
    return {
        f"cal_blocks.{i}.{name}": whole(tensor)
        for i, block in blocks.items()
        for name, tensor in block.state_dict().items()
    }


def load_adapter_tensors(blocks: Mapping[str, nn.Module], state: dict[str, torch.Tensor]) -> None:
    """Inverse of :func:`adapter_tensors` (keys checked by the caller)."""
    for i, block in blocks.items():
        prefix = f"cal_blocks.{i}."
        mine = block.state_dict()
        block.load_state_dict(
            {
                k[len(prefix) :]: sharded_like(mine.get(k[len(prefix) :]), v)
                for k, v in state.items()
                if k.startswith(prefix)
            }
        )
