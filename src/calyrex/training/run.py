"""One training path for every method and objective: data → adapter → Trainer → ``OUT/adapter``.

``objective="sft"``: chat conversations and the ``transformers`` Trainer; ``"dpo"``: preference
pairs and TRL's DPOTrainer with a free reference model (:mod:`calyrex.training.dpo`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..adapters.baselines import matched_counts
from ..adapters.loading import load_model
from ..adapters.methods import adapt
from ..backbones.precision import Choice, agreed
from ..backbones.precision import resolve as resolve_precision
from ..core.adapter_io import read_adapter, whole
from ..core.config import CalyrexConfig
from ..core.model import count_trainable
from ..span.chat import pad_batch
from ..span.markers import span_markers_reason
from .config import TrainConfig
from .data import DEFAULT_SYSTEM_POOL, EncodeStats, encode_conversations, load_conversations

log = logging.getLogger("calyrex.train")


@dataclass
class TrainResult:
    adapter_dir: Path
    trainable_params: int
    matched_params: dict[str, int]
    data: dict[str, Any]
    final_loss: float | None
    seconds: float


class ChatCollator:
    """Pads encoded conversations (``input_ids``, ``system_mask``, ``labels``) into a batch."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        return dict(pad_batch(self.tokenizer, rows, with_labels=True))


def adapter_checksum(model: torch.nn.Module) -> str:
    """sha256 of the trainable adapter tensors, to compare ranks after DDP training."""
    digest = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        if p.requires_grad:  # every rank: a sharded FSDP2 parameter is gathered whole
            digest.update(name.encode())
            digest.update(whole(p).detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


def _gather(value: str) -> list[str]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        out: list[Any] = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(out, value)
        return out
    return [value]


# FSDP2: each decoder layer (a CalyrexLayer where a block sits: host and block in one unit)
# is a fully_shard unit; frozen and trainable parameters mix freely in FSDP2 units.
FSDP2 = {
    "fsdp": True,
    "fsdp_config": {
        "version": 2,
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "reshard_after_forward": True,
        "state_dict_type": "FULL_STATE_DICT",
    },
}


def _training_args(cfg: TrainConfig, precision: str, resuming: bool = False) -> Any:
    """``TrainingArguments`` (SFT) or TRL's ``DPOConfig`` over the same shared options."""
    from transformers import TrainingArguments

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1  # launched by torchrun / accelerate
    if precision == "fp16" and not torch.cuda.is_available():
        raise ValueError("precision fp16 needs a CUDA GPU; use fp32 (or bf16) on CPU")
    if cfg.fsdp and not torch.cuda.is_available():  # accelerate would silently fall back to DDP
        raise ValueError(
            "--fsdp needs a GPU: accelerate (and so the Trainer) runs FSDP only on accelerators "
            "and would silently run DDP on CPU; on CPU train without --fsdp (DDP)"
        )
    common = dict(
        output_dir=cfg.out,
        max_steps=cfg.max_steps,
        num_train_epochs=cfg.epochs,
        learning_rate=cfg.lr,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        lr_scheduler_type=cfg.scheduler,
        warmup_steps=cfg.warmup_ratio,
        weight_decay=cfg.weight_decay,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        seed=cfg.seed,
        data_seed=cfg.seed,
        train_sampling_strategy="group_by_length" if cfg.group_by_length else "random",
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        eval_strategy="steps" if cfg.eval_data else "no",
        eval_steps=cfg.eval_steps,
        eval_on_start=bool(cfg.eval_data) and cfg.eval_on_start and not resuming,
        per_device_eval_batch_size=cfg.batch_size,
        prediction_loss_only=True,
        logging_steps=cfg.logging_steps,
        report_to=["tensorboard"] if cfg.tensorboard else [],
        remove_unused_columns=False,
        label_names=["labels"],
        include_num_input_tokens_seen="non_padding",
        ddp_backend="gloo" if distributed and not torch.cuda.is_available() else None,
        ddp_find_unused_parameters=False,
        disable_tqdm=not cfg.progress,
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
        **(FSDP2 if cfg.fsdp else {}),
    )
    if cfg.objective == "dpo":
        from .dpo import preference_args

        return preference_args(common, cfg)
    return TrainingArguments(**common)


def _encode(
    cfg: TrainConfig, tok: Any, stats: EncodeStats, data: str | list[str] | None = None
) -> list[dict[str, Any]]:
    """Every row of ``data`` (default ``cfg.data``), read, checked and encoded before any
    compute: conversations or pairs."""
    pool = DEFAULT_SYSTEM_POOL if cfg.system_pool is None else cfg.system_pool
    data = cfg.data if data is None else data
    if cfg.objective == "dpo":
        from .dpo import encode_pairs, load_pairs

        pairs = load_pairs(data, pool, cfg.seed, cfg.skip_invalid, stats)
        return encode_pairs(tok, pairs, cfg.max_length, cfg.on_truncate, stats)
    conversations = load_conversations(data, pool, cfg.seed, cfg.skip_invalid, stats)
    return encode_conversations(tok, conversations, cfg.max_length, cfg.on_truncate, stats)


def _adapted(cfg: TrainConfig, base: Any, cal_cfg: CalyrexConfig, tok: Any) -> Any:
    """``base`` with a new adapter of ``cfg.method``, or the one saved at ``cfg.init_adapter``."""
    if cfg.init_adapter is None:
        return adapt(base, cfg.method, cal_cfg, seed=cfg.seed)
    from ..adapters.loading import load_adapter

    model = load_adapter(base, cfg.init_adapter, tokenizer=tok)  # trainable, as adapt's
    if model.method != cfg.method:
        raise ValueError(f"{cfg.init_adapter} is a {model.method} adapter, not {cfg.method}")
    return model


def _trainer(
    cfg: TrainConfig, model: Any, tok: Any, args: Any, rows: list[dict], val: list[dict] | None
) -> Any:
    from .trainer import AdapterTrainer

    if cfg.objective == "dpo":
        from .dpo import PreferenceTrainer, starting_weights

        # a fresh adapter starts as the base: adapters off is that reference, with no snapshot
        snapshot = cfg.reference == "start" and cfg.init_adapter is not None
        weights = starting_weights(model) if snapshot else None  # before a checkpoint loads
        return PreferenceTrainer(
            model, args, rows, tok, eval_dataset=val, reference_weights=weights
        )
    return AdapterTrainer(
        model=model,
        args=args,
        train_dataset=rows,
        eval_dataset=val,
        data_collator=ChatCollator(tok),
    )


def is_main_process() -> bool:
    """Rank 0, or the only process."""
    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


def _save_adapter(model: Any, where: Path) -> None:
    """``model``'s adapter in ``where`` (call on every rank: rank 0 writes)."""
    state = model.adapter_state_dict()  # every rank: a collective under FSDP2
    if is_main_process():
        model.save_adapter(where, state)


def _load_best(model: Any, out: Path) -> dict[str, Any] | None:
    """The best evaluated adapter (:class:`~.trainer.KeepBest`) loaded into ``model``."""
    from .trainer import read_best

    best = read_best(out)
    if best is None:
        return None
    model.load_adapter_state_dict(read_adapter(out / best["dir"])[1])
    return best


def train(cfg: TrainConfig) -> TrainResult:
    """Train ``cfg.method`` on ``cfg.data``; write checkpoints, metrics and ``OUT/adapter``."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from transformers.trainer_utils import get_last_checkpoint

    from .trainer import (
        Clock,
        KeepBest,
        LossBar,
        MetricsLog,
        barrier,
        forget_best,
        trim_metrics,
    )

    cfg.validate()
    start = time.perf_counter()
    out = Path(cfg.out)
    # bf16 / fp16 are autocast over fp32 weights on CPU (adapter master weights and optimizer
    # state stay fp32); on CUDA the frozen backbone is stored in bf16
    resume_from = get_last_checkpoint(str(out)) if cfg.resume and out.is_dir() else None
    choice = run_precision(cfg, out, resume_from)
    resuming = resume_from is not None
    # first: sets up the process group (torchrun)
    args = _training_args(cfg, choice.precision, resuming)
    if (shared := agreed(choice)) != choice:  # every rank trains in rank 0's precision
        choice, args = shared, _training_args(cfg, shared.precision, resuming)
    dtype = "bfloat16" if choice.precision == "bf16" and torch.cuda.is_available() else "float32"
    # on the CPU: the Trainer places it (one device per rank under torchrun)
    base, tok = load_model(
        cfg.model,
        dtype=dtype,
        device="cpu",
        revision=cfg.revision,
        trust_remote_code=cfg.trust_remote_code,
    )
    stats = EncodeStats()
    rows = _encode(cfg, tok, stats)
    val_stats = EncodeStats()
    val = _encode(cfg, tok, val_stats, cfg.eval_data) if cfg.eval_data else None

    cal_cfg = CalyrexConfig(placement=cfg.placement, layers=cfg.layers, **(cfg.block or {}))
    counts = matched_counts(base, cal_cfg)
    model = _adapted(cfg, base, cal_cfg, tok)
    if model.uses_span:  # the input_ids-only fallback travels with the adapter
        model.markers, model.markers_reason = span_markers_reason(tok)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    trainable = count_trainable(model)
    if is_main_process():  # what a killed run logged after its last checkpoint (all, without one)
        trim_metrics(
            out / "metrics.jsonl", int(resume_from.rsplit("-", 1)[1]) if resume_from else -1
        )
        if resume_from is None:  # a run from step 0: no best adapter of an earlier attempt
            forget_best(out)
    trainer = _trainer(cfg, model, tok, args, rows, val)
    for callback in list(trainer.callback_handler.callbacks):
        if type(callback) in (ProgressCallback, PrinterCallback):  # replaced by LossBar below
            trainer.remove_callback(callback)
    out.mkdir(parents=True, exist_ok=True)
    trainer.add_callback(MetricsLog(out / "metrics.jsonl"))  # before the bar: it adds tokens/s
    trainer.add_callback(clock := Clock(start))
    if cfg.progress:
        trainer.add_callback(LossBar())
    if val is not None:
        trainer.add_callback(KeepBest(out, _save_adapter, cfg.patience))
    if trainer.is_world_process_zero():
        _record_precision(out, choice)
        _print_summary(cfg, counts, trainable, stats, resume_from, choice)
    result = trainer.train(resume_from_checkpoint=resume_from)
    best = None
    if val is not None:  # the Trainer evaluates the last step too (DefaultFlowCallback)
        barrier()
        best = _load_best(model, out)  # OUT/adapter is the best evaluated one
    checksums = _gather(adapter_checksum(model))
    adapter_dir = out / "adapter"
    state = model.adapter_state_dict()  # all ranks: a collective under FSDP2
    if trainer.is_world_process_zero():
        _save_final(model, tok, adapter_dir, state)
        summary = {
            "config": cfg.to_dict(),
            "precision": {"chosen": choice.precision, "reason": choice.reason},
            "trainable_params": trainable,
            "matched_params": counts,
            "data": stats.summary(),
            "train_loss": result.training_loss,
            "steps": result.global_step,
            **clock.figures(2),  # every attempt's seconds, up to each resume, and this one's
            "adapter_checksums": checksums,
            "distributed": trainer.accelerator.distributed_type.value,  # NO, MULTI_CPU, FSDP, …
            "objective": cfg.objective,
        }
        if val is not None:
            summary["validation"] = {
                "data": val_stats.summary(),
                "best": best,
                "evaluations": sum("eval_loss" in r for r in trainer.state.log_history),
                "stopped_early": trainer.state.global_step < trainer.state.max_steps,
            }
            if cfg.objective == "dpo":
                from .dpo import eval_rewards

                summary["validation"]["rewards"] = eval_rewards(trainer.state.log_history)
        if cfg.objective == "dpo":
            from .dpo import last_rewards

            summary["beta"] = cfg.beta
            summary["rewards"] = last_rewards(trainer.state.log_history)  # the last log's
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return TrainResult(
        adapter_dir,
        trainable,
        counts,
        stats.summary(),
        result.training_loss,
        clock.seconds,
    )


PRECISION_FILE = "precision.json"  # OUT/precision.json: the precision a run started with


def run_precision(cfg: TrainConfig, out: Path, resume_from: str | None) -> Choice:
    """The run's precision: as asked, or what ``auto`` measures here; but a run resumed from a
    checkpoint keeps the precision it started with (``auto`` is measured per process and can
    flip under load, and steps in another precision would not continue the same training)."""
    file = out / PRECISION_FILE
    if resume_from and file.is_file():
        started = json.loads(file.read_text())["chosen"]
        if cfg.precision != "auto" and resolve_precision(cfg.precision).precision != started:
            raise ValueError(
                f"{out} was trained in {started} until {Path(resume_from).name}; resume it with "
                f"--precision {started} (or auto), or train into a new --out"
            )
        return Choice(started, f"the precision this run started with ({file})")
    return resolve_precision(cfg.precision, "cuda" if torch.cuda.is_available() else "cpu")


def _record_precision(out: Path, choice: Choice) -> None:
    from ..core.adapter_io import atomic_write

    text = json.dumps({"chosen": choice.precision, "reason": choice.reason})
    atomic_write(out / PRECISION_FILE, lambda tmp: Path(tmp).write_text(text))


def _save_final(model: Any, tok: Any, adapter_dir: Path, state: dict) -> None:
    model.save_adapter(adapter_dir, state)  # LoRA: PEFT's files (PeftModel.from_pretrained)
    tok.save_pretrained(str(adapter_dir / "tokenizer"))


def _print_summary(
    cfg: TrainConfig,
    counts: dict[str, int],
    trainable: int,
    stats: EncodeStats,
    resume: str | None,
    choice: Choice,
) -> None:
    lines = [
        f"method {cfg.method}  placement {cfg.layers or cfg.placement}  trainable {trainable:,}",
        f"precision {choice.precision} ({cfg.precision}: {choice.reason})",
        "parameter-matched counts: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()),
        f"data: {stats.kept} {'pairs' if cfg.objective == 'dpo' else 'conversations'} kept, "
        f"skipped {dict(stats.skipped) or 'none'}",
    ]
    if cfg.objective == "dpo":
        weights = cfg.loss_weights or [1.0] * len(cfg.loss_type)
        loss = " + ".join(f"{w:g} {t}" for t, w in zip(cfg.loss_type, weights, strict=True))
        lines.append(f"DPO loss {loss}  beta {cfg.beta:g}  reference {cfg.reference}")
    if resume:
        lines.append(f"resuming from {resume}")
    print("\n".join(lines), flush=True)
