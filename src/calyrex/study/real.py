"""The paper's comparison on a real LLM: one resumable run of every stage.

Stages, in order, each writing where a rerun finds it (a finished unit is never redone):

* ``mix``      ``OUT/data/sft.jsonl`` — the system-prompt SFT mix (``calyrex mix``);
* ``analyze``  ``OUT/analyze/analysis.json`` — the placement ``calyrex analyze`` recommends;
* ``train``    ``OUT/train/ARM-sSEED/`` — ``calyrex train`` per arm and seed (from its last
  checkpoint when interrupted; done when ``summary.json`` exists);
* ``eval``     ``OUT/eval/RUN/SUITE/`` — ``calyrex eval`` per run and suite (finished suites
  skipped, generated replies appended as they come, so a suite resumes mid-way);
* ``report``   ``OUT/report.{json,md}`` — :mod:`calyrex.study.report`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from .config import Arm, StudyConfig, Suite

STAGES = ("mix", "analyze", "train", "eval", "report")


def run_name(arm: Arm, seed: int) -> str:
    return f"{arm.label}-s{seed}"


def _say(msg: str) -> None:
    print(f"[study {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def real_data(*parts: str) -> Path:
    from ..eval.data import shared_data_dir

    path = shared_data_dir() / "real"
    if not path.is_dir():
        raise FileNotFoundError(
            f"the real data folder {path} is missing (set CALYREX_SHARED_DATA to the shared data)"
        )
    return path.joinpath(*parts)


def make_mix(cfg: StudyConfig, out: Path, seed: int = 0) -> Path:
    from ..mix.command import mix

    path = out / "data" / "sft.jsonl"
    if path.is_file():
        _say(f"mix: {path} exists, not rebuilt")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    mix(out=str(path), kind="sft", n=cfg.mix_rows, seed=seed)
    return path


def choose_layers(cfg: StudyConfig, out: Path) -> list[int]:
    """The other placement: the band ``calyrex analyze`` recommends on this model, or, when that
    band is ``late8th``'s own layers, the best band of the same width disjoint from it."""
    from ..analysis.command import analyze
    from ..analysis.recommend import best_band
    from ..placement import PRESETS

    file = out / "analyze" / "analysis.json"
    if not file.is_file():
        analyze(cfg.model, str(file.parent), max_examples=cfg.analyze_examples, progress=False)
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
    if arm.steps_like is None:
        return cfg.steps
    ref = _summary(out, cfg.arm(arm.steps_like), 0)
    own = _summary(out, next(a for a in cfg.arms if a.method == arm.method and not a.steps_like), 0)
    per_step = own["seconds"] / own["steps"]
    return max(1, round(ref["seconds"] / per_step))


def _summary(out: Path, arm: Arm, seed: int) -> dict[str, Any]:
    file = out / "train" / run_name(arm, seed) / "summary.json"
    if not file.is_file():
        raise FileNotFoundError(f"{file}: train {arm.label} seed {seed} first")
    return json.loads(file.read_text())


def train_arm(
    cfg: StudyConfig, arm: Arm, seed: int, data: Path, out: Path, layers: list[int] | None
) -> None:
    from ..training.config import TrainConfig
    from ..training.run import train

    where = out / "train" / run_name(arm, seed)
    if (where / "summary.json").is_file():
        _say(f"train {where.name}: finished earlier, not rerun")
        return
    _say(f"train {where.name}")
    train(
        TrainConfig(
            model=cfg.model,
            data=str(data),
            out=str(where),
            method=arm.method,
            placement=arm.placement if arm.placement != "analyze" else "late8th",
            layers=layers if arm.placement == "analyze" else None,
            max_steps=_steps(cfg, arm, out),
            lr=cfg.lr,
            batch_size=cfg.batch_size,
            max_length=cfg.max_length,
            seed=seed,
            save_steps=max(1, cfg.steps // 4),
            logging_steps=max(1, cfg.steps // 8),
            warmup_ratio=0.1,
            resume=True,
            progress=False,
        )
    )


def eval_data() -> dict[str, str]:
    """Where the suites that take a ``--data`` path find the shared copies."""
    return {"tensortrust": str(real_data("attacks", "tensortrust"))}


def eval_run(cfg: StudyConfig, run: str, adapter: Path | None, out: Path) -> None:
    """Every suite of ``cfg`` on one model (loaded once, only if a suite is left to do)."""
    from ..eval.bench import EvalConfig
    from ..eval.generate import Generator
    from ..eval.runner import evaluate

    cache: dict[str, Any] = {}

    def loader_for(suite: Suite) -> Callable[[], tuple[Any, Any]]:
        def load() -> tuple[Any, Any]:
            if "model" not in cache:
                from ..loading import load_model

                cache["model"], cache["tok"] = load_model(cfg.model, adapter and str(adapter))
            gen = Generator(cache["model"], cache["tok"], suite.max_new_tokens, cfg.eval_batch_size)
            return gen, None

        return load

    for suite in cfg.suites:
        where = out / "eval" / run / suite.key
        record = where / f"{suite.name}.json"
        if record.is_file() and json.loads(record.read_text()).get("status") == "ok":
            continue
        _say(f"eval {run} {suite.key}")
        config = EvalConfig(
            data=eval_data(),
            limit=suite.limit,
            max_new_tokens=suite.max_new_tokens,
            batch_size=cfg.eval_batch_size,
            system_prompt=suite.system_prompt,
        )
        info = {"label": run, "model": cfg.model, "adapter": adapter and str(adapter)}
        evaluate([suite.name], where, config, loader=loader_for(suite), run_info=info)


def runs(cfg: StudyConfig) -> list[tuple[str, Arm | None, int | None]]:
    """(run name, arm, seed) of every model evaluated: the base, then each arm's seeds."""
    out: list[tuple[str, Arm | None, int | None]] = [("base", None, None)]
    out += [(run_name(a, s), a, s) for a in cfg.arms for s in cfg.seeds_of(a)]
    return out


def run_study(
    cfg: StudyConfig, out: str | Path, stages: tuple[str, ...] = STAGES, command: str = ""
) -> dict[str, Any]:
    """Run ``stages`` of the study into ``out``; returns the report (when it was a stage)."""
    from .report import write_report

    unknown = set(stages) - set(STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}; choose from {', '.join(STAGES)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    plan = out / "study.json"
    previous = json.loads(plan.read_text()) if plan.is_file() else {}
    if previous.get("config") not in (None, _jsonable(cfg)):
        raise ValueError(
            f"{out} holds a study with another recipe ({plan}); use a new --out or delete it"
        )
    record = {"config": _jsonable(cfg), "command": command, "wall_s": previous.get("wall_s", {})}
    data = out / "data" / "sft.jsonl"
    layers = previous.get("analyze_layers")

    def timed(stage: str, fn: Callable[[], Any]) -> Any:
        t = time.time()
        result = fn()
        record["wall_s"][stage] = round(record["wall_s"].get(stage, 0) + time.time() - t, 1)
        record["analyze_layers"] = layers
        _write(plan, record)
        return result

    if "mix" in stages:
        data = timed("mix", lambda: make_mix(cfg, out))
    if "analyze" in stages or ("train" in stages and layers is None):
        layers = timed("analyze", lambda: choose_layers(cfg, out))
        _say(f"analyze: the other placement is layers {layers}")
    if "train" in stages:
        for arm in cfg.arms:
            for seed in cfg.seeds_of(arm):
                timed("train", lambda a=arm, s=seed: train_arm(cfg, a, s, data, out, layers))
    if "eval" in stages:
        for run, arm, _seed in runs(cfg):
            adapter = None if arm is None else out / "train" / run / "adapter"
            timed("eval", lambda r=run, a=adapter: eval_run(cfg, r, a, out))
    report = timed("report", lambda: write_report(cfg, out)) if "report" in stages else {}
    _say(f"done in {time.time() - start:.0f} s ({out})")
    return report


def publish(out: str | Path, dest: str | Path) -> list[Path]:
    """Copy the small result files (report, recipe, each suite's record and summary) to
    ``dest``: what is committed; adapters, checkpoints and replies stay in ``out``."""
    import shutil

    out, dest = Path(out), Path(dest)
    files = [out / "report.json", out / "report.md", out / "study.json"]
    files += sorted((out / "eval").glob("*/*/*.json"))
    files += sorted((out / "train").glob("*/summary.json"))
    files += [out / "analyze" / "analysis.json", out / "data" / "sft.stats.json"]
    copied = []
    for file in files:
        if file.is_file():
            target = dest / file.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, target)
            copied.append(target)
    return copied


def _jsonable(cfg: StudyConfig) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(cfg)))


def _write(path: Path, data: Any) -> None:
    from ..eval.data import write_json

    write_json(path, data)


def preset(quick: bool) -> StudyConfig:
    from .config import FULL, QUICK

    return replace(QUICK if quick else FULL)
