"""What the study trains and evaluates on: its mixes (``calyrex mix``, made once per recipe) and
the data paths of the suites that read files."""

from __future__ import annotations

import json
from pathlib import Path

from .config import StudyConfig
from .log import say
from .plan import SWEEP_RUN, run_name, sweep_key


def make_mix(cfg: StudyConfig, out: Path, seed: int = 0) -> Path:
    """``OUT/data/sft.jsonl``, ``OUT/data/preference.jsonl`` (each with its validation split
    ``*.val.jsonl`` when the recipe holds one out) and the SFT mix of every other access
    rotation an arm names (``calyrex mix``), each once; a mix made with another recipe is made
    again while nothing was trained on it (:func:`_trained_on`). The mixes are not committed,
    their records are: a mix made again on another machine for runs that trained on it must be
    the same rows (its recorded sha256s), else the code that builds it changed mid-study and
    the study stops, its record kept."""
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
        kept = stats.read_text() if stats.is_file() else None  # the record, as written
        record = None if kept is None else json.loads(kept)
        same = record is not None and all(
            record["config"].get(k, 0) == v for k, v in wanted.items()
        )
        if same and path.is_file():
            say(f"mix: {path} exists, not rebuilt")
            continue
        trained = _trained_on(cfg, out, name) if record is not None else []
        if trained and not same:
            raise ValueError(
                f"{path} was made with {record['config']}, not {wanted}, and "
                f"{', '.join(trained)} trained on it: use a new --out"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        mix(out=str(path), kind=kind, **wanted)
        if trained:  # made again (another machine) for the runs that read it: the same rows
            _same_rows(path, stats, kept, trained)
    return out / "data"


def _same_rows(path: Path, stats: Path, kept: str, trained: list[str]) -> None:
    """A mix made again where its record was (``kept``, the record's text): the rows (and
    validation rows) ``trained`` read must come back, sha256 for sha256; if not, the rows made
    are removed (a later run would take them for the record's), the record is put back as it
    was and the study stops."""
    from ...core.adapter_io import atomic_write
    from ..mix.command import val_path

    records = (json.loads(kept), json.loads(stats.read_text()))
    digests = [(r.get("sha256"), (r.get("validation") or {}).get("sha256")) for r in records]
    if digests[0] == digests[1]:
        return
    for made in (val_path(path), path):
        made.unlink(missing_ok=True)
    atomic_write(stats, lambda tmp: Path(tmp).write_text(kept))
    raise ValueError(
        f"{path} was made again and its rows differ from the ones {', '.join(trained)} trained "
        f"on (sha256 {digests[1][0]} against the recorded {digests[0][0]}): the code that builds "
        "the mix changed since; make it with that code (the commit of the study's first run) "
        "or use a new --out"
    )


def _trained_on(cfg: StudyConfig, out: Path, name: str) -> list[str]:
    """The runs and sweep runs in ``out`` whose arm trains on the mix file ``name``."""
    arms = [a for a in cfg.arms if a.data == name]
    found = [out / "train" / run_name(a, s) for a in arms for s in cfg.seeds_of(a)]
    found = [p for p in found if p.exists()]
    for key in {sweep_key(a) for a in arms}:
        found += sorted((out / "sweep").glob(SWEEP_RUN.format(key=key, lr="*")))
    return [str(p.relative_to(out)) for p in found]


def eval_data(out: Path | None = None) -> dict[str, str]:
    """Where the suites that take a ``--data`` path find their data: the shared copies, and the
    study's own held-out access dialogues (``OUT/data/sft.val.jsonl``, for ``mix_access``)."""
    from ..mix.sources import real_dir

    data = {"tensortrust": str(real_dir() / "attacks" / "tensortrust")}
    if out is not None:
        from ..mix.command import val_path

        data["mix_access"] = str(val_path(out / "data" / "sft.jsonl"))
    return data
