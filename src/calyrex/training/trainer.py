"""transformers.Trainer with adapter-only, atomic, resumable checkpoints and a metrics log."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import ExportableState, ProgressCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from ..core.adapter_io import read_adapter
from ..core.attempts import Attempts

STAGING = ".staging"


def barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def leave_process_group() -> None:
    """Destroy the process group a finished run joined (torchrun), while the interpreter is
    whole: left to exit, gloo's worker threads can abort a rank as it shuts down (SIGABRT,
    "terminate called without an active exception"; pytorch/pytorch#190489). Only after a
    run that finished: on an error another rank may still be inside a collective."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


class AdapterTrainer(Trainer):
    """Saves and restores only the adapter (the model's own files, through the adapter
    contract: calyrex's format or LoRA's PEFT format); checkpoints appear whole or not at all."""

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        model = self.accelerator.unwrap_model(self.model)
        state = model.adapter_state_dict()  # every rank: gathering FSDP2 shards is a collective
        if self.args.should_save:
            model.save_adapter(output_dir or self.args.output_dir, state)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        target = self.accelerator.unwrap_model(self.model)
        target.load_adapter_state_dict(read_adapter(Path(resume_from_checkpoint))[1])

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """Write into ``OUT/.staging/checkpoint-N`` then rename: a kill never leaves half a checkpoint."""
        run_dir = self._get_output_dir(trial=trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging = os.path.join(run_dir, STAGING)
        if self.args.should_save:
            shutil.rmtree(os.path.join(staging, name), ignore_errors=True)
        barrier()
        self._get_output_dir = lambda trial=None: staging  # where the parent writes this checkpoint
        try:
            super()._save_checkpoint(model, trial)
        finally:
            del self._get_output_dir
        barrier()  # every rank has written its RNG state
        if self.args.should_save:
            final = os.path.join(run_dir, name)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(os.path.join(staging, name), final)
            if not os.listdir(staging):
                os.rmdir(staging)
            rotate_checkpoints(run_dir, save_total_limit=self.args.save_total_limit)
        barrier()


class MetricsLog(TrainerCallback):
    """Append one JSON object per logged step to ``OUT/metrics.jsonl`` (rank 0), with tokens/s."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._last: tuple[float, int] | None = None

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any
    ) -> None:
        if not state.is_world_process_zero or not logs or not ({"loss", "eval_loss"} & set(logs)):
            return
        now, seen = time.perf_counter(), int(getattr(state, "num_input_tokens_seen", 0) or 0)
        if "loss" in logs:  # a training log: tokens/s since the last one
            if self._last is not None and now > self._last[0]:
                logs["tokens_per_s"] = round((seen - self._last[1]) / (now - self._last[0]), 1)
            self._last = (now, seen)
        record = {
            "step": state.global_step,
            **{k: v for k, v in logs.items() if isinstance(v, (int, float))},
        }
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._last = (time.perf_counter(), int(getattr(state, "num_input_tokens_seen", 0) or 0))

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        # the last step is always logged, so a run shorter than logging_steps (or one ending
        # between two logging steps) still leaves its final loss in metrics.jsonl
        if state.global_step >= state.max_steps:
            control.should_log = True
        return control


class Clock(TrainerCallback, ExportableState, Attempts):
    """A run's wall seconds summed over its attempts: each checkpoint's ``trainer_state.json``
    stores the seconds up to it (``ExportableState``), and a run resumed from it starts from
    them. What a killed attempt spent after its last checkpoint is not the run's: it is redone."""

    def __init__(self, started: float | None = None) -> None:
        Attempts.__init__(self, 0.0, started)  # ``before``: read at the train's beginning

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        # resumed: the Trainer has loaded the checkpoint's state, this callback's entry with it;
        # from step 0 the entry is this attempt's own setup time, taken when the state was made
        name, kept = type(self).__name__, state.stateful_callbacks
        stored = (kept.get(name) or {}) if state.global_step > 0 else {}
        if isinstance(stored, list):  # the Trainer's form for several callbacks of one class
            stored = stored[-1] if stored else {}
        self.before = float(stored.get("attributes", {}).get("seconds", 0.0))
        # a checkpoint from before the clock has no entry, and the Trainer's save needs one
        kept.setdefault(name, self.state())

    def state(self) -> dict[str, Any]:
        return {"args": {}, "attributes": {"seconds": round(self.seconds, 2)}}


BEST = "best.json"  # OUT/best.json: the step and validation loss of OUT/best-STEP


def read_best(out: Path) -> dict[str, Any] | None:
    """``{"step", "eval_loss", "dir"}`` of the best evaluated adapter so far, or None."""
    file = out / BEST
    return json.loads(file.read_text()) if file.is_file() else None


def forget_best(out: Path) -> None:
    """Remove the best adapter an earlier attempt of this run kept (a run that starts anew)."""
    (out / BEST).unlink(missing_ok=True)
    for old in out.glob("best-*"):
        shutil.rmtree(old, ignore_errors=True)


class KeepBest(TrainerCallback):
    """After each evaluation: the adapter of the lowest validation loss so far kept in
    ``OUT/best-STEP`` (``OUT/best.json`` names it, written after it, so a kill leaves the old
    pair whole), and training stopped after ``patience`` evaluations without a lower loss.
    State lives in those files only, so a resumed run picks it up as it was."""

    def __init__(self, out: Path, save: Callable[[Any, Path], None], patience: int | None) -> None:
        self.out, self.save, self.patience = out, save, patience
        self.best: dict[str, Any] | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        # read once, before any rank writes: every rank then decides alike at each evaluation
        self.best = read_best(self.out)

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict | None = None, **kw: Any
    ) -> None:
        from ..core.adapter_io import atomic_write

        loss = (metrics or {}).get("eval_loss")
        if loss is None:
            return
        best = self.best
        if best is None or loss < best["eval_loss"]:
            where = self.out / f"best-{state.global_step}"
            self.save(kw["model"], where)  # every rank (a collective under FSDP); rank 0 writes
            record = {"step": state.global_step, "eval_loss": loss, "dir": where.name}
            self.best = record
            if state.is_world_process_zero:
                atomic_write(self.out / BEST, lambda tmp: Path(tmp).write_text(json.dumps(record)))
                for old in self.out.glob("best-*"):
                    if old != where:
                        shutil.rmtree(old, ignore_errors=True)
            barrier()
        elif self.patience and state.global_step - best["step"] >= self.patience * args.eval_steps:
            control.should_training_stop = True


class LossBar(ProgressCallback):
    """The Trainer's progress bar, showing loss and tokens/s instead of printing log dicts."""

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any
    ) -> None:
        if (
            state.is_world_process_zero
            and self.training_bar is not None
            and logs
            and "loss" in logs
        ):
            self.training_bar.set_postfix(
                loss=f"{logs['loss']:.4f}", tok_s=logs.get("tokens_per_s", "-")
            )


def trim_metrics(path: Path, last_step: int) -> None:
    """On resume, drop log lines a killed run wrote after its last checkpoint (``-1``: all of
    them, for a run that starts from step 0 again)."""
    if not path.exists():
        return
    lines = [
        line
        for line in path.read_text().splitlines()
        if line.strip() and json.loads(line)["step"] <= last_step
    ]
    path.write_text("".join(line + "\n" for line in lines))
