"""The study's plan: each run's name, the order runs are made in, the suites a run is evaluated on
and whether one is finished — what the orchestrator (:mod:`.real`) and the report (:mod:`.report`)
both read, so neither imports the other's module for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config import Arm, StudyConfig, Suite


def run_name(arm: Arm, seed: int) -> str:
    return f"{arm.label}-s{seed}"


# a sweep run's folder in OUT/sweep: its arm's sweep_key and learning rate (``*`` in a glob)
SWEEP_RUN = "{key}-lr{lr}"


def sweep_key(arm: Arm) -> str:
    """The sweep an arm's learning rate comes from: one per method and objective."""
    return f"{arm.method}-{arm.objective}"


def runs(cfg: StudyConfig) -> list[tuple[str, Arm | None, int | None]]:
    """(run name, arm, seed) of every model, in the order they are made: the base, then the
    paper's comparison (the SFT arms trained on every seed) seed by seed, so a study cut short
    holds whole comparisons, each DPO arm right after the SFT run it starts from (committed
    results keep no weights: an SFT adapter lost with a machine before its DPO run had to be
    trained again); then the extra arms (another placement, equal wall time)."""
    out: list[tuple[str, Arm | None, int | None]] = [("base", None, None)]
    seeds = sorted({s for a in cfg.arms for s in cfg.seeds_of(a)})
    main = [a for a in cfg.arms if not a.init_from and a.seeds is None]
    extra = [a for a in cfg.arms if not a.init_from and a.seeds is not None]
    for group in (main, extra):
        for seed in seeds:
            for arm in (a for a in group if seed in cfg.seeds_of(a)):
                out.append((run_name(arm, seed), arm, seed))
                for dpo in (a for a in cfg.arms if a.init_from == arm.label):
                    if seed in cfg.seeds_of(dpo):
                        out.append((run_name(dpo, seed), dpo, seed))
    return out


# folders set aside whole in OUT, each with OUT's own layout ({sweep,train,eval,heldout}/…): a
# run whose adapter was lost before its evaluation finished (OUT/previous), and the runs of a
# recipe replaced mid-study (OUT/superseded/NAME); the study's compute still counts them
PREVIOUS, SUPERSEDED = "previous", "superseded"

# a finished run's records; when its adapter, lost with a machine, is trained again for a later
# arm, the first run's are kept beside as NAME.previous.EXT (the run its evaluation used)
RECORDS = ("summary.json", "metrics.jsonl", "best.json", "precision.json")


def previous(name: str) -> str:
    """``summary.json`` → ``summary.previous.json``."""
    stem, ext = name.split(".", 1)
    return f"{stem}.previous.{ext}"


def first_record(where: Path, name: str) -> Path:
    """A run's record ``name``, the first run's where the run was trained again."""
    kept = where / previous(name)
    return kept if kept.is_file() else where / name


def due(cfg: StudyConfig, first: bool) -> list[Suite]:
    """The suites a run is evaluated on (``first``: the base or an arm's first seed)."""
    return [s for s in cfg.suites if first or not s.first_seed_only]


def heldout_due(cfg: StudyConfig, arm: Arm | None, seed: int | None) -> bool:
    """Whether the held-out attack items run on this model: the base, each arm's
    ``heldout_seed``, an arm trained on one seed only."""
    if not cfg.heldout_limit:
        return False
    return arm is None or seed == cfg.heldout_seed or cfg.seeds_of(arm) == (seed,)


def heldout_dir(out: Path, run: str) -> Path:
    """Where a run's held-out cases go (``cases.json`` there: done)."""
    return out / "heldout" / run


def finished(out: Path, run: str, suite: Suite) -> dict[str, Any] | None:
    """The record ``calyrex eval`` wrote for ``suite`` on ``run``, when it finished (``ok``)."""
    file = out / "eval" / run / suite.key / f"{suite.name}.json"
    if not file.is_file():
        return None
    record = json.loads(file.read_text())
    return record if record.get("status") == "ok" else None
