"""How a training stage starts: one process, or ``accelerate launch`` when several GPUs are visible.

Either way it is the standalone ``calyrex train --config METHOD.yaml --out OUT/train/METHOD
--resume``, so a stage can be rerun or inspected on its own.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from .config import ReproduceConfig

ACCELERATE_CONFIGS = Path(__file__).resolve().parents[4] / "configs" / "accelerate"


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def train_argv(cfg: ReproduceConfig, method: str, out: Path, gpus: int) -> list[str]:
    """The command line of one method's training (what the stage runs, or would run)."""
    argv = ["calyrex", "train", "--config", cfg.train[method], "--out", str(out), "--resume"]
    if gpus <= 1:
        return argv
    launch = str(ACCELERATE_CONFIGS / f"{cfg.launch}.yaml")
    head = ["accelerate", "launch", "--config_file", launch, "--num_processes", str(gpus), "-m"]
    return head + argv  # `-m calyrex train …`: the package's __main__


def shell(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def train_method(cfg: ReproduceConfig, method: str, out: Path) -> None:
    """Train (or resume) ``method`` into ``out``; several GPUs go through accelerate."""
    gpus = gpu_count()
    if gpus > 1:
        argv = train_argv(cfg, method, out, gpus)
        module = [sys.executable, "-m", "accelerate.commands.launch"] + argv[2:]
        print(f"$ {shell(argv)}", flush=True)
        subprocess.run(module, check=True)
        return
    from ...training import train

    train(cfg.train_config(method, out))
