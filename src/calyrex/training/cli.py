"""``calyrex train``: options mirror :class:`TrainConfig`; ``--config FILE.yaml`` sets defaults."""

from __future__ import annotations

from .config import TrainConfig


def train_command(
    config: str | None = None,
    model: str | None = None,
    method: str | None = None,
    objective: str | None = None,
    beta: float | None = None,
    init_adapter: str | None = None,
    placement: str | None = None,
    layers: list[int] | None = None,
    data: str | None = None,
    out: str | None = None,
    max_steps: int | None = None,
    epochs: float | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    grad_accum: int | None = None,
    max_length: int | None = None,
    precision: str | None = None,
    seed: int | None = None,
    save_steps: int | None = None,
    logging_steps: int | None = None,
    resume: bool | None = None,
    gradient_checkpointing: bool | None = None,
    group_by_length: bool | None = None,
    fsdp: bool | None = None,
    tensorboard: bool | None = None,
    on_truncate: str | None = None,
    skip_invalid: bool | None = None,
    trust_remote_code: bool | None = None,
    progress: bool | None = None,
) -> None:
    """Train calyrex | lora | parallel_mlp on chat data (--objective sft) or preference pairs
    (--objective dpo); adapter in OUT/adapter, log in OUT/metrics.jsonl."""
    options = {k: v for k, v in locals().items() if k != "config" and v is not None}
    from .run import train

    if config:
        cfg = TrainConfig.from_yaml(config, **options)
    else:
        missing = [k for k in ("model", "data", "out") if k not in options]
        if missing:
            raise ValueError(f"missing --{', --'.join(missing)} (or give --config FILE.yaml)")
        cfg = TrainConfig(**options)
    train(cfg)
