"""``calyrex train``: one flag per :class:`TrainConfig` field; ``--config FILE.yaml`` sets defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..cli.fields import options_from
from .config import TrainConfig


@options_from(TrainConfig, required=False)  # --config FILE.yaml may give model, data, out
def train_command(config: str | None = None, **options: Any) -> None:
    """Train calyrex | lora | parallel_mlp on chat data (--objective sft) or preference pairs
    (--objective dpo); adapter in OUT/adapter, log in OUT/metrics.jsonl.

    Without --config, --model, --data and --out are required.

    Args:
        config: A YAML file of options (keys as the flags, max_steps or max-steps): it replaces
            the defaults shown; the flags given win over it.
        options: :class:`TrainConfig` fields, one flag each.
    """
    from .run import train
    from .trainer import leave_process_group

    if config:
        cfg = TrainConfig.from_yaml(config, **options)
    else:
        required = [
            f.name
            for f in dataclasses.fields(TrainConfig)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        missing = [name.replace("_", "-") for name in required if options.get(name) is None]
        if missing:
            raise ValueError(f"missing --{', --'.join(missing)} (or give --config FILE.yaml)")
        cfg = TrainConfig(**{k: v for k, v in options.items() if v is not None})
    train(cfg)
    leave_process_group()  # the command's process: under torchrun, the group is its own
