"""The paper's comparison on a real LLM: one resumable run of every stage.

Stages, in order, each writing where a rerun finds it (a finished unit is never redone):

* ``mix``      ``OUT/data/sft.jsonl`` — the system-prompt SFT mix (``calyrex mix``);
* ``analyze``  ``OUT/analyze/analysis.json`` — the placement ``calyrex analyze`` recommends;
* ``sweep``    ``OUT/sweep/chosen.json`` — each method's SFT learning rate, from short seed-0 runs
  at each value of the grid (:func:`chosen_lr`; DPO's is swept when its first arm trains);
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

from .config import Arm, StudyConfig, Suite
from .plan import (
    PREVIOUS,
    RECORDS,
    SWEEP_RUN,
    due,
    finished,
    heldout_dir,
    heldout_due,
    previous,
    run_name,
    runs,
    sweep_key,
)

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


def _say(msg: str) -> None:
    print(f"[study {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def real_data(*parts: str) -> Path:
    from ...eval.data import shared_data_dir

    path = shared_data_dir() / "real"
    if not path.is_dir():
        raise FileNotFoundError(
            f"the real data folder {path} is missing (set CALYREX_SHARED_DATA to the shared data)"
        )
    return path.joinpath(*parts)


def make_mix(cfg: StudyConfig, out: Path, seed: int = 0) -> Path:
    """``OUT/data/sft.jsonl``, ``OUT/data/preference.jsonl`` (each with its validation split
    ``*.val.jsonl`` when the recipe holds one out) and the SFT mix of every other access
    rotation an arm names (``calyrex mix``), each once; a mix made with another recipe is made
    again while nothing was trained on it (:func:`_trained_on`)."""
    from ..mix.command import mix

    files = {
        "sft.jsonl": ("sft", cfg.mix_rows, cfg.access, cfg.val_rows, False),
        "preference.jsonl": (
            "preference",
            cfg.preference_rows,
            cfg.access,
            cfg.preference_val_rows,
            cfg.preference_balance,
        ),
    }
    for arm in cfg.arms:
        files.setdefault(arm.data, ("sft", cfg.mix_rows, arm.access, 0, False))
    for name, (kind, rows, access, val, balance) in files.items():
        path = out / "data" / name
        # calyrex mix's options, as its stats record them
        wanted = {"n": rows, "seed": seed, "access": access, "val": val, "balance_grants": balance}
        stats = path.with_suffix(".stats.json")
        if path.is_file() and stats.is_file():
            made = json.loads(stats.read_text())["config"]
            if all(made.get(k, 0) == v for k, v in wanted.items()):
                _say(f"mix: {path} exists, not rebuilt")
                continue
            if trained := _trained_on(cfg, out, name):
                raise ValueError(
                    f"{path} was made with {made}, not {wanted}, and {', '.join(trained)} "
                    "trained on it: use a new --out"
                )
        path.parent.mkdir(parents=True, exist_ok=True)
        mix(out=str(path), kind=kind, **wanted)
    return out / "data"


def _trained_on(cfg: StudyConfig, out: Path, name: str) -> list[str]:
    """The runs and sweep runs in ``out`` whose arm trains on the mix file ``name``."""
    arms = [a for a in cfg.arms if a.data == name]
    found = [out / "train" / run_name(a, s) for a in arms for s in cfg.seeds_of(a)]
    found = [p for p in found if p.exists()]
    for key in {sweep_key(a) for a in arms}:
        found += sorted((out / "sweep").glob(SWEEP_RUN.format(key=key, lr="*")))
    return [str(p.relative_to(out)) for p in found]


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
    _write(file, chosen)
    _say(
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
    """The best validation loss of ``arm``'s method at ``lr`` (``arm``'s first seed, ``steps``
    steps); the method's plain arm (late8th) stands for every arm of the method."""
    where = out / "sweep" / SWEEP_RUN.format(key=key, lr=f"{lr:g}")
    if not (where / "summary.json").is_file():
        _say(f"sweep {where.name}")
        plain = replace(arm, placement="late8th")
        budget = {"lr": lr, "max_steps": steps, "eval_steps": steps, "eval_on_start": False}
        seed = cfg.seeds_of(arm)[0]
        _train(cfg, plain, seed, data, where, save_steps=max(1, steps // 4), **budget)
    summary = json.loads((where / "summary.json").read_text())
    return summary["validation"]["best"]["eval_loss"]


def train_arm(
    cfg: StudyConfig, arm: Arm, seed: int, data: Path, out: Path, layers: list[int] | None
) -> None:
    where = out / "train" / run_name(arm, seed)
    if (where / "summary.json").is_file():
        _say(f"train {where.name}: finished earlier, not rerun")
        _pair_kinds(cfg, out, arm, seed)
        return
    lr = chosen_lr(cfg, arm, data, out)
    _say(f"train {where.name} (lr {lr:g})")
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
        _say(f"{where.name}: no rewards by kind of pair (an adapter is not here)")
    else:
        _say(f"{where.name}: validation rewards by kind of pair written ({FILE})")


def eval_data(out: Path | None = None) -> dict[str, str]:
    """Where the suites that take a ``--data`` path find their data: the shared copies, and the
    study's own held-out access dialogues (``OUT/data/sft.val.jsonl``, for ``mix_access``)."""
    data = {"tensortrust": str(real_data("attacks", "tensortrust"))}
    if out is not None:
        from ..mix.command import val_path

        data["mix_access"] = str(val_path(out / "data" / "sft.jsonl"))
    return data


def eval_run(
    cfg: StudyConfig, run: str, adapter: Path | None, out: Path, first: bool, heldout: bool
) -> None:
    """Every suite of ``cfg`` on one model (loaded once, only if a suite is left to do);
    ``first``: the base or an arm's first seed (``first_seed_only`` suites run only there);
    ``heldout``: then the held-out attack items (:mod:`.heldout`), unless they ran already."""
    from ...core.adapter_io import is_peft_adapter
    from ...eval.bench import EvalConfig
    from ...eval.generate import Generator
    from ...eval.runner import evaluate

    cache: dict[str, Any] = {}
    merged = cfg.merge_lora and adapter is not None and is_peft_adapter(adapter)

    def model() -> tuple[Any, Any]:
        if "model" not in cache:
            from ...adapters.loading import load_model

            cache["model"], cache["tok"] = load_model(
                cfg.model, adapter and str(adapter), cfg.precision, merge_lora=cfg.merge_lora
            )
        return cache["model"], cache["tok"]

    def loader_for(suite: Suite) -> Callable[[], tuple[Any, Any]]:
        def load() -> tuple[Any, Any]:
            model()
            batch = suite.batch_size or cfg.eval_batch_size
            gen = Generator(cache["model"], cache["tok"], suite.max_new_tokens, batch)
            return gen, None

        return load

    info = {"label": run, "model": cfg.model, "adapter": adapter and str(adapter)}
    for suite in due(cfg, first):
        if finished(out, run, suite) is not None:
            continue
        where = out / "eval" / run / suite.key
        _say(f"eval {run} {suite.key}")
        config = EvalConfig(
            data=eval_data(out),
            limit=suite.limit,
            max_new_tokens=suite.max_new_tokens,
            batch_size=suite.batch_size or cfg.eval_batch_size,
            system_prompt=suite.system_prompt,
            shots=list(suite.shots) if suite.shots else None,
        )
        if suite.name == "msj_hijack":
            share_right_codes(cfg, out, run, config)
        run_info = info | ({"merge_lora": True} if merged else {})
        evaluate([suite.name], where, config, loader=loader_for(suite), run_info=run_info)
    if heldout and not (heldout_dir(out, run) / "cases.json").is_file():
        from .heldout import run_heldout

        _say(f"heldout {run}")
        run_heldout(cfg, out, run, model, info | {"merge_lora": merged})


def _eval_done(cfg: StudyConfig, out: Path, run: str, first: bool) -> bool:
    return all(finished(out, run, suite) is not None for suite in due(cfg, first))


def _adapter_needed(cfg: StudyConfig, out: Path, arm: Arm, seed: int) -> bool:
    """Whether this run's adapter is still to be used: by its evaluation, or by a DPO arm after
    it that is not trained yet or must be trained again (its own adapter gone and still needed)."""
    first = seed == cfg.seeds_of(arm)[0]
    if not _eval_done(cfg, out, run_name(arm, seed), first):
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
    _say(f"train {run}: its adapter is not here and is still needed: training again")
    if not _eval_done(cfg, out, run, seed == cfg.seeds_of(arm)[0]):
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
    _say(f"{folder.relative_to(out)}: a lost adapter's, moved to {aside}")


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
        _write(plan, record)
        return result

    if "mix" in stages:
        data = timed("mix", lambda: make_mix(cfg, out))
    if "analyze" in stages or ("train" in stages and layers is None):
        layers = timed("analyze", lambda: choose_layers(cfg, out))
        _say(f"analyze: the other placement is layers {layers}")
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
    _say(f"done in {time.time() - start:.0f} s ({out})")
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


def rescore(cfg: StudyConfig, out: Path) -> list[str]:
    """Score every finished generation suite of every run again from its stored replies with the
    current scorers (the record and its details rewritten, the replies untouched); returns the
    ``RUN/SUITE`` keys rescored."""
    from ...eval.bench import Context, EvalConfig
    from ...eval.data import replies_file
    from ...eval.runner import make_benchmark, run_one

    done = []
    for run, _, _ in runs(cfg):
        for suite in cfg.suites:
            where = out / "eval" / run / suite.key
            replies = replies_file(where, suite.name)
            bench = make_benchmark(suite.name)
            if finished(out, run, suite) is None or not replies.is_file() or hasattr(bench, "run"):
                continue
            stored = json.loads((where / "run.json").read_text())["config"]
            ctx = Context(EvalConfig(**stored), where)
            if suite.name == "msj_hijack":
                share_right_codes(cfg, out, run, ctx.config)
            record = run_one(bench, ctx, str(replies))
            cost = {
                k: v for k, v in finished(out, run, suite).items() if k in ("seconds", "tokens")
            }
            _write(where / f"{suite.name}.json", record | cost)  # what generating them cost
            done.append(f"{run}/{suite.key}")
    _say(f"rescore: {len(done)} suites scored again from their replies")
    return done


def share_right_codes(cfg: StudyConfig, out: Path, run: str, config: Any) -> int:
    """The many-shot suite's right-code replies not yet made are taken from the same run's Tensor
    Trust row for the *identical* prompt (a defence with its own code, no shots:
    ``msj_hijack.conversation`` is ``tensortrust.chat`` there), with its grant
    log-probability, marked ``borrowed_from``, rather than computed twice. Called before the
    suite runs, and by :func:`rescore` (the first study's replies predate the suite asking each
    sample's right code). The grant verdict reads only the reply's first line, which both suites'
    reply lengths hold. Measured on the base, calyrex-late8th-s0 and lora-s0, which computed both:
    100 of 100 replies identical, log-probabilities within 2.3e-5 (the batch they ran in).
    ``config``: the suite's ``EvalConfig``. Returns how many were taken."""
    from ...eval.bench import Context
    from ...eval.data import append_row, read_rows, replies_file
    from ...eval.runner import make_benchmark

    suite = next(s for s in cfg.suites if s.name == "msj_hijack")
    where = out / "eval" / run / suite.key
    tt = next((s for s in cfg.suites if s.name == "tensortrust"), None)
    source = tt and replies_file(out / "eval" / run / tt.key, "tensortrust")
    if source is None or not source.is_file():
        return 0
    where.mkdir(parents=True, exist_ok=True)
    file = replies_file(where, "msj_hijack")
    have = {r["id"] for r in read_rows(file)} if file.is_file() else set()
    codes = {r["id"]: r for r in read_rows(source)}
    items = make_benchmark("msj_hijack").load(config.data.get("msj_hijack"), Context(config, where))
    added = 0
    for item in items:
        row = codes.get(f"hijacking:{item['sample_id']}:access")
        if item.get("access") and item["id"] not in have and row and not row.get("skipped"):
            kept = {k: row[k] for k in ("response", "logprobs", "target_tokens") if k in row}
            append_row(file, {"id": item["id"], **kept, "borrowed_from": "tensortrust"})
            added += 1
    if added:
        _say(f"eval {run} msj_hijack: {added} right-code replies from tensortrust (same prompts)")
    return added


def _jsonable(cfg: StudyConfig) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(cfg)))


def _write(path: Path, data: Any) -> None:
    from ...eval.data import write_json

    write_json(path, data)


PRESETS = ("full", "v1", "quick")


def preset(name: str) -> StudyConfig:
    """``full`` (the powered evaluation), ``v1`` (the first study's sizes) or ``quick``."""
    from .config import FULL, QUICK, V1

    presets = {"full": FULL, "v1": V1, "quick": QUICK}
    if name not in presets:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(presets)}")
    return replace(presets[name])
