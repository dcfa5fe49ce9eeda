"""The paper's comparison on a real LLM: one resumable run of every stage, in the order of
:func:`~.plan.runs`; what each stage does to one arm or model lives in :mod:`.data` (the mixes),
:mod:`.train` (the sweeps and runs) and :mod:`.evaluate` (the suites and held-out items).

Stages, in order, each writing where a rerun finds it (a finished unit is never redone):

* ``mix``      ``OUT/data/sft.jsonl`` — the system-prompt SFT mix (``calyrex mix``);
* ``analyze``  ``OUT/analyze/analysis.json`` — the placement ``calyrex analyze`` recommends;
* ``sweep``    ``OUT/sweep/chosen.json`` — each method's SFT learning rate, from short seed-0 runs
  at each value of the grid (:func:`.train.chosen_lr`; DPO's is swept when its first arm trains);
* ``train``    ``OUT/train/ARM-sSEED/`` — ``calyrex train`` per arm and seed (from its last
  checkpoint when interrupted; done when ``summary.json`` exists);
* ``eval``     ``OUT/eval/RUN/SUITE/`` — ``calyrex eval`` per run and suite (finished suites
  skipped, generated replies appended as they come, so a suite resumes mid-way); then
  ``OUT/heldout/RUN/`` — the held-out attack items as ``--cases`` (:mod:`.heldout`) on the runs
  :func:`~.plan.heldout_due` names whose adapter is here;
* ``report``   ``OUT/report.{json,md}`` — :mod:`calyrex.research.study.report`.

``rescore`` (asked for by name, not in the default stages): every finished generation suite scored
again from its stored replies with the current scorers (a scoring rule fixed after the replies
were made; nothing is generated).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from .config import Arm, StudyConfig
from .data import make_mix
from .evaluate import eval_done, eval_run, rescore
from .log import say, write
from .plan import (
    PREVIOUS,
    RECORDS,
    SWEEP_RUN,
    heldout_dir,
    heldout_due,
    previous,
    run_name,
    runs,
    sweep_key,
)
from .train import chosen_lr, train_arm

STAGES = ("mix", "analyze", "sweep", "train", "eval", "report")
EXTRA_STAGES = ("rescore", "status")
# what a finished unit was made with: a rerun with other values would mix two recipes (arms
# and suites may be added to a study; evaluation limits are recorded in each suite's run.json)
RECIPE = ("model", "mix_rows", "preference_rows", "steps", "dpo_steps", "batch_size")
RECIPE += ("max_length", "lr", "dpo_lr", "dpo_beta", "precision", "analyze_examples")
RECIPE += ("access", "val_rows", "preference_val_rows", "epochs", "dpo_epochs", "eval_steps")
RECIPE += ("patience", "lr_grid", "dpo_lr_grid", "sweep_steps", "dpo_sweep_steps")
RECIPE += ("dpo_reference", "preference_balance")
# the fields that set only the study's runs, not its learning-rate sweeps
RUNS_ONLY = ("steps", "dpo_steps", "epochs", "dpo_epochs", "eval_steps", "patience")
# the fields that set only the DPO runs and their sweep: free until the first of those exists
DPO_ONLY = ("dpo_steps", "dpo_lr", "dpo_beta", "dpo_epochs", "dpo_lr_grid", "dpo_sweep_steps")
DPO_ONLY += ("dpo_reference", "preference_balance")


def choose_layers(cfg: StudyConfig, out: Path) -> list[int]:
    """The other placement: the band ``calyrex analyze`` recommends on this model, or, when that
    band is ``late8th``'s own layers, the best band of the same width disjoint from it."""
    from ...analysis.command import analyze
    from ...analysis.recommend import best_band
    from ...core.placement import PRESETS

    file = out / "analyze" / "analysis.json"
    if not file.is_file():
        analyze(
            cfg.model,
            str(file.parent),
            max_examples=cfg.analyze_examples,
            dtype=cfg.precision,
            progress=False,
        )
    result = json.loads(file.read_text())
    band = result.get("recommended_layers")
    late = PRESETS["late8th"](result["num_layers"])
    if band and sorted(band) != sorted(late):
        return list(band)
    profiles = list(result["profiles"].values())
    score = [sum(p[i] for p in profiles) / len(profiles) for i in range(result["num_layers"])]
    masked = [-1.0 if i in late else s for i, s in enumerate(score)]
    return best_band(masked[: min(late)], len(late))


def _adapter_needed(cfg: StudyConfig, out: Path, arm: Arm, seed: int) -> bool:
    """Whether this run's adapter is still to be used: by its evaluation, or by a DPO arm after
    it that is not trained yet or must be trained again (its own adapter gone and still needed)."""
    first = seed == cfg.seeds_of(arm)[0]
    if not eval_done(cfg, out, run_name(arm, seed), first):
        return True
    for later in (a for a in cfg.arms if a.init_from == arm.label and seed in cfg.seeds_of(a)):
        where = out / "train" / run_name(later, seed)
        if not (where / "summary.json").is_file():
            return True
        if not (where / "adapter").is_dir() and _adapter_needed(cfg, out, later, seed):
            return True
    return False


def _forget_if_adapter_gone(cfg: StudyConfig, out: Path, arm: Arm, seed: int) -> None:
    """A run whose adapter is not kept (committed results hold no weights) is trained again.
    Evaluated whole (its adapter needed only as a later arm's start), it keeps the first run's
    records beside the second's (``NAME.previous.EXT``: the run its evaluation used; trained a
    third time, still the first's). Not evaluated whole, the lost run moves to ``OUT/previous/``
    (its training records, the suites it finished, its held-out items) and the run is trained
    and evaluated anew: the same recipe and seed trained again is another adapter (at lr 3e-3
    calyrex-late8th-s1's second training left its first within 100 steps), and one model's row
    must come from one adapter."""
    run = run_name(arm, seed)
    where = out / "train" / run
    if not (where / "summary.json").is_file() or (where / "adapter").is_dir():
        return
    say(f"train {run}: its adapter is not here and is still needed: training again")
    if not eval_done(cfg, out, run, seed == cfg.seeds_of(arm)[0]):
        for folder in (where, out / "eval" / run, heldout_dir(out, run)):
            _set_aside(out, folder)
        return
    kept = (where / previous("summary.json")).is_file()
    for name in RECORDS:
        if (where / name).is_file():
            if kept:
                (where / name).unlink()
            else:
                (where / name).rename(where / previous(name))


def _set_aside(out: Path, folder: Path) -> None:
    """``OUT/X`` → ``OUT/previous/X``; what is there already (the first lost run's) is kept."""
    if not folder.is_dir():
        return
    aside = out / PREVIOUS / folder.relative_to(out)
    if aside.is_dir():
        shutil.rmtree(folder)
        return
    aside.parent.mkdir(parents=True, exist_ok=True)
    folder.rename(aside)
    say(f"{folder.relative_to(out)}: a lost adapter's, moved to {aside}")


def run_study(
    cfg: StudyConfig,
    out: str | Path,
    stages: tuple[str, ...] = STAGES,
    command: str = "",
    only: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run ``stages`` of the study into ``out``; returns the report (when it was a stage).
    ``only``: train and evaluate just these runs (``base``, ``lora-s0``, …), for a part of the
    study at a time; the report still covers everything finished."""
    from .report import write_report

    unknown = set(stages) - set(STAGES) - set(EXTRA_STAGES)
    if unknown:
        names = ", ".join(STAGES + EXTRA_STAGES)
        raise ValueError(f"unknown stages {sorted(unknown)}; choose from {names}")
    out = Path(out)
    if "status" in stages:  # reads the folder, writes nothing
        from .status import lines, status

        if len(stages) > 1:
            raise ValueError("--stages status only reads the study's folder: give it alone")
        if not (out / "study.json").is_file():
            raise ValueError(f"no study in {out} (no study.json): nothing to report")
        found = status(cfg, out)
        print("\n".join(lines(found)))
        return found
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    plan = out / "study.json"
    previous = json.loads(plan.read_text()) if plan.is_file() else {}
    old, new = previous.get("config") or {}, _jsonable(cfg)
    changed = [k for k in RECIPE if k in old and old[k] != new[k]]
    if refused := _trained_under(cfg, out, changed):
        raise ValueError(
            f"{out} holds a study trained with other {', '.join(refused)} ({plan}); "
            "use a new --out or delete it"
        )
    layers = previous.get("analyze_layers")
    record = {"config": _jsonable(cfg), "command": command, "wall_s": previous.get("wall_s", {})}
    record["analyze_layers"] = layers
    data = out / "data"

    def timed(stage: str, fn: Callable[[], Any]) -> Any:
        t = time.time()
        result = fn()
        record["wall_s"][stage] = round(record["wall_s"].get(stage, 0) + time.time() - t, 1)
        if stage == "analyze":
            record["analyze_layers"] = result
        write(plan, record)
        return result

    if "mix" in stages:
        data = timed("mix", lambda: make_mix(cfg, out))
    if "analyze" in stages or ("train" in stages and layers is None):
        layers = timed("analyze", lambda: choose_layers(cfg, out))
        say(f"analyze: the other placement is layers {layers}")
    if "sweep" in stages:
        for arm in {a.method: a for a in reversed(cfg.arms) if a.objective == "sft"}.values():
            timed("sweep", lambda a=arm: chosen_lr(cfg, a, data, out))
    known = {r for r, _, _ in runs(cfg)}
    if set(only) - known:
        raise ValueError(f"unknown runs {sorted(set(only) - known)}; choose from {sorted(known)}")
    for run, arm, seed in runs(cfg):  # each model trained, then evaluated, before the next
        if only and run not in only:
            continue
        if arm is not None and "train" in stages:
            if _adapter_needed(cfg, out, arm, seed):
                _forget_if_adapter_gone(cfg, out, arm, seed)
            timed("train", lambda a=arm, s=seed: train_arm(cfg, a, s, data, out, layers))
        if "eval" in stages:
            adapter = None if arm is None else out / "train" / run / "adapter"
            first = arm is None or seed == cfg.seeds_of(arm)[0]
            # an adapter lost with a machine is not trained again for the held-out items alone
            held = heldout_due(cfg, arm, seed) and (adapter is None or adapter.is_dir())
            timed("eval", lambda r=run, a=adapter, f=first, h=held: eval_run(cfg, r, a, out, f, h))
    if "rescore" in stages:
        rescore(cfg, out)
    report = timed("report", lambda: write_report(cfg, out)) if "report" in stages else {}
    say(f"done in {time.time() - start:.0f} s ({out})")
    return report


def _trained_under(cfg: StudyConfig, out: Path, changed: list[str]) -> list[str]:
    """The recipe fields of ``changed`` that something in ``out`` was trained under: a DPO field
    once a DPO sweep or DPO run exists; any other field once a run exists, or once a sweep
    exists for a field that is not the runs' budget alone (evaluating the base does not depend
    on the recipe)."""
    dpo_runs = [(r, arm) for r, arm, _ in runs(cfg) if arm is not None and arm.objective == "dpo"]
    dpo = any((out / "train" / r).exists() for r, _ in dpo_runs) or any(
        any((out / "sweep").glob(SWEEP_RUN.format(key=sweep_key(arm), lr="*")))
        for _, arm in dpo_runs
    )
    trained, swept = (out / "train").is_dir(), (out / "sweep").is_dir()
    return [
        k for k in changed if (dpo if k in DPO_ONLY else trained or (swept and k not in RUNS_ONLY))
    ]


def _jsonable(cfg: StudyConfig) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(cfg)))


PRESETS = ("full", "v1", "quick")


def preset(name: str) -> StudyConfig:
    """``full`` (the powered evaluation), ``v1`` (the first study's sizes) or ``quick``."""
    from .config import FULL, QUICK, V1

    presets = {"full": FULL, "v1": V1, "quick": QUICK}
    if name not in presets:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(presets)}")
    return replace(presets[name])
