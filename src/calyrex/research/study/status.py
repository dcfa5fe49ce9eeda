"""``calyrex study real --stages status``: where a study stands, read from its folder alone.

One line per model in the order the study makes them: its training (finished: steps, best
validation step and loss, hours; interrupted: the last checkpoint it resumes from, of how many
steps; not started) and its evaluation (suites finished of those due, hours; whether the
held-out attack items ran, where they are due), then the sweeps
and the compute spent so far, that of runs set aside included: ``OUT/previous/`` (a run whose
adapter was lost before its evaluation finished, made anew) and ``OUT/superseded/NAME/`` (a
recipe replaced mid-study: the first CALYREX DPO run and its sweep, on unbalanced pairs).
Nothing is loaded or run: a session deciding what it can finish reads this first.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median
from typing import Any

from .config import StudyConfig, Suite
from .plan import (
    PREVIOUS,
    SUPERSEDED,
    SWEEP_RUN,
    due,
    finished,
    heldout_dir,
    heldout_due,
    previous,
    runs,
    sweep_key,
)


def _checkpoint(where: Path) -> dict[str, Any] | None:
    """The checkpoint a resumed run starts from (the Trainer's own choice, as ``calyrex train``
    makes it): its step and the run's planned steps (its ``trainer_state.json``)."""
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(str(where)) if where.is_dir() else None
    if last is None:
        return None
    state = json.loads((Path(last) / "trainer_state.json").read_text())
    return {"step": state.get("global_step"), "of": state.get("max_steps")}


def _finished(summary: Path) -> dict[str, Any]:
    record = json.loads(summary.read_text())
    best = (record.get("validation") or {}).get("best") or {}
    found = {"state": "finished", "steps": record.get("steps"), "seconds": record["seconds"]}
    return found | {"best_step": best.get("step"), "val_loss": best.get("eval_loss")}


def training(where: Path) -> dict[str, Any]:
    """What ``train/RUN`` holds: ``state`` finished / interrupted / started / not started; a run
    trained again for its adapter has the first run's figures under ``first``."""
    first = where / previous("summary.json")
    found = {"first": _finished(first)} if first.is_file() else {}
    if (where / "summary.json").is_file():
        return found | _finished(where / "summary.json") | {"adapter": (where / "adapter").is_dir()}
    point = _checkpoint(where)
    if point is not None:
        return found | {"state": "interrupted", **point}
    return found | {"state": "started" if (where / "metrics.jsonl").is_file() else "not started"}


def _seconds(t: dict[str, Any] | None) -> float:
    """A run's training seconds, a first run's included where it was trained again."""
    return 0.0 if t is None else t.get("seconds", 0) + t.get("first", {}).get("seconds", 0)


def _beside(root: Path, run: str) -> dict[str, Path]:
    """The records of the evaluation work beside a run's suites: the held-out attack items and a
    DPO run's rewards by kind of pair."""
    from .pair_kinds import FILE

    return {"heldout": heldout_dir(root, run) / "cases.json", "pairs": root / "train" / run / FILE}


def _evaluation(root: Path, run: str, suites: list[Suite]) -> dict[str, dict[str, float | None]]:
    """A run's evaluation seconds, each read once: per suite key (``None``: not finished) and per
    piece of work beside the suites (``None``: no record; records from before they counted
    their seconds count 0)."""
    found = [finished(root, run, s) for s in suites]
    return {
        "suites": {
            s.key: None if r is None else r.get("seconds", 0)
            for s, r in zip(suites, found, strict=True)
        },
        "beside": {
            part: json.loads(f.read_text()).get("seconds", 0) if f.is_file() else None
            for part, f in _beside(root, run).items()
        },
    }


def _eval_seconds(evaluation: dict[str, dict[str, float | None]]) -> float:
    """The seconds :func:`_evaluation` found, summed."""
    return sum(s for part in evaluation.values() for s in part.values() if s is not None)


def _sweeps(root: Path) -> dict[str, float]:
    """Each finished sweep run's seconds, by its folder name in ``root/sweep``."""
    found = root.glob("sweep/*/summary.json")
    return {f.parent.name: json.loads(f.read_text())["seconds"] for f in found}


def set_aside(cfg: StudyConfig, out: Path) -> dict[str, dict[str, float]]:
    """The seconds each folder set aside spent (sweep, train, eval), by its path in ``out``
    (``previous``, ``superseded/NAME``): runs kept as they were, still part of what the study
    cost."""
    found = {}
    folders = [out / PREVIOUS, *sorted((out / SUPERSEDED).glob("*"))]
    for folder in (p for p in folders if p.is_dir()):
        names = {p.name for part in ("train", "eval", "heldout") for p in folder.glob(f"{part}/*")}
        found[str(folder.relative_to(out))] = {
            "sweep": sum(_sweeps(folder).values()),
            "train": sum(_seconds(training(folder / "train" / run)) for run in names),
            "eval": sum(_eval_seconds(_evaluation(folder, run, cfg.suites)) for run in names),
        }
    return found


def _sweep_left(
    cfg: StudyConfig, swept: dict[str, float], chosen: dict[str, Any]
) -> tuple[float, set[str]]:
    """Seconds the grids' values not yet ``swept`` will take, at the median of this objective's
    finished sweep values (a grid grown past its edge adds more), and the sweeps with none."""
    took: dict[str, list[float]] = {}
    for name, seconds in swept.items():
        took.setdefault("dpo" if "-dpo-lr" in name else "sft", []).append(seconds)
    seconds, unknown = 0.0, set()
    for key, objective in sorted({(sweep_key(a), a.objective) for a in cfg.arms}):
        grid = cfg.dpo_lr_grid if objective == "dpo" else cfg.lr_grid
        todo = [lr for lr in grid if SWEEP_RUN.format(key=key, lr=f"{lr:g}") not in swept]
        if key in chosen or not todo:
            continue
        if objective in took:
            seconds += len(todo) * median(took[objective])
        else:
            unknown.add(f"{key} sweep")
    return seconds, unknown


def _median_of(took: dict[tuple[str, str], list[float]], *keys: tuple[str, str]) -> float | None:
    """The median seconds of the first key with records (a method's runs, then its
    objective's)."""
    found = next((took[k] for k in keys if took.get(k)), None)
    return None if found is None else median(found)


def left(
    cfg: StudyConfig, rows: list[dict[str, Any]], swept: dict[str, float], chosen: dict[str, Any]
) -> dict[str, Any]:
    """What the study still needs, at the median seconds of the finished records of the same
    kind in the study's folder (this machine's, loaded as they were; ``rows`` from
    :func:`status`, ``swept`` from :func:`_sweeps`): a sweep value per objective, a
    training run per method and objective (else per objective; past an interrupted run's
    checkpoint, the rest of its planned steps, though patience may stop it sooner), each suite,
    the held-out items, a DPO run's rewards by kind. ``unknown`` names work nothing goes by."""
    arms = {run: arm for run, arm, _ in runs(cfg)}
    took: dict[tuple[str, str], list[float]] = {}  # (part, what) -> the finished ones' seconds
    for r in rows:
        arm, t = arms[r["run"]], r["training"] or {}
        for one in (t, t.get("first")):
            if one and "seconds" in one and one.get("state", "finished") == "finished":
                for what in (sweep_key(arm), arm.objective):
                    took.setdefault(("train", what), []).append(one["seconds"])
        for part in r["evaluation"].values():  # each suite key, "heldout", "pairs"
            for key, seconds in part.items():
                took.setdefault(("eval", key), []).extend([] if seconds is None else [seconds])
    sweep, unknown = _sweep_left(cfg, swept, chosen)
    spent = {"sweep": sweep, "train": 0.0, "eval": 0.0}
    for r in rows:
        arm, t, evaluation = arms[r["run"]], r["training"], r["evaluation"]
        todo = [(("eval", key),) for key, s in evaluation["suites"].items() if s is None]
        todo += [(("eval", "heldout"),)] if r["heldout"] is False else []
        if arm is not None and arm.objective == "dpo" and evaluation["beside"]["pairs"] is None:
            todo.append((("eval", "pairs"),))
        share = 1.0
        if arm is not None and t["state"] != "finished":
            if t["state"] == "interrupted" and t["of"]:
                share = 1 - t["step"] / t["of"]
            todo.append((("train", sweep_key(arm)), ("train", arm.objective)))
        for keys in todo:
            typical = _median_of(took, *keys)
            if typical is None:
                unknown.add(f"{r['run']} {keys[0][1]}")
            else:
                part = keys[0][0]
                spent[part] += typical * (share if part == "train" else 1.0)
    spent["total"] = sum(spent.values())
    return {"hours": {k: round(v / 3600, 2) for k, v in spent.items()}, "unknown": sorted(unknown)}


def _chosen(out: Path) -> dict[str, Any]:
    file = out / "sweep" / "chosen.json"
    return json.loads(file.read_text()) if file.is_file() else {}


def status(cfg: StudyConfig, out: Path) -> dict[str, Any]:
    """Every model's training and evaluation state, the sweeps, the hours spent and an estimate
    of those left (:func:`left`)."""
    rows = []
    for run, arm, seed in runs(cfg):
        first = arm is None or seed == cfg.seeds_of(arm)[0]
        evaluation = _evaluation(out, run, due(cfg, first))
        done = [s for s in evaluation["suites"].values() if s is not None]
        row = {"run": run, "suites": len(evaluation["suites"]), "evaluated": len(done)}
        row["evaluation"] = evaluation
        row["eval_seconds"] = _eval_seconds(evaluation)
        # the held-out attack items: None where not due, else whether they ran
        ran = evaluation["beside"]["heldout"] is not None
        row["heldout"] = ran if heldout_due(cfg, arm, seed) else None
        row["training"] = None if arm is None else training(out / "train" / run)
        rows.append(row)
    swept = _sweeps(out)
    chosen = _chosen(out)
    aside = set_aside(cfg, out)
    train_s = sum(_seconds(r["training"]) for r in rows)
    eval_s = sum(r["eval_seconds"] for r in rows)
    spent = {"sweep": sum(swept.values()), "train": train_s, "eval": eval_s}
    for part in spent:
        spent[part] += sum(seconds[part] for seconds in aside.values())
    spent["total"] = sum(spent.values())
    return {
        "runs": rows,
        "sweeps": sorted(swept),
        "chosen": {k: v["lr"] for k, v in chosen.items()},
        "seconds": {k: round(v, 1) for k, v in spent.items()},
        "hours": {k: round(v / 3600, 2) for k, v in spent.items()},
        "set_aside_h": {k: round(sum(v.values()) / 3600, 2) for k, v in aside.items()},
        "left": left(cfg, rows, swept, chosen),
    }


def _training_text(t: dict[str, Any] | None) -> str:
    if t is None:
        return "—"
    text = _state_text(t)
    if "first" in t:  # trained again for its adapter: the first run, the one evaluated
        first = t["first"]
        text += (
            f"; trained again for a later arm (first run: best step {first['best_step']}, "
            f"val {first['val_loss']:.4f}, {first['seconds'] / 3600:.2f} h)"
        )
    return text


def _state_text(t: dict[str, Any]) -> str:
    if t["state"] == "finished":
        kept = "" if t["adapter"] else ", adapter not here"
        return (
            f"finished: {t['steps']} steps, best step {t['best_step']} "
            f"(val {t['val_loss']:.4f}), {t['seconds'] / 3600:.2f} h{kept}"
        )
    if t["state"] == "interrupted":
        return f"resumes from step {t['step']} of {t['of']}"
    return t["state"]


def lines(found: dict[str, Any]) -> list[str]:
    """:func:`status` as a table and two summary lines."""
    out = ["| model | training | evaluation |", "|---|---|---|"]
    for r in found["runs"]:
        evaluated = f"{r['evaluated']} of {r['suites']} suites"
        if r["evaluated"]:
            evaluated += f", {r['eval_seconds'] / 3600:.2f} h"
        if r.get("heldout") is not None:
            evaluated += f"; held-out items {'done' if r['heldout'] else 'due'}"
        out.append(f"| {r['run']} | {_training_text(r['training'])} | {evaluated} |")
    chosen = ", ".join(f"{k} {v:g}" for k, v in found["chosen"].items()) or "none yet"
    out.append(f"sweeps: {len(found['sweeps'])} runs; learning rates chosen: {chosen}")
    h = found["hours"]
    out.append(
        f"compute spent: sweep {h['sweep']} h, train {h['train']} h, eval {h['eval']} h, "
        f"total {h['total']} h"
    )
    if aside := found.get("set_aside_h"):
        names = ", ".join(f"{name}/ {hours} h" for name, hours in aside.items())
        out.append(f"of which set aside: {names}")
    h, unknown = found["left"]["hours"], found["left"]["unknown"]
    out.append(
        f"left, at the finished records' median seconds: sweep {h['sweep']} h (more if a grid "
        f"grows past its edge), train {h['train']} h, eval {h['eval']} h, total {h['total']} h"
    )
    if unknown:
        out.append(f"no finished record to go by: {', '.join(unknown)}")
    return out
