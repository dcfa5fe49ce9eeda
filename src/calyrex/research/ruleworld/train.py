"""Training an adapter on RuleWorld, shared by the demo, the placement ablation and the study.

:func:`backbone_dir` picks (or pretrains) the backbone; :func:`train_adapter` trains one method
on it through :func:`calyrex.training.train`. Models are loaded with the one loader,
``calyrex.adapters.loading.load_model(str(path), adapter, DTYPE, DEVICE)``: the recorded runs are
evaluated in fp32 on the CPU, on every machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .pretrain import ASSET_DIR, check_backbone
from .pretrain import pretrain as pretrain_backbone

if TYPE_CHECKING:  # the demo imports this module
    from .demo import DemoConfig

DTYPE, DEVICE = "float32", "cpu"  # how RuleWorld's models are loaded for evaluation


def backbone_dir(
    root: Path, quick: bool, seed: int, given: str | None, fresh: bool = False
) -> Path:
    """The backbone a run uses, its weights checked against ``ruleworld.json``: ``given``, else
    the shipped one (seed 0, unless ``fresh``), else one pretrained into ``root/backbone``
    (reused when it is there; a tiny one when ``quick``)."""
    if given:
        return check_backbone(Path(given))
    if (ASSET_DIR / "config.json").exists() and seed == 0 and not fresh:
        return check_backbone(ASSET_DIR)
    path = root / "backbone"
    if not (path / "config.json").exists():
        pretrain_backbone(seed=seed, out=str(path), quick=quick)
    return check_backbone(path)


def backbone_name(path: Path) -> str:
    """The backbone as a record shows it: ``ruleworld`` (shipped) or the directory's name."""
    return "ruleworld" if path.resolve() == ASSET_DIR.resolve() else path.name


def train_adapter(
    method: str,
    backbone: Path,
    data: Path,
    out: Path,
    cfg: DemoConfig,
    seed: int,
    placement: str = "late8th",
    layers: list[int] | None = None,
    block: dict[str, Any] | None = None,
) -> dict:
    """Train ``method`` on ``backbone`` with the SFT corpus ``data`` into ``out/adapter``, with
    ``cfg``'s steps, batch, learning rate (per method) and length, in fp32; ``placement`` /
    ``layers`` / ``block`` configure a calyrex adapter. Returns ``trainable_params``,
    ``train_loss`` (rounded) and ``train_seconds``."""
    from ...training import TrainConfig, train

    result = train(
        TrainConfig(
            model=str(backbone),
            method=method,
            placement=placement,
            layers=layers,
            block=block,
            data=str(data),
            out=str(out),
            max_steps=cfg.steps,
            lr=cfg.lr[method],
            batch_size=cfg.batch_size,
            max_length=cfg.max_length,
            seed=seed,
            system_pool=[],  # the corpus has its own system prompts
            save_steps=10**9,
            logging_steps=max(1, cfg.steps // 10),
            group_by_length=cfg.group_by_length,
            precision="fp32",  # the recorded runs are fp32, on every machine
        )
    )
    return {
        "trainable_params": result.trainable_params,
        "train_loss": round(result.final_loss, 4),
        "train_seconds": round(result.seconds, 1),
    }
