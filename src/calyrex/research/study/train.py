"""How an arm is trained: its learning rate (a sweep per method and objective, grown past an
edge winner) and its run (``calyrex train``, resumable, to convergence on the validation split),
then a DPO run's rewards by kind of pair."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from .config import Arm, StudyConfig
from .log import say, write
from .plan import SWEEP_RUN, run_name, sweep_key


def _steps(cfg: StudyConfig, arm: Arm, out: Path) -> int:
    """``cfg.steps``, or for an equal-wall-time arm the steps that fit its reference's time."""
    if arm.objective == "dpo":
        return cfg.dpo_steps
    if arm.steps_like is None:
        return cfg.steps
    ref = _summary(out, cfg.arm(arm.steps_like), 0)
    own = _summary(
        out,
        next(
            a
            for a in cfg.arms
            if a.method == arm.method and not a.steps_like and a.objective == "sft"
        ),
        0,
    )
    per_step = own["seconds"] / own["steps"]
    return max(1, round(ref["seconds"] / per_step))


def _summary(out: Path, arm: Arm, seed: int) -> dict[str, Any]:
    file = out / "train" / run_name(arm, seed) / "summary.json"
    if not file.is_file():
        raise FileNotFoundError(f"{file}: train {arm.label} seed {seed} first")
    return json.loads(file.read_text())


def _val(cfg: StudyConfig, data: Path, arm: Arm) -> Path | None:
    """The validation split of ``arm``'s mix, when the recipe holds one out."""
    from ..mix.command import val_path

    rows = cfg.preference_val_rows if arm.objective == "dpo" else cfg.val_rows
    return val_path(data / arm.data) if rows else None


def _train(cfg: StudyConfig, arm: Arm, seed: int, data: Path, where: Path, **kw: Any) -> None:
    """``calyrex train`` of ``arm`` (seed ``seed``) into ``where``, resumable; ``kw``: the
    budget and learning rate (TrainConfig fields)."""
    from ...training.config import TrainConfig
    from ...training.run import train

    init = None
    if arm.init_from:
        init = (
            data.parent / "train" / run_name(cfg.arm(arm.init_from), seed) / "adapter"
        )  # OUT/train
        if not init.is_dir():
            raise FileNotFoundError(f"{init}: train {arm.init_from} seed {seed} first")
    val = _val(cfg, data, arm)
    train(
        TrainConfig(
            model=cfg.model,
            data=str(data / arm.data),
            eval_data=str(val) if val else None,
            out=str(where),
            method=arm.method,
            placement=arm.placement if arm.placement != "analyze" else "late8th",
            objective=arm.objective,
            init_adapter=str(init) if init else None,
            beta=cfg.dpo_beta,
            loss_type=list(arm.loss_type),
            reference=cfg.dpo_reference,
            precision=cfg.precision,
            batch_size=cfg.batch_size,
            max_length=cfg.max_length,
            seed=seed,
            warmup_ratio=0.1,
            resume=True,
            progress=False,
            **kw,
        )
    )


def chosen_lr(cfg: StudyConfig, arm: Arm, data: Path, out: Path) -> float:
    """``arm``'s learning rate: the recipe's, or with a grid the value whose first-seed run of
    ``sweep_steps`` (DPO: ``dpo_sweep_steps``, from that seed's SFT adapter) ends at the lowest
    validation loss — swept once per method and objective, in ``OUT/sweep/`` (resumable), the
    losses and the choice in ``OUT/sweep/chosen.json``. A winner at the grid's edge is not a
    chosen value: the grid grows past that edge in its 1-3-10 steps (one more decade of the
    pattern), at most ``sweep_extend`` times, and says so when it still ends at an edge."""
    dpo = arm.objective == "dpo"
    grid = cfg.dpo_lr_grid if dpo else cfg.lr_grid
    if not grid:
        return cfg.dpo_lr if dpo else cfg.lr
    if _val(cfg, data, arm) is None:
        raise ValueError("a learning-rate sweep needs a validation split (val_rows)")
    key = sweep_key(arm)
    file = out / "sweep" / "chosen.json"
    chosen = json.loads(file.read_text()) if file.is_file() else {}
    recipe = {"grid": list(grid), "extend": cfg.sweep_extend}
    if key in chosen and {k: chosen[key].get(k) for k in recipe} == recipe:
        return chosen[key]["lr"]
    steps = cfg.dpo_sweep_steps if dpo else cfg.sweep_steps
    values, losses = sorted(grid), {}
    for grown in range(cfg.sweep_extend + 1):
        for lr in values:
            if f"{lr:g}" not in losses:
                losses[f"{lr:g}"] = _sweep_loss(cfg, arm, key, lr, steps, data, out)
        best = min(values, key=lambda lr: losses[f"{lr:g}"])
        if best not in (values[0], values[-1]) or len(values) < 2 or grown == cfg.sweep_extend:
            break
        values = sorted([*values, _past_edge(values, up=best == values[-1])])
    edge = best in (values[0], values[-1])
    chosen[key] = {"lr": best, **recipe, "swept": values, "steps": steps, "val_loss": losses}
    chosen[key]["at_grid_edge"] = edge
    write(file, chosen)
    say(
        f"sweep {key}: lr {best:g} (validation loss {losses})"
        + (" at the grid's edge" if edge else "")
    )
    return best


def _past_edge(values: list[float], up: bool) -> float:
    """The next learning rate past the top (``up``) or bottom of a sorted grid: a decade past
    the second-outermost value where that lies beyond the edge (1e-3, 3e-3 → 1e-2: a 1-3-10
    grid keeps its pattern), else the grid's outermost step again (1e-4, 1e-3 → 1e-2)."""
    if up:
        decade, step = values[-2] * 10, values[-1] ** 2 / values[-2]
        grown = decade if decade > values[-1] * 1.01 else step
    else:
        decade, step = values[1] / 10, values[0] ** 2 / values[1]
        grown = decade if decade < values[0] / 1.01 else step
    return float(f"{grown:.3g}")


def _sweep_loss(
    cfg: StudyConfig, arm: Arm, key: str, lr: float, steps: int, data: Path, out: Path
) -> float:
    """The best validation loss of ``arm``'s method at ``lr`` (``steps`` steps, on the first
    seed of the first arm of sweep ``key``); the method's plain arm (late8th; DPO: its sigmoid
    loss) stands for every arm of the method and objective."""
    where = out / "sweep" / SWEEP_RUN.format(key=key, lr=f"{lr:g}")
    if not (where / "summary.json").is_file():
        say(f"sweep {where.name}")
        plain = replace(arm, placement="late8th", loss_type=Arm.loss_type)
        budget = {"lr": lr, "max_steps": steps, "eval_steps": steps, "eval_on_start": False}
        seed = cfg.seeds_of(next(a for a in cfg.arms if sweep_key(a) == key))[0]
        _train(cfg, plain, seed, data, where, save_steps=max(1, steps // 4), **budget)
    summary = json.loads((where / "summary.json").read_text())
    return summary["validation"]["best"]["eval_loss"]


def train_arm(
    cfg: StudyConfig, arm: Arm, seed: int, data: Path, out: Path, layers: list[int] | None
) -> None:
    where = out / "train" / run_name(arm, seed)
    if (where / "summary.json").is_file():
        say(f"train {where.name}: finished earlier, not rerun")
        _pair_kinds(cfg, out, arm, seed)
        return
    lr = chosen_lr(cfg, arm, data, out)
    say(f"train {where.name} (lr {lr:g})")
    epochs = cfg.dpo_epochs if arm.objective == "dpo" else cfg.epochs
    budget: dict[str, Any] = {"lr": lr, "layers": layers if arm.placement == "analyze" else None}
    if epochs is None:  # a fixed number of steps (the first study)
        steps = _steps(cfg, arm, out)
        budget |= {"max_steps": steps, "save_steps": max(1, cfg.steps // 4)}
        budget |= {"logging_steps": max(1, cfg.steps // 8)}
    else:  # to convergence: the best validation loss within ``epochs``, --patience
        budget |= {"epochs": epochs, "eval_steps": cfg.eval_steps, "patience": cfg.patience}
        # a checkpoint at every log (20 steps in FULL, ~8 min on an AVX2 CPU): a session that
        # ends mid-run loses at most that; the best adapter is kept apart, at each evaluation
        every = max(1, cfg.eval_steps // 5)
        budget |= {"save_steps": every, "logging_steps": every}
    _train(cfg, arm, seed, data, where, **budget)
    _pair_kinds(cfg, out, arm, seed)


def _pair_kinds(cfg: StudyConfig, out: Path, arm: Arm, seed: int) -> None:
    """A DPO run's validation rewards per kind of pair, once, while its adapters are here."""
    from .pair_kinds import FILE, rewards_by_tag

    where = out / "train" / run_name(arm, seed)
    if arm.objective != "dpo" or (where / FILE).is_file():
        return
    if rewards_by_tag(cfg, out, arm, seed) is None:
        say(f"{where.name}: no rewards by kind of pair (an adapter is not here)")
    else:
        say(f"{where.name}: validation rewards by kind of pair written ({FILE})")
