"""Parameter names: the one filter that defines adapter parameters, and host names.

Every adapter parameter name has a ``cal_``-prefixed part (litgpt's ``adapter_filter``, PEFT's
prefix): freezing, saving, counting and optimiser groups all use :func:`is_adapter_param`.
A wrapped decoder layer keeps its host under ``host``; :func:`host_name` gives the name the
parameter has in the bare HF model.
"""

from __future__ import annotations

ADAPTER_PREFIX = "cal_"
# an adapter file's tensor names: ``cal_blocks.<layer>.<block parameter>`` (calyrex.core.adapter_io)
BLOCKS_PREFIX = "cal_blocks."
HOST = "host"  # attribute of calyrex.core.layer.CalyrexLayer holding the original decoder layer


def is_adapter_param(name: str) -> bool:
    """The one name filter that defines adapter parameters: freezing, saving, counting, optimiser."""
    return any(part.startswith(ADAPTER_PREFIX) for part in name.split("."))


def host_name(name: str) -> str:
    """``model.layers.3.host.mlp.up_proj.weight`` → ``model.layers.3.mlp.up_proj.weight``."""
    return ".".join(part for part in name.split(".") if part != HOST)
